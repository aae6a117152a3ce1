"""CMD for the guard tests: ``python stamper.py LOG``, run by ``sh -c`` (so it is CMD's
child, a member of CMD's process group, not CMD itself). Writes ``pid PID PPID PGID TOKEN NAME``,
then a time.monotonic() stamp every 20 ms until killed. CLOCK_MONOTONIC is one clock for
every process of the machine: stamps of two stampers compare."""

from __future__ import annotations

import os
import sys
import time

with open(sys.argv[1], "a") as out:
    env = os.environ
    out.write(f"pid {os.getpid()} {os.getppid()} {os.getpgrp()} {env['KUBECOORD_TOKEN']} {env['KUBECOORD_NAME']}\n")
    out.flush()
    while True:
        out.write(f"{time.monotonic()!r}\n")
        out.flush()
        time.sleep(0.02)
