"""A lock holder in its own process that writes under its fencing token, for SIGSTOP tests.

    python -m tests.backends.etcd.holder_process URL NAME ID

Acquires lock NAME, prints "holding TOKEN", then writes key ID of store "fenced" with
Fence(NAME, TOKEN) every 20 ms while is_held() says it holds, as a careful user does. On
stdin it answers "check" with "held True|False" and "write" with one fenced write made
whatever is_held() says: "written VERSION" or "refused ERROR". Runs until killed.
"""

from __future__ import annotations

import sys
import threading

import kubecoord
from kubecoord.api import Fence
from kubecoord.errors import CoordinationError

from .timings import TIMINGS


def main() -> None:
    url, name, ident = sys.argv[1:4]
    coord = kubecoord.connect(url, **TIMINGS)
    lock = coord.lock(name, id=ident)
    lock.acquire()
    token = lock.token
    assert token is not None
    store = coord.storage("fenced")
    print(f"holding {token}", flush=True)
    out = threading.Lock()

    writing = threading.Lock()  # the careful writer and a "write" command, one at a time

    def write() -> str:
        fence = Fence(name, token)
        with writing:
            try:
                if store.fetch(ident).result() is None:
                    return f"written {store.put(ident, str(token), fence=fence)}"
                return f"written {store.update(ident, str(token), fence=fence)}"
            except CoordinationError as exc:
                return f"refused {type(exc).__name__}"

    def careful() -> None:
        while lock.is_held():
            write()
            threading.Event().wait(0.02)
        with out:
            print("stopped", flush=True)

    threading.Thread(target=careful, daemon=True).start()
    for line in sys.stdin:
        command = line.strip()
        answer = f"held {lock.is_held()}" if command == "check" else write() if command == "write" else "?"
        with out:
            print(answer, flush=True)


if __name__ == "__main__":
    main()
