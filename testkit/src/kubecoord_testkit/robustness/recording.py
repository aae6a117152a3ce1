"""Recording what clients did and when, and merging the records into the checker's history.

Each client (a process, or a thread for memory://) appends JSON lines to a file of its own,
one line per event, flushed at once, so a client killed with kill -9 leaves every call it
made on disk and its last operation without a return (pending). Times are
``time.monotonic()``: CLOCK_MONOTONIC is one clock for every process of a host, so the
clients' records share it.

Events:

- ``call`` (op, kind "kv", input, at) and ``return`` (op, output, at): a KV operation; an
  operation with a call and no return is pending (its outcome is unknown); ``unknown``
  (op, error) says why, for the reader; ``drop`` (op) withdraws a call that claims
  nothing (a read that failed).
- ``acquired`` (hold, lock, max_holders, slot, token, call, at): a lock or semaphore
  acquire that returned True; ``held`` (hold, at): the holder still believed it held
  (is_held() was True) at ``at``; ``ended`` (hold, how, at): it had stopped believing by
  ``at`` (release returned, or is_held() turned False); ``at`` null when release's outcome
  is unknown. A hold with no ``ended`` (its client was killed) ends at an unknown moment
  after its last ``held``.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import IO, Any


class Recorder:
    """One client's event file. Thread-safe; every line is flushed when written."""

    def __init__(self, path: Path, client: str) -> None:
        self.client = client
        self._file: IO[str] = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
        self._lock = threading.Lock()
        self._next = 0

    def _write(self, event: dict[str, Any]) -> None:
        line = json.dumps(event, separators=(",", ":")) + "\n"
        with self._lock:
            self._file.write(line)
            self._file.flush()

    def _id(self) -> int:
        with self._lock:
            self._next += 1
            return self._next

    def call(self, input: dict[str, Any]) -> tuple[int, float]:
        """Records the call of a KV operation just before it is made; its id and call time."""
        op = self._id()
        at = time.monotonic()
        self._write({"e": "call", "op": op, "kind": "kv", "input": input, "at": at})
        return op, at

    def returned(self, op: int, output: dict[str, Any]) -> None:
        self._write({"e": "return", "op": op, "output": output, "at": time.monotonic()})

    def unknown(self, op: int, error: BaseException) -> None:
        self._write({"e": "unknown", "op": op, "error": f"{type(error).__name__}: {error}"})

    def drop(self, op: int) -> None:
        self._write({"e": "drop", "op": op})

    def acquired(self, lock: str, max_holders: int, slot: int, token: int, call: float) -> int:
        hold = self._id()
        self._write({"e": "acquired", "hold": hold, "lock": lock, "max_holders": max_holders, "slot": slot,
                     "token": token, "call": call, "at": time.monotonic()})
        return hold

    def held(self, hold: int, at: float) -> None:
        self._write({"e": "held", "hold": hold, "at": at})

    def ended(self, hold: int, how: str, *, known: bool = True) -> None:
        self._write({"e": "ended", "hold": hold, "how": how, "at": time.monotonic() if known else None})

    def close(self) -> None:
        with self._lock:
            self._file.close()


def merge(records: Path, faults: list[dict[str, Any]] | None = None, *, own: Path | None = None) -> dict[str, Any]:
    """Every client's file under ``records`` (``CLIENT.jsonl``) as one checker history:
    ``{"kv": [...], "locks": [...], "faults": [...]}``, client ids numbered from 0 in the
    order of the files' names. A line cut short by kill -9 is ignored. ``own``: the folder
    of the clients' own event logs (``CLIENT.jsonl``, kubecoord.history), whose ``deleted``
    events give each acknowledged delete the version it removed (``output.version``,
    deleted_versions)."""
    kv: list[dict[str, Any]] = []
    locks: list[dict[str, Any]] = []
    for number, path in enumerate(sorted(records.glob("*.jsonl"))):
        calls: dict[int, dict[str, Any]] = {}
        holds: dict[int, dict[str, Any]] = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue  # the last line of a killed client, half written
            kind = event["e"]
            if kind == "call":
                calls[event["op"]] = {"client": number, "call": event["at"], "return": None,
                                      "input": event["input"], "output": None}
            elif kind == "return" and event["op"] in calls:
                calls[event["op"]].update({"return": event["at"], "output": event["output"]})
            elif kind == "drop":
                calls.pop(event["op"], None)
            elif kind == "acquired":
                holds[event["hold"]] = {**event, "last": event["at"], "end": None, "ended": False}
            elif kind == "held" and event["hold"] in holds:
                holds[event["hold"]]["last"] = max(holds[event["hold"]]["last"], event["at"])
            elif kind == "ended" and event["hold"] in holds:
                holds[event["hold"]].update({"end": event["at"], "ended": True})
        if own is not None and (own / path.name).is_file():
            attach_deleted_versions(list(calls.values()), deleted_events(own / path.name))
        kv.extend(calls.values())
        for hold in holds.values():
            common = {"lock": hold["lock"], "max_holders": hold["max_holders"], "holder": path.stem,
                      "slot": hold["slot"]}
            locks.append({"client": number, "call": hold["call"], "return": hold["at"],
                          "input": {"op": "acquire", "token": hold["token"], **common}, "output": {"status": "ok"}})
            end = hold["end"]
            locks.append({"client": number, "call": hold["last"], "return": end,
                          "input": {"op": "end", **common},
                          "output": {"status": "ok"} if end is not None else None})
    return {"kv": kv, "locks": locks, "faults": faults or []}


MONO_ROUNDING = 1e-6
"""The event log writes ``mono`` rounded to microseconds."""


def deleted_events(path: Path) -> dict[str, list[tuple[float | None, int]]]:
    """Per key, the ``deleted`` KV events of one client's own event log, in its order:
    (``mono``, the client's monotonic clock at the event, when logged; the version removed).
    A torn last line (kill -9) is ignored."""
    found: dict[str, list[tuple[int, float | None, int]]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("primitive") == "kv" and event.get("event") == "deleted" and isinstance(event.get("version"), int):
            found.setdefault(event["key"], []).append((event["seq"], event.get("mono"), event["version"]))
    return {key: [(mono, version) for _, mono, version in sorted(rows)] for key, rows in found.items()}


def attach_deleted_versions(ops: list[dict[str, Any]], logged: dict[str, list[tuple[float | None, int]]]) -> None:
    """Gives each acknowledged delete of one client (``ops``: its KV operations) the version
    its own log says it removed. The client makes one call at a time, so a logged event
    belongs to the delete whose interval holds its ``mono``; an event without ``mono``
    (memory:// stamps its own times) to the next acknowledged delete of its key, in order,
    until a delete of unknown outcome (whose event may or may not be there) makes the
    order ambiguous. A delete left without a version is one the log cannot hold."""
    for key, queue in logged.items():
        deletes = sorted((op for op in ops if op["input"]["op"] == "delete" and op["input"]["key"] == key
                          and (op["return"] is None or op["output"]["status"] == "ok")), key=lambda op: op["call"])
        events = list(queue)
        for op in deletes:
            if events and events[0][0] is not None:
                while events and events[0][0] is not None and events[0][0] < op["call"] - MONO_ROUNDING:
                    events.pop(0)  # a delete of unknown outcome's event
            if not events:
                break
            mono, version = events[0]
            if op["return"] is None:
                if mono is None:
                    break
                continue
            if mono is not None and mono > op["return"] + MONO_ROUNDING:
                continue  # this delete's event is not in the log
            events.pop(0)
            op["output"]["version"] = version


def figures(history: dict[str, Any]) -> dict[str, int]:
    """Operations and pending operations of a merged history."""
    ops = history["kv"] + history["locks"]
    fenced = [op for op in history["kv"] if "fence" in op["input"]]
    return {
        "kv_operations": len(history["kv"]),
        "fenced_writes": len(fenced),
        "fenced_refused": sum((op["output"] or {}).get("status") == "fenced" for op in fenced),
        "kv_pending": sum(op["return"] is None for op in history["kv"]),
        "holds": sum(op["input"]["op"] == "acquire" for op in history["locks"]),
        "holds_end_unknown": sum(op["return"] is None for op in history["locks"]),
        "operations": len(ops),
        "pending": sum(op["return"] is None for op in ops),
    }
