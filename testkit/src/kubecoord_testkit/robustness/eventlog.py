"""A recorded robustness history as a coordination event log, so that ``kubecoord analyze``
judges the same operations Porcupine judged (a second, independent judge).

What is written, one file per client (``BACKEND-N.jsonl``, schema version 1, backend
``memory``, namespace ``robustness-BACKEND``), times on the history's one monotonic clock
(so the analysis runs with no skew tolerance):

- KV writes that were acknowledged: ``put``/``updated`` with the version the write
  returned, ``deleted`` with the version it removed (the one recording.merge took from the
  client's own event log, else the one it expected); ``sent`` is the call, ``ts`` the
  return. Reads are not events of the log; definite failures and writes of unknown
  outcome are not logged, as a kubecoord client does not log them; nor is an acknowledged
  delete whose removed version its client never learned (a kubecoord client logs that
  version, and the log's schema requires it).
- Each lock or semaphore hold: on the record ``LOCK`` (a semaphore's slot: ``LOCK-SLOT``),
  leader ``acquired`` at acquire's return (``sent``: its call) with the token as epoch and
  the lock's own ``acquired``; the hold ends at the last moment its holder claimed it
  (``resigned``, or ``lost`` when the end is unknown), where Porcupine's model lets it end.

Verdicts compared (``Agreement``): per lock, the pipeline's ``overlapping_leadership`` and
``epoch_not_increasing`` against Porcupine's lock model, both ways. Per key, the
pipeline's ``lost_update``, ``version_backwards`` and ``create_race`` against Porcupine's
register, judged twice: on the whole history, and on the log's view of it (``log_view``:
the acknowledged writes the log holds, nothing else). Porcupine on the log's view is the
exact judge of what the pipeline can know, so the rules, both ways, are:

- every key the pipeline flags has no linearization in the log's view (the pipeline is
  sound), and on a key whose every write is in the log (no write of unknown outcome, no
  delete of unknown version) every key the log's view flags the pipeline flags (it is
  complete) and Porcupine flags on the whole history;
- so a key only the pipeline flags is one where every linearization of the whole history
  has a write of unknown outcome take effect — the log holds no such write
  (``Agreement.unlogged``) — and a key only Porcupine flags is one whose violation only
  reads, refusals or definite failures show, which the log does not carry
  (``Agreement.unseen``), or one with such a write.
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
        removed = _removed_version(op)
        if removed is None:
            return None  # its client never learned the version it removed; the log needs it
        fields.update(event="deleted", version=removed)
    else:
        fields.update(event="put" if kind == "put" else "updated", version=output.get("version"))
    return fields


def _removed_version(op: dict[str, Any]) -> int | None:
    """The version an acknowledged delete removed: the one its client's own log names
    (recording.merge), else the one it expected; None when neither is known."""
    removed = (op["output"] or {}).get("version") or op["input"].get("expected_version")
    return removed if isinstance(removed, int) else None


def _unloggable(op: dict[str, Any]) -> bool:
    """A write that may have changed its key but is not in the log (_kv_event): one of
    unknown outcome, or an acknowledged delete of unknown removed version."""
    operation = op["input"]
    if operation["op"] == "get":
        return False
    if op["return"] is None or op["output"] is None:
        return True
    return op["output"].get("status") == "ok" and operation["op"] == "delete" and _removed_version(op) is None


def log_view(history: dict[str, Any]) -> dict[str, Any]:
    """The KV part of ``history`` as the event log holds it, for Porcupine: each logged
    write with its call, return and version, and nothing the log lacks (reads, failures,
    writes of unknown outcome, expected versions, fences, values)."""
    writes = []
    for op in history["kv"]:
        event = _kv_event(op)
        if event is None:
            continue
        kind = op["input"]["op"]
        operation: dict[str, Any] = {"op": kind, "key": event["key"]}
        if kind != "delete":
            operation["value"] = f"v{event['version']}"  # the log carries no values: the version names the write
        writes.append({"client": op["client"], "call": op["call"], "return": op["return"], "input": operation,
                       "output": {"status": "ok", "version": event["version"]}})
    return {"kv": writes, "locks": [], "faults": []}


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
    """The two judges' verdicts on one history, side by side (the rules: this module's docstring)."""

    backend: str
    porcupine_keys: set[str] = field(default_factory=set)
    """Keys Porcupine flags on the whole history."""
    log_keys: set[str] = field(default_factory=set)
    """Keys Porcupine flags on the log's view of it (log_view)."""
    porcupine_locks: set[str] = field(default_factory=set)
    pipeline_keys: set[str] = field(default_factory=set)
    pipeline_locks: set[str] = field(default_factory=set)
    unsure_keys: set[str] = field(default_factory=set)
    """Keys with a write the log cannot hold: one of unknown outcome, or a delete of unknown version."""

    @property
    def unlogged(self) -> set[str]:
        """Keys only the pipeline flags. Within the rules, every linearization of the whole
        history has a write of unknown outcome take effect on them, which the log cannot hold."""
        return self.pipeline_keys - self.porcupine_keys

    @property
    def unshown(self) -> set[str]:
        """Keys only Porcupine flags whose violation the log's view does not show: only
        reads, refusals or definite failures show it, and the log carries none of them."""
        return self.porcupine_keys - self.pipeline_keys - self.log_keys

    def disagreements(self) -> list[str]:
        """The rules broken, in words (none: the judges agree)."""
        found = []
        complete = self.log_keys - self.unsure_keys
        rules = (
            (self.pipeline_keys - self.log_keys, "the pipeline flags keys {} whose logged writes have a linearization"),
            (complete - self.pipeline_keys, "the pipeline misses keys {}, whose every write is logged and whose "
                                            "logged writes have no linearization"),
            (complete - self.porcupine_keys, "the logged writes of keys {}, every write of theirs, have no "
                                             "linearization, but the whole history has"),
        )
        for keys, text in rules:
            if keys:
                found.append(text.format(sorted(keys)))
        if self.pipeline_locks != self.porcupine_locks:
            found.append(f"only one judge flags locks {sorted(self.pipeline_locks ^ self.porcupine_locks)}")
        return found

    @property
    def agrees(self) -> bool:
        return not self.disagreements()

    def describe(self) -> str:
        missed = self.porcupine_keys - self.pipeline_keys - self.unshown
        return (f"{self.backend}: Porcupine flags keys {sorted(self.porcupine_keys)}, locks "
                f"{sorted(self.porcupine_locks)}; the pipeline flags keys {sorted(self.pipeline_keys)}, locks "
                f"{sorted(self.pipeline_locks)}"
                + (f" (keys {sorted(self.unlogged)}: after a write of unknown outcome that took effect, which the "
                   f"log cannot hold)" if self.unlogged else "")
                + (f" (keys {sorted(self.unshown)}: shown only by reads, refusals or failures, which the log does "
                   f"not carry)" if self.unshown else "")
                + (f" (keys {sorted(missed)}: with a write the log cannot hold)" if missed else "")
                + (": agree" if self.agrees else ": DISAGREE: " + "; ".join(self.disagreements())))


def compare(backend: str, history: dict[str, Any], porcupine: list[dict[str, Any]],
            pipeline: list[dict[str, Any]], *, log_view: list[dict[str, Any]]) -> Agreement:
    """``history``: what both judged (recording.merge's form); ``porcupine``: the checker's
    violations (model, partition) on it, ``log_view``: on its log_view; ``pipeline``: rows of
    the analysis's violations table (type, namespace, name, subject) of any namespace."""
    agreement = Agreement(backend)
    agreement.unsure_keys = {op["input"]["key"] for op in history["kv"] if _unloggable(op)}
    for violation in porcupine:
        target = agreement.porcupine_keys if violation["model"] == "kv" else agreement.porcupine_locks
        target.add(violation["partition"])
    agreement.log_keys = {violation["partition"] for violation in log_view if violation["model"] == "kv"}
    for row in pipeline:
        if row["namespace"] != f"robustness-{backend}":
            continue
        if row["type"] in KV_VIOLATIONS:
            agreement.pipeline_keys.add(row["subject"])
        elif row["type"] in LOCK_VIOLATIONS:
            agreement.pipeline_locks.add(lock_of(row["name"]))
    return agreement
