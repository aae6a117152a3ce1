"""Progress lines stay whole when steps come from several threads (the table writes)."""

from __future__ import annotations

import re
import threading
import time

from kubecoord.analytics.progress import Progress


class SlowStream:
    """A stream that lets other threads run inside every write, as a busy terminal does."""

    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> int:
        time.sleep(0.001)
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass


def test_lines_from_many_threads_are_never_cut() -> None:
    stream = SlowStream()
    progress = Progress("kubecoord analyze", stream=stream)  # type: ignore[arg-type]
    start = threading.Barrier(8)

    def steps(thread: int) -> None:
        start.wait()
        for n in range(20):
            progress.step(f"writing table t{thread}-{n}")

    threads = [threading.Thread(target=steps, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    lines = stream.text.split("\n")
    assert lines.pop() == ""
    pattern = re.compile(r"kubecoord analyze: \[\s*\d+\.\d s\] writing table t(\d)-(\d+)")
    assert all(pattern.fullmatch(line) for line in lines), [line for line in lines if not pattern.fullmatch(line)]
    written = {match.groups() for match in map(pattern.fullmatch, lines) if match}
    assert written == {(str(thread), str(n)) for thread in range(8) for n in range(20)}


def test_a_disabled_progress_writes_nothing_but_tells_its_listener() -> None:
    stream = SlowStream()
    heard: list[str] = []
    progress = Progress("analyze", stream=stream, enabled=False)  # type: ignore[arg-type]
    progress.listener = heard.append
    progress.step("reading")
    assert heard == ["reading"] and stream.text == ""
