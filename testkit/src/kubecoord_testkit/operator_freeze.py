"""``kubecoord operator`` that freezes itself between its fencing check and a write's send.

    KUBECOORD_TESTKIT_FREEZE_WRITE='PATCH /rolebindings/kubecoord-leaderelection-billing$' \
    KUBECOORD_TESTKIT_FREEZE_MARK=/tmp/frozen \
    python -m kubecoord_testkit.operator_freeze operator --namespace NS ...

The arguments are ``kubecoord``'s. The first write whose ``METHOD path`` the pattern
finds (``re.search``) is allowed by the operator's in-process check
(kubecoord.operator.fencing) and then, before it is sent, the process writes the mark
file (the time, for the test to wait on) and stops itself with SIGSTOP — the freeze of a
GC pause or a stalled node at the worst moment. On SIGCONT the write goes out as it was
built, in the term it was checked in: what the API server does with it is the test.

With ``KUBECOORD_TESTKIT_FREEZE_ARM=PATH`` as well, the hook is armed only while that file
exists (a stat per write): a driver that starts every replica this way chooses the moment
of the freeze (the operator storm, kubecoord_testkit.storm).

Only this wrapper reads the variables; the operator itself has a seam
(``fencing.set_before_send``) and nothing else.
"""

from __future__ import annotations

import os
import pathlib
import re
import signal
import sys
import threading
import time

from kubecoord.cli import main as kubecoord_main
from kubecoord.operator import fencing

PATTERN = "KUBECOORD_TESTKIT_FREEZE_WRITE"
MARK = "KUBECOORD_TESTKIT_FREEZE_MARK"
ARM = "KUBECOORD_TESTKIT_FREEZE_ARM"


def freezer(pattern: str, mark: pathlib.Path, arm: pathlib.Path | None = None) -> fencing.SendHook:
    """A before-send hook that stops the process at the first write matching ``pattern``
    (with ``arm``: the first one sent while that file exists)."""
    matcher = re.compile(pattern)
    lock = threading.Lock()
    fired = [False]

    def hook(method: str, path: str) -> None:
        with lock:
            if fired[0] or not matcher.search(f"{method} {path}"):
                return
            if arm is not None and not arm.exists():
                return
            fired[0] = True
        mark.write_text(f"{time.time()} {method} {path}\n")
        os.kill(os.getpid(), signal.SIGSTOP)

    return hook


def main() -> int:
    pattern = os.environ.get(PATTERN)
    if pattern:
        arm = os.environ.get(ARM)
        fencing.set_before_send(freezer(pattern, pathlib.Path(os.environ[MARK]),
                                        pathlib.Path(arm) if arm else None))
    return kubecoord_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
