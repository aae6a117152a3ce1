"""A recorded robustness history as a coordination event log, so that ``kubecoord analyze``
judges the same operations Porcupine judged (a second, independent judge).

What is written, one file per client (``BACKEND-N.jsonl``, schema version 1, backend
``memory``, namespace ``robustness-BACKEND``), times on the history's one monotonic clock
(so the analysis runs with no skew tolerance):

- KV writes that were acknowledged: ``put``/``updated`` with the version the write
  returned, ``deleted`` with the version it expected (when it named one); ``sent`` is the
  call, ``ts`` the return. Reads are not events of the log; definite failures and
  writes of unknown outcome are not logged, as a kubecoord client does not log them;
  nor are blind deletes (a kubecoord client logs the version it deleted, which the
  history does not record).
- Each lock or semaphore hold: on the record ``LOCK`` (a semaphore's slot: ``LOCK-SLOT``),
  leader ``acquired`` at acquire's return (``sent``: its call) with the token as epoch and
  the lock's own ``acquired``; the hold ends at the last moment its holder claimed it
  (``resigned``, or ``lost`` when the end is unknown), where Porcupine's model lets it end.

Verdicts compared (``Agreement``): per lock, the pipeline's ``overlapping_leadership`` and
``epoch_not_increasing`` against Porcupine's lock model; per key, the pipeline's
``lost_update``, ``version_backwards`` and ``create_race`` against Porcupine's register.
Porcupine sees more than the log can show (reads, refusals, outcomes the client never
learned), so on KV the rule is one-way: a key the pipeline flags must be one Porcupine
flags, or one with a write the log cannot hold — a delete that took effect unbeknown to its
client, or a blind delete, is in no log here, so the next put reads as a create race
(named in ``Agreement.describe``). The tier's KV traffic makes blind deletes of every key,
so on its histories the KV comparison is decided only on the hand-made one; locks must
agree both ways on every history.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubecoord.history import rfc3339
from kubecoord.wire.events import SCHEMA_VERSION

ORIGIN = 1_767_225_600.0
"""Added to the history's monotonic seconds to give the log's timestamps."""
STORE = "robust"
KV_VIOLATIONS = frozenset({"lost_update", "version_backwards", "create_race"})
LOCK_VIOLATIONS = frozenset({"overlapping_leadership", "epoch_not_increasing"})


def record_name(lock: str, max_holders: int, slot: int) -> str:
    """The record a hold is logged on: the lock's, or its semaphore slot's."""
    return lock if max_holders == 1 else f"{lock}-{slot}"


def lock_of(record: str) -> str:
    """The lock a record belongs to (record_name's inverse for this module's names)."""
    head, _, tail = record.rpartition("-")
    return head if head and tail.isdigit() else record


def events(history: dict[str, Any]) -> dict[int, list[dict[str, Any]]]:
    """Per client, the events of ``history`` (recording.merge's form), in time order."""
    found: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for op in history["kv"]:
        event = _kv_event(op)
        if event is not None:
            found[op["client"]].append(event)
    locks = history["locks"]
    for acquire, end in zip(locks[::2], locks[1::2], strict=True):
        if acquire["input"]["op"] != "acquire" or end["input"]["op"] != "end":
            raise ValueError("lock operations come as acquire, end pairs (recording.merge)")
        found[acquire["client"]].extend(_hold_events(acquire, end))
    for client in found.values():
        client.sort(key=lambda e: e["_t"])
    return dict(found)


def _kv_event(op: dict[str, Any]) -> dict[str, Any] | None:
    output, operation = op["output"], op["input"]
    if op["return"] is None or output is None or output.get("status") != "ok":
        return None
    kind = operation["op"]
    if kind == "get":
        return None
    fields: dict[str, Any] = {"primitive": "kv", "name": STORE, "key": operation["key"], "_t": op["return"],
                              "sent": op["call"]}
    if kind == "delete":
        if operation.get("expected_version") is None:
            return None  # the version a blind delete removed is not in the history; the log needs it
        fields.update(event="deleted", version=operation["expected_version"])
    else:
        fields.update(event="put" if kind == "put" else "updated", version=output.get("version"))
    return fields


def _unloggable(op: dict[str, Any]) -> bool:
    """A write that may have changed its key but is not in the log (_kv_event)."""
    operation = op["input"]
    if operation["op"] == "get":
        return False
    return op["return"] is None or (operation["op"] == "delete" and operation.get("expected_version") is None)


def _hold_events(acquire: dict[str, Any], end: dict[str, Any]) -> list[dict[str, Any]]:
    held = acquire["input"]
    name = record_name(held["lock"], held["max_holders"], held["slot"])
    common = {"name": name, "member": held["holder"], "epoch": held["token"]}
    start, last = acquire["return"], max(end["call"], acquire["return"])
    return [
        {"primitive": "leader_election", "event": "acquired", "_t": start, "sent": acquire["call"], **common},
        {"primitive": "lock", "event": "acquired", "_t": start, **common},
        {"primitive": "leader_election", "event": "resigned" if end["return"] is not None else "lost", "_t": last,
         **common},
    ]


def write(history: dict[str, Any], folder: Path, backend: str) -> list[Path]:
    """The event log of ``history``, one file per client under ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for client, found in sorted(events(history).items()):
        process = f"{backend}-{client}"  # unique across the histories analysed together
        lines = []
        for seq, event in enumerate(found, start=1):
            fields = {k: v for k, v in event.items() if k != "_t" and v is not None}
            line = {"v": SCHEMA_VERSION, "ts": rfc3339(ORIGIN + event["_t"]), "seq": seq, "source": "client",
                    "process": process, "backend": "memory", "namespace": f"robustness-{backend}", **fields}
            if "sent" in line:
                line["sent"] = rfc3339(ORIGIN + line["sent"])
            lines.append(json.dumps(line, separators=(",", ":")) + "\n")
        path = folder / f"{process}.jsonl"
        path.write_text("".join(lines), encoding="utf-8")
        written.append(path)
    return written


@dataclass
class Agreement:
    """The two judges' verdicts on one history, side by side."""

    backend: str
    porcupine_keys: set[str] = field(default_factory=set)
    porcupine_locks: set[str] = field(default_factory=set)
    pipeline_keys: set[str] = field(default_factory=set)
    pipeline_locks: set[str] = field(default_factory=set)
    unsure_keys: set[str] = field(default_factory=set)
    """Keys with a write the log cannot hold: one of unknown outcome, or a blind delete."""

    @property
    def unlogged(self) -> set[str]:
        """Keys only the pipeline flags, explained by a write of unknown outcome."""
        return (self.pipeline_keys - self.porcupine_keys) & self.unsure_keys

    @property
    def agrees(self) -> bool:
        return (self.pipeline_keys - self.porcupine_keys <= self.unsure_keys
                and self.pipeline_locks == self.porcupine_locks)

    def describe(self) -> str:
        return (f"{self.backend}: Porcupine flags keys {sorted(self.porcupine_keys)}, locks "
                f"{sorted(self.porcupine_locks)}; the pipeline flags keys {sorted(self.pipeline_keys)}, locks "
                f"{sorted(self.pipeline_locks)}"
                + (f" (keys {sorted(self.unlogged)}: after a write the log cannot hold)" if self.unlogged else "")
                + (": agree" if self.agrees else ": DISAGREE"))


def compare(backend: str, history: dict[str, Any], porcupine: list[dict[str, Any]],
            pipeline: list[dict[str, Any]]) -> Agreement:
    """``history``: what both judged (recording.merge's form); ``porcupine``: the checker's
    violations (model, partition); ``pipeline``: rows of the analysis's violations table
    (type, namespace, name, subject) of any namespace."""
    agreement = Agreement(backend)
    agreement.unsure_keys = {op["input"]["key"] for op in history["kv"] if _unloggable(op)}
    for violation in porcupine:
        target = agreement.porcupine_keys if violation["model"] == "kv" else agreement.porcupine_locks
        target.add(violation["partition"])
    for row in pipeline:
        if row["namespace"] != f"robustness-{backend}":
            continue
        if row["type"] in KV_VIOLATIONS:
            agreement.pipeline_keys.add(row["subject"])
        elif row["type"] in LOCK_VIOLATIONS:
            agreement.pipeline_locks.add(lock_of(row["name"]))
    return agreement
