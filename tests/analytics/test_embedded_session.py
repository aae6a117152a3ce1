"""`kubecoord analyze` run inside a process that already has a SparkSession (a notebook, a
job, the test run's shared session) leaves that session running.

The command asked ``SparkSession.getActiveSession()``, which the JVM answers per thread: a
Python thread of its own, or a py4j connection re-opened after an interrupted call (the
test fixtures' recovery after a timeout), is a JVM thread with no active session, so the
command took the caller's session for its own and stopped it; every later test of the run
then failed with "stopped SparkContext"."""

from __future__ import annotations

import threading
from typing import Any

from kubecoord.analytics.session import has_active_session


def test_a_session_is_seen_from_any_thread(spark: Any) -> None:
    assert spark.range(1).count() == 1
    seen: list[bool] = []
    thread = threading.Thread(target=lambda: seen.append(has_active_session()))
    thread.start()
    thread.join(120)
    assert seen == [True]
    assert spark.range(2).count() == 2
