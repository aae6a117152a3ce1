"""The test suite's shared Spark session outlives its JVM (tests/fixtures/spark.py): a
JVM that died (an OutOfMemoryError exits it) is replaced by the next module's session,
instead of failing every later pipeline test of the worker."""

from __future__ import annotations

import os
import signal
from typing import Any

from tests.fixtures.spark import shared_session


def test_a_killed_jvm_is_replaced_by_a_working_one(spark: Any) -> None:
    from pyspark import SparkContext

    assert SparkContext._gateway is not None  # the spark fixture started the JVM
    old = SparkContext._gateway.proc
    assert spark.range(3).count() == 3
    os.kill(old.pid, signal.SIGKILL)
    old.wait(timeout=30)

    session = shared_session()

    assert SparkContext._gateway is not None
    new = SparkContext._gateway.proc
    assert new.pid != old.pid and new.poll() is None
    assert session.range(5).count() == 5
    assert session.conf.get("spark.sql.shuffle.partitions") == "2"
