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
unknown outcome stays in the history without a return. After one, the client reads until the
backend answers again before it writes anything else: a client that keeps writing while
its server is down would fill the history with pending writes, which blow up the
checker's search. A read that fails claims nothing and is left out.

Lock clients (roles ``lock`` and ``semaphore``) acquire with a short timeout, check
is_held() every 50 ms while holding for 0.1-0.6 s (each True recorded: the holder still
claims the lock), and release. A hold ends at release's return, or when is_held() turns
False (lost); when release's outcome is unknown or the client is killed, it ends at an
unknown moment after its last recorded claim.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from kubecoord.api import Coordinator, Lock, Semaphore, Storage
from kubecoord.errors import (
    BackendUnavailableError,
    CoordinationError,
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
DEFINITE: dict[type[CoordinationError], str] = {
    KeyExistsError: "exists", VersionConflictError: "conflict", KeyNotFoundError: "notfound",
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
    """One write, recorded; False when its outcome is unknown or the backend was unavailable."""
    op, _ = recorder.call(operation)
    key, expected = operation["key"], operation.get("expected_version")
    try:
        if operation["op"] == "put":
            version: int | None = storage.put(key, operation["value"])
        elif operation["op"] == "update":
            version = storage.update(key, operation["value"], expected_version=expected)
        else:
            storage.delete(key, expected_version=expected)
            version = None
    except (KeyExistsError, VersionConflictError, KeyNotFoundError) as exc:
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
    """Lock (or semaphore) holds until ``stop`` is set."""
    name, slots = (SEMAPHORE, SEMAPHORE_SLOTS) if semaphore else (LOCK, 1)
    lock: Lock | None = _opened(
        lambda: coord.semaphore(name, slots, id=recorder.client) if semaphore else coord.lock(name, id=recorder.client),
        stop,
    )
    if lock is None:
        return
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
        slot = lock.slot if isinstance(lock, Semaphore) else 0
        hold = recorder.acquired(name, slots, slot or 0, token, call)
        until = time.monotonic() + rng.uniform(0.1, 0.6)
        lost = False
        while time.monotonic() < until and not stop.is_set():
            at = time.monotonic()
            if not lock.is_held():
                recorder.ended(hold, "lost")
                lost = True
                break
            recorder.held(hold, at)
            stop.wait(0.05)
        if lost:
            continue
        at = time.monotonic()
        if not lock.is_held():
            recorder.ended(hold, "lost")
            continue
        recorder.held(hold, at)
        try:
            lock.release()
        except LockNotHeldError:
            recorder.ended(hold, "release-not-held")
        except CoordinationError:
            recorder.ended(hold, "release-unknown", known=False)
        else:
            recorder.ended(hold, "release")
        stop.wait(rng.uniform(0.0, 0.1))


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
    args = parser.parse_args(argv)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    signal.signal(signal.SIGINT, lambda signum, frame: stop.set())

    import kubecoord

    recorder = Recorder(args.records / f"{args.client}.jsonl", args.client)
    coord = None
    while coord is None and not stop.is_set():
        try:
            coord = kubecoord.connect(args.url, **json.loads(args.options))
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
