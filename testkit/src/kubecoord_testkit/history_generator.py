"""Synthetic coordination histories: realistic event logs with known answers.

Usage::

    kubecoord-testkit generate-history --out /tmp/logs --elections 20 --groups 4 --stores 4 --hours 24
    kubecoord-testkit generate-history --out /tmp/bad --inject overlapping_leadership=2 --inject lost_update=1

N elections, groups and stores over T hours, written as one JSON Lines file per process
(optionally gzip) plus ``_manifest.json`` (ignored by the reader: names starting with
'_' are skipped) with the event count and what was injected. The model:
- elections: a holder acquires (epoch + 1, valid_until = now + lease), renews every
  ``renew`` seconds, and after an exponential tenure either resigns (the successor
  acquires within 0.2 s, as a watch would drive it) or vanishes (the successor
  acquires shortly after the last valid_until);
- groups: members join, heart-beat (``renewed`` with valid_until), then leave or vanish
  (one or two observers log ``expired`` after the TTL) and rejoin later;
- stores: puts, versioned updates with occasional conflicts, deletes, at least 0.5 s
  apart per store (the pipeline's KV checks misjudge writes of one key closer than the
  clock skew: see kubecoord.analytics.kv);
- every process's clock is off by a constant up to ``skew`` seconds.
Injected violations (``inject``) add exactly one violation each of their type; a
``malformed`` count adds that many broken lines. Deterministic for a given seed.
Not guaranteed: statistical realism beyond this simple model.
"""

from __future__ import annotations

import argparse
import gzip
import heapq
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kubecoord.errors import InvalidArgumentError
from kubecoord.history import rfc3339
from kubecoord.wire.events import SCHEMA_VERSION, VIOLATION_TYPES, Primitive

Event = tuple[float, int, dict[str, Any]]
"""(true time, process index, fields)."""

START = 1_767_225_600.0  # 2026-01-01T00:00:00Z


@dataclass
class Spec:
    elections: int = 4
    groups: int = 2
    stores: int = 2
    hours: float = 1.0
    processes: int = 5
    namespace: str = "prod"
    backend: str = "kubernetes"
    start: float = START
    seed: int = 1
    lease: float = 15.0
    renew: float = 2.0
    tenure: float = 1200.0
    members: int = 4
    heartbeat: float = 5.0
    ttl: float = 15.0
    membership: float = 1800.0
    kv_rate: float = 0.2
    keys: int = 8
    skew: float = 0.05
    gzip: bool = False
    inject: dict[str, int] = field(default_factory=dict)
    malformed: int = 0
    coordinated: int = 1
    """Group-coordinator groups (rebalance events over 16 units, one rebalance per ~10 min)."""

    def check(self) -> None:
        unknown = sorted(set(self.inject) - set(VIOLATION_TYPES))
        if unknown:
            raise InvalidArgumentError(f"unknown violation type(s) {unknown}; known: {', '.join(VIOLATION_TYPES)}")
        if self.processes < 3:
            raise InvalidArgumentError("at least 3 processes are needed")
        if self.hours <= 0 or min(self.renew, self.lease, self.heartbeat, self.ttl) <= 0:
            raise InvalidArgumentError("hours and all intervals must be positive")
        if any(count < 0 for count in self.inject.values()) or self.malformed < 0:
            raise InvalidArgumentError("injection counts must not be negative")


@dataclass
class Manifest:
    events: int
    files: list[str]
    injected: dict[str, int]
    malformed: int


def _take(budget: dict[str, int], kind: str, rng: random.Random, chance: float) -> bool:
    """Spend one injection of ``kind`` with probability ``chance`` (1 at the last chance)."""
    if budget.get(kind, 0) > 0 and rng.random() < chance:
        budget[kind] -= 1
        return True
    return False


def _election(spec: Spec, name: str, rng: random.Random, budget: dict[str, int], end: float) -> Iterator[Event]:
    base = {"primitive": Primitive.LEADER_ELECTION, "name": name}
    t = spec.start + rng.uniform(0, 5)
    epoch, holder, previous = 0, rng.randrange(spec.processes), -1
    regress = False
    while t < end:
        epoch += 1
        term_epoch = epoch - 1 if regress else epoch  # the predecessor's epoch, reused
        regress = False
        member = f"node-{holder}"
        acquired = {"event": "acquired", "member": member, "epoch": term_epoch, "valid_until": t + spec.lease}
        yield t, holder, {**base, **acquired}
        stop = min(t + rng.expovariate(1 / spec.tenure), end)
        last_valid, renew_at = t + spec.lease, t + spec.renew
        rogue_at = t + (stop - t) / 2 if _take(budget, "overlapping_leadership", rng, 0.3) else None
        while renew_at < stop:
            if rogue_at is not None and renew_at >= rogue_at:
                # Another process believes it acquired while the holder still renews.
                rogue = (holder + 1) % spec.processes
                epoch += 1
                fields = {**base, "member": f"node-{rogue}", "epoch": epoch}
                yield renew_at, rogue, {**fields, "event": "acquired", "valid_until": renew_at + spec.lease}
                yield renew_at + 3.0, rogue, {**fields, "event": "resigned"}
                rogue_at = None
            yield renew_at, holder, {**base, "event": "renewed", "member": member, "epoch": term_epoch,
                                     "valid_until": renew_at + spec.lease}
            last_valid = renew_at + spec.lease
            renew_at += spec.renew
        if stop >= end:
            return
        if rng.random() < 0.5:
            yield stop, holder, {**base, "event": "resigned", "member": member, "epoch": term_epoch}
            t = stop + rng.uniform(0.005, 0.2)
        else:
            t = last_valid + rng.uniform(0.05, spec.renew)
        choices = [p for p in range(spec.processes) if p not in (holder, previous)]
        previous, holder = holder, rng.choice(choices)
        # The next holder (never the previous one) reuses the epoch that was just held.
        regress = epoch >= 3 and _take(budget, "epoch_not_increasing", rng, 0.3)


def _member(
    spec: Spec, group: str, index: int, rng: random.Random, budget: dict[str, int], end: float
) -> Iterator[Event]:
    base = {"primitive": Primitive.GROUP, "name": group, "member": f"m-{index}"}
    t = spec.start + rng.uniform(0, 10)
    while t < end:
        process = rng.randrange(spec.processes)
        yield t, process, {**base, "event": "joined"}
        stop = min(t + rng.expovariate(1 / spec.membership), end)
        beat, last = t + spec.heartbeat, t
        duplicate_at = t + (stop - t) / 2 if _take(budget, "duplicate_member", rng, 0.3) else None
        while beat < stop:
            if duplicate_at is not None and beat >= duplicate_at:
                intruder = (process + 1) % spec.processes
                yield beat, intruder, {**base, "event": "joined"}
                yield beat + 2.0, intruder, {**base, "event": "left"}
                duplicate_at = None
            yield beat, process, {**base, "event": "renewed", "valid_until": beat + spec.ttl}
            last, beat = beat, beat + spec.heartbeat
        if stop >= end:
            return
        if rng.random() < 0.7:
            yield stop, process, {**base, "event": "left"}
            t = stop + rng.uniform(5, 60)
        else:
            expired_at = last + spec.ttl + rng.uniform(0, 1)
            observers = rng.sample([p for p in range(spec.processes) if p != process], 2)
            for extra, observer in enumerate(observers[: rng.randint(1, 2)]):
                yield expired_at + extra * 0.01, observer, {**base, "event": "expired"}
            t = expired_at + rng.uniform(5, 60)


def _group(spec: Spec, name: str, rng: random.Random, budget: dict[str, int], end: float) -> Iterator[Event]:
    members = [_member(spec, name, i, random.Random(rng.random()), budget, end) for i in range(spec.members)]
    return heapq.merge(*members, key=lambda e: e[0])


def _store(spec: Spec, name: str, rng: random.Random, budget: dict[str, int], end: float) -> Iterator[Event]:
    base = {"primitive": Primitive.KV, "name": name}
    versions: dict[str, int] = {}
    t = spec.start + rng.expovariate(spec.kv_rate)
    while t < end:
        key = f"config/k-{rng.randrange(spec.keys)}"
        process = rng.randrange(spec.processes)
        fields = {**base, "key": key}
        current = versions.get(key)
        if current is None:
            versions[key] = 1
            yield t, process, {**fields, "event": "put", "version": 1}
            if _take(budget, "create_race", rng, 0.05):  # a second creator, the key already there
                yield t + 0.01, (process + 1) % spec.processes, {**fields, "event": "put", "version": 1}
        elif rng.random() < 0.05:
            del versions[key]
            yield t, process, {**fields, "event": "deleted", "version": current}
        else:
            if rng.random() < 0.1:
                stale = (process + 1) % spec.processes
                yield t, stale, {**fields, "event": "conflict", "version": max(current - 1, 1)}
            versions[key] = current + 1
            yield t, process, {**fields, "event": "updated", "version": current + 1}
            if _take(budget, "lost_update", rng, 0.05):
                other = (process + 2) % spec.processes
                yield t + 0.01, other, {**fields, "event": "updated", "version": current + 1}
            elif current >= 2 and _take(budget, "version_backwards", rng, 0.05):
                other = (process + 2) % spec.processes
                yield t + 2.0, other, {**fields, "event": "deleted", "version": current - 1}
            elif _take(budget, "stale_epoch_write", rng, 0.05):
                # A leader (epoch 8) writes, then a deposed one (epoch 7) still writes.
                other = (process + 2) % spec.processes
                yield t + 0.1, process, {**fields, "event": "updated", "version": current + 2, "epoch": 8}
                yield t + 2.0, other, {**fields, "event": "updated", "version": current + 3, "epoch": 7}
                versions[key] = current + 3
        # At least 0.5 s between a store's operations: the pipeline judges a key's
        # incarnations (put after delete) by log order, which clock skew can swap.
        t += max(0.5, rng.expovariate(spec.kv_rate))


def _coordinated(spec: Spec, name: str, rng: random.Random, budget: dict[str, int], end: float) -> Iterator[Event]:
    """An eager group coordinator: each generation its leader starts a rebalance, the
    previous holders revoke, then every member of the generation logs its assignment."""
    base = {"primitive": Primitive.GROUP_COORDINATOR, "name": name}
    units = [f"u{i}" for i in range(16)]
    members = [f"c-{i}" for i in range(spec.members)]

    def process(member: str) -> int:
        return int(member.split("-")[1]) % spec.processes

    held: dict[str, list[str]] = {}
    t, generation = spec.start + rng.uniform(0, 10), 0
    while t < end:
        generation += 1
        live = sorted(rng.sample(members, rng.randint(1, len(members))))
        yield t, process(live[0]), {**base, "event": "rebalance_started", "member": live[0], "generation": generation}
        for member, owned in sorted(held.items()):
            yield t + 0.05, process(member), {**base, "event": "revoked", "member": member,
                                               "generation": generation - 1, "units": owned}
        held = {m: units[i :: len(live)] for i, m in enumerate(live)}
        for i, member in enumerate(live):
            yield t + 0.2 + 0.01 * i, process(member), {**base, "event": "assigned", "member": member,
                                                         "generation": generation, "units": held[member]}
        if len(live) < len(members) and _take(budget, "unit_owned_twice", rng, 0.3):
            intruder = next(m for m in members if m not in live)  # takes a unit its holder still has
            grabbed = {**base, "member": intruder, "generation": generation, "units": held[live[0]][:1]}
            yield t + 1.0, process(intruder), {**grabbed, "event": "assigned"}
            yield t + 2.0, process(intruder), {**grabbed, "event": "revoked"}
        elif generation > 1 and _take(budget, "stale_generation_work", rng, 0.3):
            # A member starts on the previous generation after this one was assigned.
            yield t + 1.5, process(live[-1]), {**base, "event": "assigned", "member": live[-1],
                                                "generation": generation - 1, "units": []}
        t += max(5.0, rng.expovariate(1 / 600))


def _malformed_line(rng: random.Random, process: str) -> str:
    return rng.choice([
        '{"v":1,"ts":"2026-01-01T00:00:00.000000Z","process":"' + process + '",',  # torn line
        "not json at all",
        '{"v":1,"ts":"yesterday","process":"' + process + '","namespace":"x","primitive":"kv","name":"s",'
        '"event":"put","key":"k","version":1}',
        '{"v":1,"ts":"2026-01-01T00:00:00.000000Z","process":"' + process + '","namespace":"x",'
        '"primitive":"leader_election","name":"e","event":"acquired","member":"m"}',  # no epoch
    ])


def generate(out: Path, spec: Spec) -> Manifest:
    """Write the history described by ``spec`` into directory ``out``."""
    spec.check()
    rng = random.Random(spec.seed)
    end = spec.start + spec.hours * 3600
    budget = {kind: spec.inject.get(kind, 0) for kind in VIOLATION_TYPES}
    sources: list[Iterator[Event]] = []
    for i in range(spec.elections):
        sources.append(_election(spec, f"election-{i}", random.Random(rng.random()), budget, end))
    for i in range(spec.groups):
        sources.append(_group(spec, f"group-{i}", random.Random(rng.random()), budget, end))
    for i in range(spec.stores):
        sources.append(_store(spec, f"store-{i}", random.Random(rng.random()), budget, end))
    for i in range(spec.coordinated):
        sources.append(_coordinated(spec, f"coordinated-{i}", random.Random(rng.random()), budget, end))
    offsets = [rng.uniform(-spec.skew, spec.skew) for _ in range(spec.processes)]
    names = [f"node-{p}" for p in range(spec.processes)]
    out.mkdir(parents=True, exist_ok=True)
    suffix = ".jsonl.gz" if spec.gzip else ".jsonl"
    paths = [out / f"{name}{suffix}" for name in names]
    files: list[IO[str]] = [
        gzip.open(path, "wt", encoding="utf-8") if spec.gzip else open(path, "w", encoding="utf-8")  # noqa: SIM115
        for path in paths
    ]
    seqs = [0] * spec.processes
    malformed_at = sorted(rng.randrange(1, 1_000_000) for _ in range(spec.malformed))
    count = 0
    try:
        for t, process, fields in heapq.merge(*sources, key=lambda e: e[0]):
            if t >= end:
                continue
            seqs[process] += 1
            offset = offsets[process]
            line = {"v": SCHEMA_VERSION, "ts": rfc3339(t + offset), "seq": seqs[process], "source": "client",
                    "process": names[process], "backend": spec.backend, "namespace": spec.namespace, **fields}
            if "valid_until" in fields:
                line["valid_until"] = rfc3339(fields["valid_until"] + offset)
            files[process].write(json.dumps(line, separators=(",", ":")) + "\n")
            count += 1
            while malformed_at and malformed_at[0] <= count:
                malformed_at.pop(0)
                files[process].write(_malformed_line(rng, names[process]) + "\n")
        for _ in malformed_at:  # fewer events than the random positions: append at the end
            process = rng.randrange(spec.processes)
            files[process].write(_malformed_line(rng, names[process]) + "\n")
    finally:
        for handle in files:
            handle.close()
    missed = {kind: n for kind, n in budget.items() if n}
    if missed:
        raise InvalidArgumentError(f"history too short to inject {missed}: raise hours or entity counts")
    injected = {kind: spec.inject.get(kind, 0) for kind in VIOLATION_TYPES}
    manifest = Manifest(events=count, files=[p.name for p in paths], injected=injected, malformed=spec.malformed)
    (out / "_manifest.json").write_text(json.dumps(manifest.__dict__, indent=2) + "\n")
    return manifest


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = Spec()
    parser.add_argument("--out", required=True, type=Path, help="directory for one log file per process")
    for name in ("elections", "groups", "stores", "processes", "seed", "malformed"):
        parser.add_argument(f"--{name}", type=int, default=getattr(defaults, name))
    for name in ("hours", "renew", "lease", "skew"):
        parser.add_argument(f"--{name}", type=float, default=getattr(defaults, name))
    parser.add_argument("--gzip", action="store_true", help="write .jsonl.gz files")
    parser.add_argument("--inject", action="append", default=[], metavar="TYPE=N",
                        help=f"inject N violations of TYPE ({', '.join(VIOLATION_TYPES)})")


def run(args: argparse.Namespace) -> int:
    inject: dict[str, int] = {}
    for item in args.inject:
        kind, _, count = item.partition("=")
        inject[kind] = int(count or 1)
    spec = Spec(elections=args.elections, groups=args.groups, stores=args.stores, processes=args.processes,
                seed=args.seed, malformed=args.malformed, hours=args.hours, renew=args.renew, lease=args.lease,
                skew=args.skew, gzip=args.gzip, inject=inject)
    manifest = generate(args.out, spec)
    print(f"{manifest.events} events in {len(manifest.files)} files under {args.out}; injected {manifest.injected}")
    return 0
