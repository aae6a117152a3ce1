"""kubecoord watch: on a terminal the table redraws in place; in a pipe, JSON per change."""

from __future__ import annotations

import datetime as dt
import fcntl
import itertools
import json
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import threading
from collections.abc import Callable

from kubecoord import Coordinator
from tests.helpers import eventually

from .conftest import Cli

REDRAW = re.compile(rb"\x1b\[(\d+)F\x1b\[J")


class Pipe:
    """The command with its stdout in a pipe, whose lines a thread collects."""

    def __init__(self, cli: Cli, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kubecoord.cli", *args],
            env=cli.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        stdout = self.process.stdout
        assert stdout is not None
        self._reader = threading.Thread(target=lambda: self.lines.extend(iter(stdout.readline, "")), daemon=True)
        self._reader.start()

    def stop(self, signum: int) -> int:
        """Stop the command as a person would (``signum``); its exit status."""
        self.process.send_signal(signum)
        code = self.process.wait(30)
        self._reader.join(5)
        return code


class Terminal:
    """A pseudo-terminal of 100x30 whose output a thread collects."""

    def __init__(self, cli: Cli, *args: str) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kubecoord.cli", *args],
            env=cli.env,
            stdin=slave,
            stdout=slave,
            stderr=subprocess.PIPE,
        )
        os.close(slave)
        self._master = master
        self.output = b""
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._master, 4096)
            except OSError:  # EIO once the child has gone
                return
            if not chunk:
                return
            with self._lock:
                self.output += chunk

    def screen(self) -> str:
        """What the terminal shows now: the text after the last redraw."""
        with self._lock:
            text = self.output
        return REDRAW.split(text)[-1].decode(errors="replace")

    def stop(self) -> int:
        self.process.send_signal(signal.SIGINT)
        code = self.process.wait(30)
        self._reader.join(5)
        os.close(self._master)
        return code


def test_leader_view_redraws_in_place(k8s_cli: Cli, k8s_connect: Callable[[], Coordinator]) -> None:
    terminal = Terminal(k8s_cli, "watch", "leader", "billing")
    try:
        eventually(lambda: "<none>" in terminal.screen(), timeout=60)
        first = k8s_connect().leader_election("billing")
        assert first.nominate("pod-a")
        eventually(lambda: "pod-a" in terminal.screen(), timeout=30)
        k8s_connect().leader_election("billing").nominate("pod-b")  # a follower until pod-a resigns
        first.resign("pod-a")
        eventually(lambda: "pod-b" in terminal.screen() and "pod-a" not in terminal.screen(), timeout=30)
    finally:
        code = terminal.stop()
    assert code == 0, terminal.process.stderr.read() if terminal.process.stderr else ""
    redraws = REDRAW.findall(terminal.output)
    assert len(redraws) >= 2
    # Each redraw climbs exactly over the frame before it: header, blank line, table.
    assert all(int(lines) == 4 for lines in redraws)
    screen = terminal.screen()
    assert screen.splitlines()[0].startswith("kubecoord watch: election billing")
    assert screen.splitlines()[2].split() == ["ELECTION", "LEADER", "EPOCH", "DATA"]


def test_members_view_in_a_pipe_prints_one_json_document_per_change(
    k8s_cli: Cli, k8s_connect: Callable[[], Coordinator]
) -> None:
    pipe = Pipe(k8s_cli, "watch", "members", "workers", "-o", "json", "--interval", "0.5")
    lines = pipe.lines
    try:
        eventually(lambda: len(lines) >= 1, timeout=60)
        group = k8s_connect().group_membership("workers")
        group.join("w1", data="a")
        eventually(lambda: any('"w1"' in line for line in lines), timeout=30)
        group.join("w2")
        eventually(lambda: any('"w2"' in line for line in lines), timeout=30)
        group.leave("w1")
        eventually(lambda: json.loads(lines[-1])["members"] == [{"id": "w2", "data": ""}], timeout=30)
    finally:
        code = pipe.stop(signal.SIGTERM)
    assert code == 0
    documents = [json.loads(line) for line in lines]
    assert documents[0]["members"] == []
    # A document only when the state changed: no two neighbours are equal.
    states = [d["members"] for d in documents]
    assert all(a != b for a, b in itertools.pairwise(states))
    # Each line says when, with date and zone (RFC 3339), not only a time of day.
    for document in documents:
        stamp = dt.datetime.fromisoformat(document["time"])
        assert stamp.tzinfo is not None and abs((dt.datetime.now(dt.UTC) - stamp).total_seconds()) < 600
    assert "\x1b[" not in "".join(lines)


def test_kv_view_follows_new_keys_and_rewrites(zk_cli: Cli, zk_url: str) -> None:
    import kubecoord

    pipe = Pipe(zk_cli, "watch", "kv", "conf", "-o", "json", "--interval", "5")
    lines = pipe.lines

    def keys() -> list[tuple[str, str]]:
        return [(e["key"], e["value"]) for e in json.loads(lines[-1])["keys"]] if lines else []

    try:
        eventually(lambda: len(lines) >= 1, timeout=60)
        with kubecoord.connect(zk_url) as coord:
            storage = coord.storage("conf")
            storage.put("a", "1")
            eventually(lambda: keys() == [("a", "1")], timeout=4)  # within the interval: a listener fired
            storage.update("a", "2")
            eventually(lambda: keys() == [("a", "2")], timeout=4)  # a rewrite, not only a new key
    finally:
        code = pipe.stop(signal.SIGINT)
    assert code == 0
