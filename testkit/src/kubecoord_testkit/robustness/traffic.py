"""The traffic of the robustness tier: one client's loop of KV operations or of lock holds,
recorded for the checker (recording.py); ``python -m kubecoord_testkit.robustness.traffic``
runs one client as a process.

KV clients (role ``kv``) share a few keys and do, at random: server reads
(``fetch_confirmed`` with a max_age no cache can meet, so the server answers),
create-only puts, updates with the expected version of this client's last read, blind
updates, and deletes (half of them conditional). Every value written is unique
(``CLIENT:N``), so a read names the write it saw. Outcomes: the write's answer, a
definite failure (KeyExistsError, VersionConflictError, KeyNotFoundError; a
BackendUnavailableError of that class itself, which says the write was not applied), or
unknown (OutcomeUnknownError and the other subclasses, a timeout, any other error): an
unknown outcome stays in the history without a return. A KV client writes kubecoord's own
event log (``connect(history=...)``, the runner's ``own/`` folder): the version a delete
removed, which Storage.delete does not return, is the one its ``deleted`` event names
(recording.merge puts it in the history, where Porcupine checks it). After one, the client reads until the
backend answers again before it writes anything else: a client that keeps writing while
its server is down would fill the history with pending writes, which blow up the
checker's search. A read that fails claims nothing and is left out.

Lock clients (roles ``lock`` and ``semaphore``) acquire with a short timeout, check
is_held() every 50 ms while holding for 0.1-0.6 s (each True recorded: the holder still
claims the lock), and release. A hold ends at release's return, or when is_held() turns
False (lost); when release's outcome is unknown or the client is killed, it ends at an
unknown moment after its last recorded claim.

Fenced writes: each holder writes once per hold, with ``fence=Fence(DOMAIN, token)``, a
blind update of its domain's key in the store ``robust-fenced`` (the lock's name, a
semaphore slot's ``NAME-SLOT``: one key per domain, created unfenced at the client's
start), and reads the key back from the server. After a hold ended (lost or released)
the client writes once more, half the time, with the ended hold's token — the late write
of a holder that was frozen past its lease — which the store must refuse with
FencedError once a later holder's write was accepted. Outcomes as for KV writes, plus
``fenced`` (FencedError: nothing written).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import random
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubecoord.api import Coordinator, Fence, Lock, Semaphore, Storage
from kubecoord.errors import (
    BackendUnavailableError,
    CoordinationError,
    FencedError,
    KeyExistsError,
    KeyNotFoundError,
    LockNotHeldError,
    VersionConflictError,
)
from kubecoord_testkit.robustness.recording import Recorder

KEYS = ("k0", "k1", "k2")
READ_MAX_AGE = 1e-9
"""fetch_confirmed's max_age: no cache's evidence is this fresh, so every read asks the server."""
STORE = "robust"
LOCK = "robust-lock"
SEMAPHORE = "robust-sem"
SEMAPHORE_SLOTS = 2
FENCED_STORE = "robust-fenced"
LATE_WRITES = 0.5
"""How often a client writes once more with the token of a hold that ended."""
DEFINITE: dict[type[CoordinationError], str] = {
    KeyExistsError: "exists", VersionConflictError: "conflict", KeyNotFoundError: "notfound", FencedError: "fenced",
}
"""The errors that say a write was not applied, and the checker's names for them."""


def run_kv(coord: Coordinator, recorder: Recorder, rng: random.Random, stop: threading.Event) -> None:
    """KV traffic until ``stop`` is set (or the coordinator is closed under it)."""
    storage = _opened(lambda: coord.storage(STORE), stop)
    if storage is None:
        return
    versions: dict[str, int] = {}
    written = 0
    unsure = False
    while not stop.is_set():
        key = rng.choice(KEYS)
        if unsure:
            unsure = not _read(storage, recorder, key, versions)
            if unsure:
                stop.wait(0.1)
            continue
        choice = rng.random()
        if choice < 0.4:
            _read(storage, recorder, key, versions)
            continue
        written += 1
        value = f"{recorder.client}:{written}"
        expected = versions.get(key, 1)
        if choice < 0.55:
            operation: dict[str, Any] = {"op": "put", "key": key, "value": value}
        elif choice < 0.75:
            operation = {"op": "update", "key": key, "value": value, "expected_version": expected}
        elif choice < 0.85:
            operation = {"op": "update", "key": key, "value": value}
        elif choice < 0.925:
            operation = {"op": "delete", "key": key, "expected_version": expected}
        else:
            operation = {"op": "delete", "key": key}
        unsure = not _write(storage, recorder, operation)
        stop.wait(rng.uniform(0.0, 0.02))


def _read(storage: Storage, recorder: Recorder, key: str, versions: dict[str, int]) -> bool:
    """A server read; whether the server answered."""
    op, _ = recorder.call({"op": "get", "key": key})
    try:
        current, _ = storage.fetch_confirmed(key, max_age=READ_MAX_AGE)
    except (CoordinationError, TimeoutError):
        recorder.drop(op)
        return False
    if current is None:
        recorder.returned(op, {"status": "notfound"})
        versions.pop(key, None)
    else:
        recorder.returned(op, {"status": "ok", "value": current.value, "version": current.version})
        versions[key] = current.version
    return True


def _write(storage: Storage, recorder: Recorder, operation: dict[str, Any]) -> bool:
    """One write, recorded; False when its outcome is unknown or the backend was unavailable.
    ``operation`` may carry ``fence`` (a token) and ``domain`` (its fencing domain)."""
    op, _ = recorder.call(operation)
    key, expected = operation["key"], operation.get("expected_version")
    fence = Fence(operation["domain"], operation["fence"]) if "fence" in operation else None
    try:
        if operation["op"] == "put":
            version: int | None = storage.put(key, operation["value"], fence=fence)
        elif operation["op"] == "update":
            version = storage.update(key, operation["value"], expected_version=expected, fence=fence)
        else:
            storage.delete(key, expected_version=expected, fence=fence)
            version = None
    except (KeyExistsError, VersionConflictError, KeyNotFoundError, FencedError) as exc:
        status = next(name for kind, name in DEFINITE.items() if isinstance(exc, kind))
        recorder.returned(op, {"status": status})
        return True
    except BackendUnavailableError as exc:
        if type(exc) is BackendUnavailableError:  # the class itself: the write was not applied
            recorder.returned(op, {"status": "refused"})
        else:
            recorder.unknown(op, exc)
        return False
    except (CoordinationError, TimeoutError, OSError) as exc:
        recorder.unknown(op, exc)
        return False
    recorder.returned(op, {"status": "ok"} if version is None else {"status": "ok", "version": version})
    return True


def run_lock(coord: Coordinator, recorder: Recorder, rng: random.Random, stop: threading.Event, *,
             semaphore: bool) -> None:
    """Lock (or semaphore) holds, each with a fenced write, until ``stop`` is set."""
    name, slots = (SEMAPHORE, SEMAPHORE_SLOTS) if semaphore else (LOCK, 1)
    lock: Lock | None = _opened(
        lambda: coord.semaphore(name, slots, id=recorder.client) if semaphore else coord.lock(name, id=recorder.client),
        stop,
    )
    fenced: Storage | None = _opened(lambda: coord.storage(FENCED_STORE), stop)
    if lock is None or fenced is None:
        return
    writer = _FencedWriter(fenced, recorder, stop)
    for slot in range(slots):
        writer.create(domain(name, slots, slot))
    while not stop.is_set():
        call = time.monotonic()
        try:
            acquired = lock.acquire(timeout=2, cancel=stop)
        except CoordinationError:
            acquired = False
            if lock.is_held():  # won, but the answer was lost on the way: never claimed, so given back
                with contextlib.suppress(CoordinationError):
                    lock.release()
        token = lock.token
        if not acquired or token is None:
            stop.wait(rng.uniform(0.05, 0.2))
            continue
        slot = (lock.slot if isinstance(lock, Semaphore) else 0) or 0
        fence = Fence(domain(name, slots, slot), token)
        hold = recorder.acquired(name, slots, slot, token, call)
        _hold(lock, recorder, hold, rng, stop, write=functools.partial(writer.write, fence))
        if rng.random() < LATE_WRITES:
            writer.write(fence)  # late: the hold has ended, a successor may have written
        stop.wait(rng.uniform(0.0, 0.1))


def domain(name: str, slots: int, slot: int) -> str:
    """The fencing domain of a lock (its name) or of a semaphore's slot (``NAME-SLOT``, the
    slot's lock), as docs/locks.md has holders fence."""
    return name if slots == 1 else f"{name}-{slot}"


def _hold(lock: Lock, recorder: Recorder, hold: int, rng: random.Random, stop: threading.Event, *,
          write: Callable[[], None]) -> None:
    """One hold from acquire's return to its end: is_held() checked every 50 ms (each True
    recorded), the fenced write made while held, then release."""
    until = time.monotonic() + rng.uniform(0.1, 0.6)
    written = False
    while time.monotonic() < until and not stop.is_set():
        at = time.monotonic()
        if not lock.is_held():
            recorder.ended(hold, "lost")
            return
        recorder.held(hold, at)
        if not written:
            written = True
            write()
        stop.wait(0.05)
    at = time.monotonic()
    if not lock.is_held():
        recorder.ended(hold, "lost")
        return
    recorder.held(hold, at)
    try:
        lock.release()
    except LockNotHeldError:
        recorder.ended(hold, "release-not-held")
    except CoordinationError:
        recorder.ended(hold, "release-unknown", known=False)
    else:
        recorder.ended(hold, "release")


class _FencedWriter:
    """A lock client's fenced writes: blind updates of a domain's key, each read back from
    the server (until it answers, after an unknown outcome)."""

    def __init__(self, storage: Storage, recorder: Recorder, stop: threading.Event) -> None:
        self._storage = storage
        self._recorder = recorder
        self._stop = stop
        self._written = 0

    @staticmethod
    def key(domain: str) -> str:
        return f"fenced-{domain}"

    def create(self, domain: str) -> None:
        """The domain's key, unfenced (KeyExistsError when another client came first)."""
        self._written += 1
        self._settle(domain, _write(self._storage, self._recorder,
                                    {"op": "put", "key": self.key(domain), "value": self._value()}))

    def write(self, fence: Fence) -> None:
        self._written += 1
        self._settle(fence.name, _write(self._storage, self._recorder, {
            "op": "update", "key": self.key(fence.name), "value": self._value(), "fence": fence.token,
            "domain": fence.name,
        }))

    def _value(self) -> str:
        return f"{self._recorder.client}:{self._written}"

    def _settle(self, domain: str, answered: bool) -> None:
        """Read the key back; after an unknown outcome, until the server answers (pending
        writes piling up would blow up the checker's search)."""
        while not _read(self._storage, self._recorder, self.key(domain), {}) and not answered:
            if self._stop.wait(0.1):
                return


def _opened(make: Any, stop: threading.Event) -> Any:
    """A handle, retried while the server is down (binding it may read the server)."""
    while not stop.is_set():
        try:
            return make()
        except CoordinationError:
            stop.wait(0.5)
    return None


def run_client(role: str, coord: Coordinator, recorder: Recorder, seed: str, stop: threading.Event) -> None:
    rng = random.Random(seed)
    if role == "kv":
        run_kv(coord, recorder, rng, stop)
    else:
        run_lock(coord, recorder, rng, stop, semaphore=role == "semaphore")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kubecoord_testkit.robustness.traffic")
    parser.add_argument("role", choices=["kv", "lock", "semaphore"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--options", default="{}", help="JSON: keyword options of kubecoord.connect")
    parser.add_argument("--records", type=Path, required=True, help="folder of the clients' record files")
    parser.add_argument("--client", required=True, help="this client's name (its record file's)")
    parser.add_argument("--seed", default="0")
    parser.add_argument("--history", type=Path, default=None,
                        help="kubecoord's own event log of this client (connect(history=...)): recording.merge "
                             "takes from it the versions this client's deletes removed")
    args = parser.parse_args(argv)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    signal.signal(signal.SIGINT, lambda signum, frame: stop.set())

    import kubecoord

    recorder = Recorder(args.records / f"{args.client}.jsonl", args.client)
    coord = None
    while coord is None and not stop.is_set():
        try:
            coord = kubecoord.connect(args.url, history=args.history, **json.loads(args.options))
        except CoordinationError as exc:  # the server may be down for a restart
            print(f"{args.client}: connect failed: {exc}", file=sys.stderr, flush=True)
            stop.wait(0.5)
    print(f"{args.client}: ready", flush=True)
    try:
        if coord is not None:
            run_client(args.role, coord, recorder, f"{args.seed}:{args.client}", stop)
    finally:
        if coord is not None:
            try:
                coord.close()
            except CoordinationError as exc:
                print(f"{args.client}: close: {exc}", file=sys.stderr, flush=True)
        recorder.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
