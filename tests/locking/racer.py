"""One process racing for a lock: ``python racer.py URL NAME ID HISTORY [OPTIONS_JSON]``.

Loops: acquire, then a critical section of 10 steps 20 ms apart, each printed as
{"t": wall seconds, "id", "token", "held": is_held()} taken as t=time.time() *before*
is_held() is asked — so a step printed with held=True lies inside the hold in this
process's own view — then release. Runs until killed (SIGTERM: closes the coordinator).
"""

from __future__ import annotations

import faulthandler
import json
import signal
import sys
import threading
import time

import kubecoord


def main() -> None:
    url, name, ident, history = sys.argv[1:5]
    options = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test asks for stacks when stuck
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.set())
    coord = kubecoord.connect(url, history=history, **options)
    lock = coord.lock(name, id=ident)
    lock.holders()  # the first read imports the client's models (seconds on a loaded machine)
    sys.stdout.write(json.dumps({"t": time.time(), "id": ident, "ready": True}) + "\n")
    sys.stdout.flush()
    while not stopping.is_set():
        # Short timeouts, retried: the lock's observer keeps the coordinator's view of a
        # crashed holder's Lease, so it still expires for the retries.
        if not lock.acquire(timeout=1):
            continue
        token = lock.token
        for _ in range(10):
            t = time.time()
            held = lock.is_held()
            sys.stdout.write(json.dumps({"t": t, "id": ident, "token": token, "held": held}) + "\n")
            sys.stdout.flush()
            if not held:
                break
            time.sleep(0.02)
        if lock.is_held():
            lock.release()
    coord.close()


if __name__ == "__main__":
    main()
