"""read_line, how the etcd tests read the answers of the processes they drive."""

from __future__ import annotations

import subprocess
import sys

from .conftest import read_line

_TWO_LINES_AT_ONCE = "import sys, time; sys.stdout.write('stopped\\nheld False\\n'); sys.stdout.flush(); time.sleep(30)"


def test_lines_printed_together_are_each_read() -> None:
    # A holder's writer thread and its answer to a command can print in one instant; both
    # lines then reach the pipe before the test reads either.
    process = subprocess.Popen([sys.executable, "-c", _TWO_LINES_AT_ONCE], stdout=subprocess.PIPE, text=True)
    try:
        assert read_line(process, 20) == "stopped"
        assert read_line(process, 5) == "held False"
    finally:
        process.kill()
        process.wait()


def test_the_end_of_the_output_reads_as_none() -> None:
    process = subprocess.Popen([sys.executable, "-c", "print('only')"], stdout=subprocess.PIPE, text=True)
    assert read_line(process, 20) == "only"
    assert read_line(process, 20) is None
    assert read_line(process, 1) is None
    process.wait()
