"""A process that holds a lock and writes with fences, driven line by line on stdin:
``python fenced_writer.py URL OPTIONS_JSON STORE LOCK``.

Each command is one JSON line; each answer one JSON line on stdout:

- ``{"op": "acquire"}`` -> ``{"token": T}`` (the lock ``LOCK``, waiting up to 120 s)
- ``{"op": "put"|"update"|"delete", "key": K, "value": V, "token": T}`` -> ``{"version": N}``
  or ``{"error": "FencedError", "accepted": A}`` (any other error: its class name). The
  write carries ``Fence(LOCK, T)``; T null means the token of the lock this process holds
  — as a frozen holder would write, without asking whether it still holds. A write that
  fails with BackendUnavailableError (a session lost while frozen, a reconnection) is
  tried again for up to 60 s: the answer is the store's verdict, not the connection's.
- ``{"op": "exit"}``: closes the coordinator and exits.

It prints ``{"ready": true}`` once connected.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import kubecoord
from kubecoord import BackendUnavailableError, CoordinationError, Fence, FencedError


def answer(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def write(store: kubecoord.Storage, command: dict[str, Any], fence: Fence) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        try:
            if command["op"] == "put":
                return {"version": store.put(command["key"], command["value"], fence=fence)}
            if command["op"] == "update":
                return {"version": store.update(command["key"], command["value"], fence=fence)}
            store.delete(command["key"], fence=fence)
            return {"version": 0}
        except FencedError as refused:
            return {"error": "FencedError", "accepted": refused.accepted}
        except BackendUnavailableError:
            if time.monotonic() > deadline:
                return {"error": "BackendUnavailableError"}
            time.sleep(0.2)
        except CoordinationError as exc:
            return {"error": type(exc).__name__, "message": str(exc)}


def main() -> None:
    url, options, store_name, lock_name = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
    coord = kubecoord.connect(url, **options)
    store = coord.storage(store_name)
    lock = coord.lock(lock_name)
    held: int | None = None
    answer({"ready": True})
    for line in sys.stdin:
        command = json.loads(line)
        if command["op"] == "exit":
            break
        if command["op"] == "acquire":
            won = lock.acquire(timeout=120)
            held = lock.token if won else None
            answer({"token": held})
            continue
        token = command["token"] if command.get("token") is not None else held
        if token is None:
            answer({"error": "no token: give one, or acquire first"})
            continue
        answer(write(store, command, Fence(lock_name, int(token))))
    coord.close()


if __name__ == "__main__":
    main()
