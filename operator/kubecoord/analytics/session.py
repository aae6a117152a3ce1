"""Building the SparkSession the pipeline runs on, quiet by default.

Guarantees: without a master the session is local[*] — unless the process was started
by spark-submit, whose --master (and other settings) then apply. The JVM logs at error
level through the log4j2 file shipped beside this module, so a run prints only the
pipeline's own progress lines. Not guaranteed: JVM options take effect only when this
call starts the JVM (not under spark-submit, nor for an already running session).
``command_session`` gives a caller that embeds the command its session back as it was.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import SparkSession

from kubecoord.errors import InvalidArgumentError

LOG4J2 = Path(__file__).with_name("log4j2.properties")

QUIET_JVM_OPTIONS = f"-Dlog4j2.configurationFile=file:{LOG4J2}"
FAST_START_JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
"""For short runs (tests): the JVM starts faster, but big jobs run several times slower
without the optimizing compiler, so the command does not use them."""
CODEGEN_CACHE_ENTRIES = 2000
"""Compiled query classes kept (Spark keeps 100): one analysis compiles ~630 distinct
classes; with Spark's 100 about 90 of them are compiled twice and a second analysis in the
same JVM (tests, a notebook) compiles all ~715 again, with 2,000 it compiles 3."""
CALL_SITES = "spark.python.sql.dataFrameDebugging.enabled"
"""Off: PySpark otherwise hands the JVM the Python call site of every DataFrame function
call, for its error messages, at five more py4j round trips per call — 18,600 of the
35,900 an analysis makes (a 364-event history). PySpark reads it once per process, from
the earliest SparkSession its functions see, so a SparkSession the command is embedded in
keeps its own."""
BASE_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.codegen.cache.maxEntries": str(CODEGEN_CACHE_ENTRIES),
    CALL_SITES: "false",
}
LOCAL_CONF: dict[str, str] = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


def under_spark_submit() -> bool:
    """True when spark-submit launched this Python process (it owns master and conf)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def has_active_session() -> bool:
    """True when this process already runs a SparkContext (a caller embedding the command).

    Not ``SparkSession.getActiveSession()``: the JVM keeps the active session per thread,
    and another Python thread, or a py4j connection re-opened after an interrupted call, is
    a JVM thread without one, and the command would take its caller's session for its own
    and stop it (tests/analytics/test_embedded_session.py)."""
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None


def build_session(
    *,
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    jvm_options: str = "",
    app_name: str = "kubecoord-analyze",
) -> SparkSession:
    """A session on ``master`` (default local[*]) with BASE_CONF, then ``conf`` on top;
    the driver JVM gets the quiet log4j2 file plus ``jvm_options``."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    settings = dict(BASE_CONF)
    if master is None and not under_spark_submit():
        master = "local[*]"
    if master is not None:
        builder = builder.master(master)
        if master.startswith("local"):
            settings.update(LOCAL_CONF)
    settings["spark.driver.extraJavaOptions"] = f"{QUIET_JVM_OPTIONS} {jvm_options}".strip()
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def default_setting(spark: SparkSession, key: str, value: str) -> None:
    """Set a SQL setting for the analysis, unless the session was started with one (a
    ``--conf`` of the command or of spark-submit wins)."""
    if not spark.sparkContext.getConf().contains(key):
        spark.conf.set(key, value)


JOB_DESCRIPTION = "spark.job.description"


@contextmanager
def command_session(*, master: str | None, conf: Mapping[str, str]) -> Iterator[SparkSession]:
    """The session ``kubecoord analyze`` runs on. In a process without one: a session of
    its own (build_session), stopped at the end. In a process that has one (a notebook,
    a job embedding the command): that session, with ``conf`` set on it for the command;
    at the end it is left running and its SQL settings, and this thread's job
    description, are put back as they were — the analysis sets its own (the time zone,
    the shuffle partitions, adaptive execution off...) and names its jobs.
    InvalidArgumentError for a ``conf`` a running session cannot take (a static setting)."""
    if not has_active_session():
        spark = build_session(master=master, conf=conf)
        try:
            yield spark
        finally:
            spark.stop()
        return
    # Not build_session: the builder's options (app name, master, the command's defaults)
    # would be written into the caller's session.
    spark = SparkSession.builder.getOrCreate()
    with _settings_restored(spark):
        for key, value in conf.items():
            try:
                spark.conf.set(key, value)
            except Exception as exc:  # pyspark's AnalysisException: not modifiable at runtime
                raise InvalidArgumentError(
                    f"--conf {key}: the running Spark session the command is embedded in cannot take it ({exc})"
                ) from exc
        yield spark


@contextmanager
def _settings_restored(spark: SparkSession) -> Iterator[None]:
    """The session's SQL settings, and this thread's job description, as they were before
    the block, once it is done (even when it fails). Settings other threads change
    meanwhile are put back too."""
    context = spark.sparkContext
    before = spark.conf.getAll
    description = context.getLocalProperty(JOB_DESCRIPTION)
    try:
        yield
    finally:
        after = spark.conf.getAll
        for key in after.keys() - before.keys():
            spark.conf.unset(key)
        for key, value in before.items():
            if after.get(key) != value:
                spark.conf.set(key, value)
        context.setJobDescription(description)  # type: ignore[arg-type]  # None clears it
