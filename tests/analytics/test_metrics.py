"""Every metric on a small hand-written history with known answers.

The history spans three processes in three files (one gzip, one written last-line-
first so events arrive out of order) and includes near misses that only the clock-skew
tolerance (1 s) keeps from being violations.
"""

from __future__ import annotations

import gzip
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubecoord.analytics.pipeline import BROADCAST_TIMEOUT_SECONDS, Analysis, analyze
from kubecoord.analytics.session import default_setting

from . import golden
from .histories import T0, Log

"""The module's analysis runs in its first test's set-up: ~40 s at load 5, past the
default 180 s at load 18 (a fresh-clone run beside two engineers' Spark jobs)."""


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("known")


@pytest.fixture(scope="module")
def analysis(spark: Any, root: Path) -> Iterator[Analysis]:
    p1, p2, p3 = Log(root / "p1.jsonl", "p1"), Log(root / "p2.jsonl.gz", "p2"), Log(root / "p3.jsonl", "p3")
    # Election "svc": resign -> 0.1 s -> vanish (valid until 23) -> 2.5 s -> lost -> 1 s -> resign after valid_until.
    p1.leader(0, "svc", "acquired", "a", 1, valid_until=10)
    p1.leader(5, "svc", "renewed", "a", 1, valid_until=15)
    p1.leader(8, "svc", "resigned", "a", 1)
    p2.leader(8.1, "svc", "acquired", "b", 2, valid_until=18)
    p3.add(8.2, "leader_election", "svc", "observed", member="b", epoch=2)
    p2.leader(13, "svc", "renewed", "b", 2, valid_until=23)
    p3.leader(25.5, "svc", "acquired", "c", 3, valid_until=35)
    p3.leader(30, "svc", "lost", "c", 3)
    p1.leader(31, "svc", "acquired", "a", 4, valid_until=38)
    p1.leader(40, "svc", "resigned", "a", 4)
    # Election "sk": p1's clock is 0.5 s fast, so its resign is logged 0.4 s after b acquired.
    p1.leader(100, "sk", "acquired", "a", 1, valid_until=110)
    p1.leader(110.4, "sk", "resigned", "a", 1)
    p2.leader(110.0, "sk", "acquired", "b", 2, valid_until=120)
    p2.leader(115, "sk", "resigned", "b", 2)
    # Group "g".
    p1.group(0, "g", "joined", "m1")
    p1.group(5, "g", "renewed", "m1")
    p1.group(20, "g", "left", "m1")
    p2.group(1, "g", "joined", "m2")
    p2.group(6, "g", "renewed", "m2")
    p1.group(22, "g", "expired", "m2")
    p3.group(22.2, "g", "expired", "m2")  # a second observer of the same expiry
    p3.group(10, "g", "joined", "m3")  # never ends
    p2.group(3700, "g", "joined", "m1")
    p2.group(3800, "g", "left", "m1")
    p1.group(50, "g", "joined", "m4")
    p1.group(60.3, "g", "left", "m4")  # p1's clock is fast: it really left before p2 joined
    p2.group(60.0, "g", "joined", "m4")
    p2.group(70, "g", "left", "m4")
    # Store "s".
    p1.kv(0, "s", "put", "k", 1)
    p2.kv(1, "s", "updated", "k", 2)
    p1.kv(1.5, "s", "conflict", "k", 1)
    p1.kv(2, "s", "updated", "k", 3)
    p2.kv(3, "s", "deleted", "k", 3)
    p1.kv(4, "s", "put", "k", 1)
    p2.kv(5, "s", "updated", "k", 2)  # version 2 again, but of a new incarnation
    p2.kv(0, "s", "put", "j", 1)
    p1.add(0.5, "kv", "s", "conflict", key="j")  # a conflict whose expected version was not known
    p1.kv(200, "s", "put", "r", 1)
    p1.kv(201, "s", "updated", "r", 2)
    p1.kv(202, "s", "updated", "r", 3)
    p1.kv(210.05, "s", "deleted", "r", 3)  # p1's clock is fast: logged after the put that followed it
    p2.kv(210.0, "s", "put", "r", 1)
    p2.kv(250, "s", "updated", "r", 2)
    p1.write()
    p2.write(reverse=True)
    p3.write()
    result = analyze(spark, [str(root / "p*")], skew=1.0)
    yield result
    result.close()


def rows(analysis: Analysis, table: str, *columns: str) -> list[tuple[Any, ...]]:
    frame = analysis.tables[table].select(*columns)
    return sorted(tuple(row) for row in frame.collect())


def test_inputs_are_counted(analysis: Analysis) -> None:
    inputs = analysis.summary["inputs"]
    assert (inputs["files"], inputs["events"], inputs["malformed_lines"], inputs["processes"]) == (3, 43, 0, 3)
    assert inputs["first_event"] == "2026-01-01T00:00:00.000000Z"
    assert inputs["last_event"] == "2026-01-01T01:03:20.000000Z"  # m1 left at 3800 s


def test_no_violations_thanks_to_the_skew_tolerance(analysis: Analysis) -> None:
    assert analysis.violation_count == 0
    assert analysis.tables["violations"].count() == 0


def test_leadership_intervals(analysis: Analysis) -> None:
    found = rows(analysis, "leadership_intervals", "name", "member", "epoch", "start", "end", "end_reason")
    assert [(n, m, e, round(s - T0, 3), round(x - T0, 3), r) for n, m, e, s, x, r in found] == [
        ("sk", "a", 1, 100.0, 110.0, "resigned"),  # resigned after its valid_until: ends at valid_until
        ("sk", "b", 2, 110.0, 115.0, "resigned"),
        ("svc", "a", 1, 0.0, 8.0, "resigned"),
        ("svc", "a", 4, 31.0, 38.0, "resigned"),
        ("svc", "b", 2, 8.1, 23.0, "expired"),  # vanished: its last valid_until
        ("svc", "c", 3, 25.5, 30.0, "lost"),
    ]


def test_failover_gaps_by_cause(analysis: Analysis) -> None:
    gaps = rows(analysis, "failover_gaps", "name", "from_member", "to_member", "cause", "gap")
    assert [(n, f, t, c, round(g, 3)) for n, f, t, c, g in gaps] == [
        ("sk", "a", "b", "resign", 0.0),
        ("svc", "a", "b", "resign", 0.1),
        ("svc", "b", "c", "expiry", 2.5),
        ("svc", "c", "a", "expiry", 1.0),
    ]
    stats = {row["group"]: row for row in analysis.summary["leadership"]["failover_gap_seconds"]}
    assert stats["all"]["count"] == 4 and stats["all"]["max"] == pytest.approx(2.5)
    assert stats["all"]["p50"] == pytest.approx(0.55)  # median of 0, 0.1, 1, 2.5
    assert stats["expiry"]["count"] == 2
    assert stats["expiry"]["p50"] == pytest.approx(1.75)
    assert stats["expiry"]["p95"] == pytest.approx(2.425)
    assert stats["expiry"]["p99"] == pytest.approx(2.485)
    assert stats["resign"]["max"] == pytest.approx(0.1)
    assert analysis.summary["leadership"]["elections"] == 2 and analysis.summary["leadership"]["terms"] == 6


def test_membership_timeline(analysis: Analysis) -> None:
    found = rows(analysis, "membership_timeline", "member", "process", "start_ts", "end_reason", "duration")
    assert [(m, p, r, None if d is None else round(d, 3)) for m, p, _, r, d in found] == [
        ("m1", "p1", "left", 20.0),
        ("m1", "p2", "left", 100.0),
        ("m2", "p2", "expired", 21.0),
        ("m3", "p3", "open", None),
        ("m4", "p1", "left", 10.3),
        ("m4", "p2", "left", 10.0),
    ]


def test_churn_per_hour(analysis: Analysis) -> None:
    found = rows(analysis, "membership_churn", "hour", "joins", "leaves", "expiries", "churn")
    assert [(hour.hour, j, lv, e, c) for hour, j, lv, e, c in found] == [(0, 5, 3, 1, 9), (1, 1, 1, 0, 2)]
    summary = analysis.summary["membership"]
    assert (summary["joins"], summary["leaves"], summary["expiries"], summary["max_churn_per_hour"]) == (6, 4, 1, 9)


def test_heartbeat_to_expiry(analysis: Analysis) -> None:
    assert [(m, round(s, 3)) for m, s in rows(analysis, "heartbeat_to_expiry", "member", "heartbeat_to_expiry")] == [
        ("m2", 16.0)
    ]
    assert analysis.summary["membership"]["heartbeat_to_expiry_seconds"][0]["p50"] == pytest.approx(16.0)


def test_kv_operations_and_conflict_rates(analysis: Analysis) -> None:
    per_key = rows(analysis, "kv_keys", "key", "puts", "updates", "deletes", "conflicts", "operations", "conflict_rate")
    assert per_key == [
        ("j", 1, 0, 0, 1, 2, 0.5),
        ("k", 2, 3, 1, 1, 7, pytest.approx(1 / 7)),
        ("r", 2, 3, 1, 0, 6, 0.0),
    ]
    assert rows(analysis, "kv_stores", "name", "keys", "operations", "conflicts") == [("s", 3, 15, 2)]
    assert analysis.summary["kv"]["conflict_rate"] == pytest.approx(2 / 15)


def test_summary_lists_every_violation_type(analysis: Analysis) -> None:
    assert analysis.summary["violations"] == {
        "overlapping_leadership": 0, "epoch_not_increasing": 0, "duplicate_member": 0,
        "version_backwards": 0, "lost_update": 0, "create_race": 0, "stale_epoch_write": 0,
        "unit_owned_twice": 0, "stale_generation_work": 0,
    }


def test_the_verdicts_are_those_of_the_golden_copy(analysis: Analysis, root: Path) -> None:
    golden.check("metrics", golden.snapshot_analysis(analysis, root))


def test_a_second_analysis_in_the_same_session_compiles_almost_nothing(
    spark: Any, analysis: Analysis, root: Path, tmp_path: Path
) -> None:
    """One analysis compiles ~630 distinct query classes; Spark's cache of 100 compiled ~90
    of them twice and a second analysis in the same JVM (a notebook, this suite) all ~715
    again, a fifth of its time. The session keeps them all (CODEGEN_CACHE_ENTRIES).
    The same files elsewhere: an analysis of the very same paths would share the module's
    cached frames (Spark caches equal plans once), and closing it would release them."""
    for log in root.glob("p*"):
        shutil.copy(log, tmp_path / log.name)
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics
    before = metrics.METRIC_COMPILATION_TIME().getCount()
    again = analyze(spark, [str(tmp_path / "p*")], skew=1.0)
    try:
        golden.check("metrics", golden.snapshot_analysis(again, tmp_path))
        compiled = metrics.METRIC_COMPILATION_TIME().getCount() - before
    finally:
        again.close()
    assert compiled < 30, f"{compiled} query classes compiled again"


def test_the_cached_lines_and_events_are_kept_as_objects_not_serialized(analysis: Analysis) -> None:
    """PySpark's StorageLevel.MEMORY_AND_DISK is the serialized level: Java-serializing the
    cached column batches ran a 1 GiB driver out of heap at 10M events (issue 23)."""
    in_memory = [frame.storageLevel for frame in analysis.unpersist if frame.storageLevel.useMemory]
    assert len(in_memory) >= 2  # the read's lines and the checks' events
    assert all(level.deserialized and level.useDisk for level in in_memory), in_memory


def test_broadcasts_wait_as_long_as_the_analysis_runs_unless_the_user_set_a_timeout(
    spark: Any, analysis: Analysis
) -> None:
    """Spark's 300 s broadcast timeout failed a 10M analysis (issue 23): a broadcast's
    query scans every cached event, so its time grows with the input."""
    assert spark.conf.get("spark.sql.broadcastTimeout") == str(BROADCAST_TIMEOUT_SECONDS)
    # A setting the session was started with (here the test session's partitions) wins.
    try:
        default_setting(spark, "spark.sql.shuffle.partitions", "7")
        assert spark.conf.get("spark.sql.shuffle.partitions") == "2"
    finally:  # the session is shared: a failure here must not change the later tests'
        spark.conf.set("spark.sql.shuffle.partitions", "2")


def test_the_cached_events_are_all_but_leader_renewals_ordered_by_primitive_within_their_partitions(
    analysis: Analysis, root: Path,
) -> None:
    """The checks' cache holds every valid event but the leader holders' renewals (most of a
    log's events: only the terms, leadership.intervals, read them), and every check filters
    by primitive (many by event too): ordered so, the cache's per-batch statistics let a
    check's scan skip the other primitives' batches."""
    renewals = 0
    for path in (p for p in root.iterdir() if p.is_file()):
        with (gzip.open(path, "rt") if path.suffix == ".gz" else path.open()) as lines:
            events = [json.loads(line) for line in lines if line.strip()]
        renewals += sum(e.get("primitive") == "leader_election" and e.get("event") == "renewed" for e in events)
    assert renewals > 0
    partitions = analysis.events.select("primitive", "event").rdd.map(tuple).glom().collect()
    assert sum(len(rows) for rows in partitions) == analysis.summary["inputs"]["events"] - renewals
    assert ("leader_election", "renewed") not in {row for rows in partitions for row in rows}
    assert len({p for rows in partitions for p, _ in rows}) > 2
    for rows in partitions:
        assert rows == sorted(rows)
