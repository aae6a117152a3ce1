"""The whole analysis: inputs -> tables and a summary, without writing anything.

Steps: read and validate every line (reading), drop copies and find seq gaps
(coverage), estimate the clock offsets between processes (clocks), correct every
event's times by them, then run each check module over the corrected events. A check
module turns the events into ``Findings`` (its tables, its violations, its part of
the summary); adding a module (e.g. rebalance checks) means adding it to CHECKS.
Every figure of the summary and everything the report draws (analytics.drawing) come
from one collect of small queries (analytics.collecting).

Guarantees: every table is a DataFrame whose columns do not depend on the data (an
election-free log gives empty leadership tables, not missing ones); the summary is
plain JSON-ready data. EmptyInputError when there is no valid event at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from kubecoord.analytics import clocks, collecting, coverage, drawing, kv, leadership, membership, rebalance, violations
from kubecoord.analytics.frames import cached_leaf, cut, release
from kubecoord.analytics.progress import Progress
from kubecoord.analytics.reading import MAX_LINE_BYTES, EmptyInputError, Inputs, evidence_arrays, read_inputs
from kubecoord.analytics.session import default_setting
from kubecoord.history import rfc3339
from kubecoord.wire.events import SCHEMA_VERSION, VIOLATION_TYPES, Event, Primitive

DEFAULT_SKEW = 1.0
MALFORMED_EXAMPLES = 50
VIOLATION_DETAILS = 200
"""Violations listed with their evidence in summary.json (all of them are in the table)."""
COVERAGE_GAPS = 50
BROADCAST_TIMEOUT_SECONDS = 24 * 3600
"""A broadcast is waited for this long (a hung one is then the user's to stop): its time
grows with the input, as the analysis's does."""


@dataclass
class Context:
    """What every check module gets."""

    events: DataFrame
    """Valid, deduplicated events but the leader holders' renewals; ``t``/``tu``/``valid_until``
    corrected by the clock offsets; hash-partitioned by (namespace, name) and cached (the
    read's cache, filtered; cached again when the copies' pass moved them)."""
    terms: DataFrame
    """Leadership terms (leadership.intervals) of every holder event, renewals included (with
    their row ids, leadership.TERM_IDS)."""
    skew: float
    clocks: clocks.Clocks


Rows = Mapping[str, list[Row]]
"""Collected query results by name (collecting.collect)."""


@dataclass
class Findings:
    tables: dict[str, DataFrame]
    violations: list[DataFrame]
    queries: dict[str, DataFrame]
    """The small queries its part of the summary is made from, collected with every other
    check's in one Spark job (names unique across checks)."""
    summarize: Callable[[Rows], dict[str, Any]]
    """The collected rows -> its part of the summary."""
    persisted: list[DataFrame] = field(default_factory=list)


@dataclass
class Analysis:
    tables: dict[str, DataFrame]
    summary: dict[str, Any]
    events: DataFrame
    overlaps: DataFrame | None = None
    """Overlap windows (namespace, name, start, end, and both holders' terms) for the report's plots."""
    drawn: Rows = field(default_factory=dict)
    """What the report draws (analytics.drawing's queries), collected with the summary."""
    faults: list[dict[str, Any]] = field(default_factory=list)
    """Faults injected while the history was logged (a soak's faults.jsonl: ts, kind, duration,
    what), drawn on the report's timelines; not analysed."""
    unpersist: list[DataFrame] = field(default_factory=list)
    """Persisted frames to release in close()."""

    @property
    def violation_count(self) -> int:
        return int(sum(self.summary["violations"].values()))

    @property
    def malformed_share(self) -> float:
        inputs = self.summary["inputs"]
        total = inputs["events_read"] + inputs["malformed_lines"]
        return inputs["malformed_lines"] / total if total else 0.0

    def close(self) -> None:
        for frame in self.unpersist:
            release(frame)


def _leadership(ctx: Context) -> Findings:
    terms = ctx.terms
    pairs = cut(leadership.successions(terms, ctx.clocks))
    # Read by the summary's queries, the report's, the elections table and its own table's
    # write: computed once (the lock records' scan of the events included).
    gaps = cut(leadership.failover_gaps(pairs).join(
        F.broadcast(leadership.lock_records(ctx.events)), on=list(leadership.ELECTION), how="left_anti"
    ))
    overlaps = leadership.overlaps(pairs)
    undecided = leadership.undecided(pairs)
    regressions = leadership.epoch_regressions(ctx.events, ctx.skew)
    queries = {
        "leadership.totals": terms.agg(F.count("*").alias("terms"),
                                       F.countDistinct("namespace", "name").alias("elections")),
        "leadership.gaps": leadership.percentile_query(gaps, "gap", by="cause"),
        "leadership.worst": gaps.orderBy(F.col("gap").desc()).limit(10).select(
            "namespace", "name", "cause", "from_member", "to_member", "gap",
            _utc("from_end_ts").alias("from_end"), _utc("to_start_ts").alias("to_start")),
        "leadership.leaderless": gaps.agg(F.sum(F.greatest("gap", F.lit(0.0))).alias("seconds")),
        "leadership.undecided": undecided.agg(F.count("*").alias("count")),
        "leadership.undecided_examples": undecided.orderBy("start_ts", "namespace", "name", "second_member")
        .limit(leadership.UNDECIDED_EXAMPLES).select(
            "namespace", "name", "first_member", "first_epoch", "second_member", "second_epoch",
            _utc("start_ts").alias("ts"), "overlap_seconds", "uncertainty_seconds", "evidence"),
    }

    def summarize(rows: Rows) -> dict[str, Any]:
        row = _totals(rows["leadership.totals"])
        return {"leadership": {
            "elections": row["elections"],
            "terms": row["terms"],
            "failover_gap_seconds": leadership.percentile_rows(rows["leadership.gaps"], by="cause"),
            "worst_failovers": [_plain(r) for r in rows["leadership.worst"]],
            "leaderless_seconds": float(rows["leadership.leaderless"][0]["seconds"] or 0.0),
            "undecided_overlaps": int(rows["leadership.undecided"][0]["count"]),
            "undecided_overlap_examples": [_plain(r) for r in rows["leadership.undecided_examples"]],
        }}

    return Findings(
        tables={"leadership_intervals": terms.drop(*leadership.TERM_IDS), "failover_gaps": gaps,
                "leadership_windows": leadership.overlap_windows(pairs)},
        violations=[overlaps, regressions],
        queries=queries,
        summarize=summarize,
        persisted=[pairs, gaps],
    )


def _membership(ctx: Context) -> Findings:
    groups = membership.analyze(ctx.events, ctx.skew)
    churn = cut(groups.churn)
    queries = {
        "membership.totals": churn.agg(
            F.countDistinct("namespace", "name").alias("groups"),
            F.sum("joins").alias("joins"),
            F.sum("leaves").alias("leaves"),
            F.sum("expiries").alias("expiries"),
            F.max("churn").alias("max_churn_per_hour"),
        ),
        "membership.expiries": leadership.percentile_query(groups.expiries, "heartbeat_to_expiry"),
    }

    def summarize(rows: Rows) -> dict[str, Any]:
        summary = _totals(rows["membership.totals"])
        summary["heartbeat_to_expiry_seconds"] = leadership.percentile_rows(rows["membership.expiries"])
        return {"membership": summary}

    return Findings(
        tables={"membership_timeline": groups.timeline, "membership_churn": churn,
                "heartbeat_to_expiry": groups.expiries},
        violations=[groups.duplicates],
        queries=queries,
        summarize=summarize,
        persisted=[churn, groups.persisted],
    )


def _kv(ctx: Context) -> Findings:
    stores = kv.analyze(ctx.events, ctx.skew)
    per_key = cut(stores.per_key)
    queries = {
        "kv.totals": per_key.agg(
            F.countDistinct("namespace", "name").alias("stores"),
            F.count("*").alias("keys"),
            F.sum("operations").alias("operations"),
            F.sum("conflicts").alias("conflicts"),
        ),
        "kv.deleted": stores.lost_to_deletion.agg(
            F.sum("writes_lost_to_store_deletion").alias("lost"), F.max("store_incarnations").alias("incarnations")
        ),
    }

    def summarize(rows: Rows) -> dict[str, Any]:
        row = _totals(rows["kv.totals"])
        operations, conflicts = row["operations"], row["conflicts"]
        deleted = rows["kv.deleted"][0]
        return {"kv": {
            "stores": row["stores"],
            "keys": row["keys"],
            "operations": operations,
            "conflicts": conflicts,
            "conflict_rate": (conflicts / operations) if operations else 0.0,
            # Writes that vanished with a store deleted behind its clients' backs (analytics.kv):
            # reported, not a kubecoord safety violation.
            "writes_lost_to_store_deletion": int(deleted["lost"] or 0),
            "store_incarnations_max": int(deleted["incarnations"] or 0),
        }}

    return Findings(
        tables={"kv_keys": per_key, "kv_stores": stores.per_store},
        violations=[stores.backwards, stores.lost_updates, stores.create_races, stores.stale_epochs],
        queries=queries,
        summarize=summarize,
        persisted=[per_key, stores.persisted],
    )


def _rebalance(ctx: Context) -> Findings:
    found = rebalance.analyze(ctx.events, ctx.skew)
    durations = cut(found.rebalances)
    holdings = cut(found.holdings)  # the report's rebalances and the table's write read it
    queries = {
        "rebalance.totals": durations.agg(F.countDistinct("namespace", "name").alias("groups"),
                                          F.count("*").alias("rebalances")),
        "rebalance.durations": leadership.percentile_query(durations, "duration"),
    }

    def summarize(rows: Rows) -> dict[str, Any]:
        row = _totals(rows["rebalance.totals"])
        return {"rebalance": {"groups": row["groups"], "rebalances": row["rebalances"],
                              "duration_seconds": leadership.percentile_rows(rows["rebalance.durations"])}}

    return Findings(
        tables={"unit_holdings": holdings, "rebalances": durations},
        violations=[found.owned_twice, found.stale],
        queries=queries,
        summarize=summarize,
        persisted=[durations, holdings],
    )


def _totals(rows: list[Row]) -> dict[str, Any]:
    """The one row of a global aggregate by alias; a null (the sum of no rows) is 0."""
    (row,) = rows
    return {key: value or 0 for key, value in row.asDict().items()}


ONE_SHUFFLE = ("namespace", "name")
"""What the checks' events are partitioned by: the prefix of every check's key."""


def _partitions(spark: SparkSession) -> int:
    """The shuffle partitions reading sized to the input (reading._size_shuffles), given
    explicitly: adaptive execution keeps an explicit count, so the partitioning holds."""
    return int(spark.conf.get("spark.sql.shuffle.partitions") or spark.sparkContext.defaultParallelism)


CHECKS: list[Callable[[Context], Findings]] = [_leadership, _membership, _kv, _rebalance]
"""The check modules, in report order."""


def analyze(
    spark: SparkSession,
    inputs: Sequence[str],
    *,
    skew: float = DEFAULT_SKEW,
    progress: Progress | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> Analysis:
    progress = progress or Progress("analyze", enabled=False)
    spark.conf.set("spark.sql.session.timeZone", "UTC")  # hour buckets and every rendered time
    # Joins keyed by (namespace, name, more...) may then use the cached events' partitioning
    # by (namespace, name) as it is (Spark's default asks for all the join keys).
    spark.conf.set("spark.sql.requireAllClusterKeysForCoPartition", "false")
    # Adaptive execution runs every shuffle stage of a query as a Spark job of its own:
    # the summary's one collect (collecting) would be ~37 jobs, not one. The shuffle
    # partitions are sized to the input and the broadcasts are explicit, so it has
    # little left to adapt (the all-violations test history: 98 jobs with it, 65
    # without, same verdicts).
    default_setting(spark, "spark.sql.adaptive.enabled", "false")
    # The checks' broadcasts are small results of queries over every event (the terms'
    # acquisitions, the lock records): building one takes as long as a scan of the cached
    # events, which grows with the input and the load. Spark's 300 s failed a 10M analysis
    # run with 80 shuffle partitions ("Could not execute broadcast in 300 secs").
    default_setting(spark, "spark.sql.broadcastTimeout", str(BROADCAST_TIMEOUT_SECONDS))
    read = read_inputs(spark, inputs, progress=progress, max_line_bytes=max_line_bytes)
    counts = read.counts
    if counts["events"] == 0:
        detail = f" ({counts['malformed']} malformed line(s))" if counts["malformed"] else ""
        raise EmptyInputError(f"no valid events in {len(read.files)} file(s){detail}")

    persisted: list[DataFrame] = [read.lines]
    covered = coverage.resolve(spark, read.events, read.ranges)
    if covered.sorted_processes:
        progress.step(f"dropping copies: {len(covered.sorted_processes)} process(es) whose seq ranges "
                      "do not rule copies out")
        for frame in covered.persisted:
            frame.count()  # built by one job here, not by each of the jobs that read it next
    persisted += covered.persisted
    deduped = covered.events
    progress.step("estimating clock offsets")
    placed = clocks.place(deduped)  # on each process's monotonic timeline: wall-clock steps undone
    estimated = clocks.estimate(placed, skew)
    offset = estimated.offset_column(F.col("process"))
    corrected = placed.withColumns({
        "t": F.col("t") - offset,
        "tu": F.col("tu") - (offset * 1e6).cast("long"),
        "valid_until": F.col("valid_until") - offset,
        "sent": F.col("sent") - offset,
    })
    # Terms from every holder event, within the read's partitions (by election: no
    # shuffle), one sort and one hash aggregate (leadership.intervals); the renewals, most
    # of a log's events, go no further.
    terms = cut(leadership.intervals(corrected, persisted=persisted))
    persisted.append(terms)
    renewal = (F.col("primitive") == Primitive.LEADER_ELECTION) & (F.col("event") == Event.RENEWED)
    events = corrected.filter(~renewal)
    if covered.sorted_processes:
        # The copies' pass shuffled the events by process: the one shuffle of the checks is
        # made again (the read's partitioning, reading.PARTITIONING, is what every check's
        # key starts with), and cached.
        events = events.repartition(_partitions(spark), *ONE_SHUFFLE).sortWithinPartitions(
            "primitive", "event").persist(StorageLevel.MEMORY_AND_DISK_DESER)
        persisted.append(events)
        events = cached_leaf(events)
    context = Context(events=events, terms=terms, skew=skew, clocks=estimated)

    progress.step("checking safety and computing metrics")
    findings = [check(context) for check in CHECKS]
    # The checks' violations carry their evidence as row ids: the evidence is fetched once,
    # for all of them, from the events read.
    found = cut(evidence_arrays(cut(violations.union([v for f in findings for v in f.violations])), read.events,
                                persisted=persisted))
    findings_of_coverage = cut(covered.findings)
    tables: dict[str, DataFrame] = {"violations": found}
    for finding in findings:
        tables.update(finding.tables)
    overlaps = tables.pop("leadership_windows")
    # Read by the report's choice of elections, its table and the table's write: computed once.
    tables["elections"] = cut(leadership.per_election(tables["leadership_intervals"], tables["failover_gaps"], found))
    persisted.append(tables["elections"])
    tables["seq_gaps"] = covered.gaps
    tables["malformed_lines"] = read.malformed
    tables["unreadable_files"] = read.unreadable
    first, last = drawing.span(_iso(counts["first"]) or "", _iso(counts["last"]) or "")
    # Every figure of the summary and of the report from one collect: the checks' queries,
    # the global ones and what the report draws (analytics.drawing).
    queries: dict[str, DataFrame] = {
        **{name: query for finding in findings for name, query in finding.queries.items()},
        **_violation_queries(found), **_coverage_queries(findings_of_coverage), **_input_queries(read),
        **drawing.queries(tables, overlaps, width=drawing.bin_seconds(last - first)),
    }
    rows = collecting.collect(queries)
    coverage_summary, copies = _coverage_summary(rows)
    by_type = {row["type"]: row["count"] for row in rows["violations.by_type"]}
    summary: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "skew_tolerance_seconds": skew,
        "clocks": estimated.summary(),
        "inputs": _inputs_summary(read, rows, copies),
        "coverage": coverage_summary,
        "violations": {kind: int(by_type.get(kind, 0)) for kind in VIOLATION_TYPES},
        "violation_details": [row.asDict(recursive=True) for row in rows["violations.details"]],
    }
    persisted += [found, findings_of_coverage]
    for finding in findings:
        summary.update(finding.summarize(rows))
        persisted += finding.persisted
    drawn = {name: found_rows for name, found_rows in rows.items() if name.startswith(drawing.PREFIX)}
    return Analysis(tables=tables, summary=summary, events=events, overlaps=overlaps, drawn=drawn,
                    unpersist=persisted)


def _input_queries(read: Inputs) -> dict[str, DataFrame]:
    return {
        "inputs.unreadable": read.unreadable,
        "inputs.malformed": read.malformed.orderBy("file", "line").limit(MALFORMED_EXAMPLES),
    }


def _inputs_summary(read: Inputs, rows: Rows, copies: int) -> dict[str, Any]:
    counts = read.counts
    kept = counts["events"] - copies
    return {
        "files": len(read.files),
        "unreadable_files": [_plain(r) for r in rows["inputs.unreadable"]],
        "events_read": counts["events"],
        "events": kept,
        "duplicates_dropped": counts["events"] - kept,
        "malformed_lines": counts["malformed"],
        "processes": counts["processes"],
        "first_event": _iso(counts["first"]),
        "last_event": _iso(counts["last"]),
        "malformed_examples": [_plain(row) for row in rows["inputs.malformed"]],
    }


def _coverage_queries(findings: DataFrame) -> dict[str, DataFrame]:
    return {
        "coverage.kinds": findings.groupBy("kind").agg(
            F.count("*").alias("n"), F.sum("missing").alias("missing"), F.countDistinct("process").alias("processes"),
            F.collect_list(F.when(F.col("kind") == coverage.LATE, F.struct("process", "before_seq"))).alias("late"),
        ),
        "coverage.worst": findings.filter(F.col("kind") == coverage.GAP).orderBy(
            F.col("missing").desc(), "process").limit(COVERAGE_GAPS).select(
            "process", "after_seq", "before_seq", "missing", _utc("from_ts").alias("from"), _utc("to_ts").alias("to"),
            "file"),
    }


def _coverage_summary(rows: Rows) -> tuple[dict[str, Any], int]:
    """The coverage part of the summary, and the number of copies dropped."""
    per_kind = {row["kind"]: row for row in rows["coverage.kinds"]}
    gaps = per_kind.get(coverage.GAP)
    late = per_kind.get(coverage.LATE)
    copies = per_kind.get(coverage.COPY)
    summary = {
        "seq_gaps": gaps["n"] if gaps else 0,
        "missing_events": (gaps["missing"] or 0) if gaps else 0,
        "processes_with_gaps": gaps["processes"] if gaps else 0,
        "largest_gaps": [_plain(r) for r in rows["coverage.worst"]],
        "logs_starting_late": {r["process"]: r["before_seq"] for r in sorted(late["late"])} if late else {},
    }
    return summary, int(copies["n"]) if copies else 0


def _violation_queries(found: DataFrame) -> dict[str, DataFrame]:
    """Violations by type, and the first VIOLATION_DETAILS by time (times as UTC text)."""
    evidence = F.transform("evidence", lambda e: F.struct(
        e["file"].alias("file"), e["line"].alias("line"), e["process"].alias("process"), e["event"].alias("event"),
        F.date_format(e["ts"], "yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'").alias("ts"),
    ))
    return {
        "violations.by_type": found.groupBy("type").count(),
        "violations.details": found.orderBy("ts", "type", "name", "subject").limit(VIOLATION_DETAILS).select(
            "type", "namespace", "primitive", "name", "subject", _utc("ts").alias("ts"), "detail",
            evidence.alias("evidence"),
        ),
    }


def _utc(column: str) -> Any:
    """A timestamp column as RFC 3339 UTC text (the session time zone is UTC), so no
    driver time zone can creep in when rows are collected."""
    return F.date_format(F.col(column), "yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'")


def _plain(row: Any) -> dict[str, Any]:
    return dict(row.asDict(recursive=True))


def _iso(seconds: float | None) -> str | None:
    # From UNIX seconds, not a collected timestamp: PySpark hands those back in the
    # driver's local time zone.
    return None if seconds is None else rfc3339(seconds)
