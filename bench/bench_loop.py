"""The lease core's step scheduler (kubecoord._core.lease.loop): worker threads and step lateness.

    python bench/bench_loop.py [--loops 1000] [--period 2.0] [--burst 20] [--seconds 40]

One process, ``--loops`` Loops whose steps take 1 ms and come due every ``--period`` seconds
(electors renewing; 1,000 of them make 500 steps a second), started at random phases. After
5 s, ``--burst`` of them block 3 s in one step (a slow API server). It prints, every 5 s,
the scheduler's worker threads and how late the steps of the last 5 s ran against their due
time (p50, p99, max), and the load average. Run it against an older tree with
``PYTHONPATH=OLD/operator`` for a before/after pair: figures, not assertions.
"""

from __future__ import annotations

import argparse
import random
import statistics
import threading
import time
from collections.abc import Callable
from typing import cast

from kubecoord._core.lease import Loop
from kubecoord._core.lease import loop as loop_module
from measure import load, pct


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--loops", type=int, default=1000)
    parser.add_argument("--period", type=float, default=2.0)
    parser.add_argument("--burst", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=40.0)
    args = parser.parse_args()
    lateness: list[float] = []
    lock = threading.Lock()
    blocking: set[int] = set()
    rng = random.Random(7)

    def step_of(index: int) -> Callable[[], float]:
        due: list[float] = []

        def step() -> float:
            now = time.monotonic()
            if not due:  # the first step, at start(): spread the loops over the period
                due.append(now + (phase := rng.uniform(0, args.period)))
                return phase
            with lock:
                lateness.append(now - due[0])
                block = index in blocking
                blocking.discard(index)
            time.sleep(3.0 if block else 0.001)
            due[0] = time.monotonic() + args.period
            return cast(float, args.period)  # argparse: type=float

        return step

    loops = [Loop(f"bench-{i}", step_of(i)) for i in range(args.loops)]
    for loop in loops:
        loop.start()
    started = time.monotonic()
    print(f"{args.loops} loops, a step every {args.period} s each; {load()}")
    print("| second | workers | late p50 ms | p99 ms | max ms |")
    print("| --- | --- | --- | --- | --- |")
    burst_sent = False
    while (elapsed := time.monotonic() - started) < args.seconds:
        time.sleep(5.0)
        if not burst_sent and elapsed >= 5.0:
            with lock:
                blocking.update(range(args.burst))
            burst_sent = True
        with lock:
            window, lateness[:] = list(lateness), []
        if window:
            print(f"| {time.monotonic() - started:.0f} | {loop_module._scheduler._workers} | "
                  f"{statistics.median(window) * 1000:.1f} | {pct(window, 99) * 1000:.1f} | "
                  f"{max(window) * 1000:.1f} |", flush=True)
    for loop in loops:
        loop.stop(join=False)
    print(load())


if __name__ == "__main__":
    main()
