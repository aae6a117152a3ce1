"""Running a command while holding a lock or leading an election (``kubecoord lock``/``elect``).

The command is a child process started when the hold begins, with KUBECOORD_TOKEN (the
fencing token or epoch) and KUBECOORD_HOLDER (the holder id) in its environment. When the
hold ends — lost, or this process got SIGTERM/SIGINT — the child gets SIGTERM, then
SIGKILL after ``grace`` seconds; kubecoord exits with the child's status (128 + N when a
signal N ended it, as a shell reports it), etcdctl's behaviour.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import threading

from kubecoord.cli.exits import UsageError

POLL = 0.05


def add_command_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--id", help="the holder id (default host-pid-random; must be unique among the users)")
    parser.add_argument("--data", default="", help="data shown to others with the holder (default empty)")
    parser.add_argument(
        "--grace",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="after SIGTERM, how long the command may take before SIGKILL (default %(default)g)",
    )
    parser.set_defaults(cmd=[])  # the command after --: kubecoord.cli's main() splits it off
    parser.epilog = "the command to run follows --, last: ... -- CMD ARGS..."


def command_of(args: argparse.Namespace) -> list[str]:
    command = list(args.cmd)
    if not command:
        raise UsageError("give the command to run after --, e.g. kubecoord lock NAME -- ./job.sh")
    return command


class Child:
    """The command for one hold; ``status`` once it ended (None: never started)."""

    def __init__(self, command: list[str], grace: float, holder: str) -> None:
        self.command = command
        self.grace = grace
        self.holder = holder
        self.status: int | None = None

    def run(self, token: int, stop: threading.Event) -> int:
        env = {**os.environ, "KUBECOORD_TOKEN": str(token), "KUBECOORD_HOLDER": self.holder}
        try:
            process = subprocess.Popen(self.command, env=env)
        except OSError as exc:
            raise UsageError(f"cannot run {self.command[0]!r}: {exc}") from exc
        while True:
            try:
                code = process.wait(timeout=POLL)
                break
            except subprocess.TimeoutExpired:
                if stop.is_set():
                    code = self._terminate(process)
                    break
        self.status = 128 - code if code < 0 else code
        return self.status

    def _terminate(self, process: subprocess.Popen[bytes]) -> int:
        process.terminate()
        try:
            return process.wait(timeout=self.grace)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait()
