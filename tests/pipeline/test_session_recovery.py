"""The shared Spark session survives a test interrupted inside a Spark call (pytest-timeout
raises in the middle of the py4j call): tests.fixtures.spark.recover() runs after such a
failure, so the tests after it get right answers."""

from __future__ import annotations

import signal
import time
from types import FrameType
from typing import Any

import pytest

from tests.fixtures.spark import recover


class _Interrupted(BaseException):  # as pytest-timeout's Failed: py4j catches only Exception
    pass


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise _Interrupted  # what pytest-timeout's signal method does: raise wherever the test is


def _interrupt_a_long_job(spark: Any) -> pytest.ExceptionInfo[_Interrupted]:
    """The interruption's traceback is returned and kept, as pytest keeps a failed test's
    (sys.last_traceback): its frames hold the interrupted py4j connection alive."""
    from pyspark.sql import functions as F

    previous = signal.signal(signal.SIGALRM, _interrupt)
    signal.setitimer(signal.ITIMER_REAL, 3.0)
    try:
        with pytest.raises(_Interrupted) as interrupted:
            # Minutes of work: the alarm interrupts the driver while it waits on the JVM.
            spark.range(0, 10**12, numPartitions=2).agg(F.sum(F.col("id") % 7)).collect()  # no overflow
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return interrupted


@pytest.mark.timeout(300)
def test_the_session_answers_rightly_after_a_call_interrupted_and_recovered(spark: Any) -> None:
    interrupted = _interrupt_a_long_job(spark)
    recover()
    assert spark.range(7).count() == 7
    assert spark.createDataFrame([(1, "a"), (2, "b")], "x int, y string").orderBy("x").collect()[1]["y"] == "b"
    deadline = time.monotonic() + 60
    while spark.sparkContext.statusTracker().getActiveJobsIds() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert spark.sparkContext.statusTracker().getActiveJobsIds() == [], "the interrupted job was cancelled"
    del interrupted
