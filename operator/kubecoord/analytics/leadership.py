"""Leadership terms, the two leader safety checks, failover gaps and per-election figures.

A term is one holder's tenure: the holder's own events (acquired, renewed, lost,
resigned) with one (namespace, name, process, member, epoch) and one *acquisition*:
the number of ``acquired`` events of that holder and epoch so far in the process's own
order (seq), so a member that re-acquires with its own epoch starts a second term
(events before the first ``acquired`` — a log that begins mid-term — form
acquisition 0). A term starts at ``acquired`` (else its first event) and ends at
``lost``/``resigned``; what ``valid_until`` means depends on the backend:

- kubernetes (and backends not listed): a lease renewed by ``renewed`` events;
  valid_until is until when the holder may act without renewing, so a term ends at the
  earlier of its end event and its last valid_until, and at its last valid_until when
  the process vanished;
- zookeeper, etcd (its lease), and memory terms without logged renewals (memory
  histories written before the memory backend ran the lease core): a session kept
  alive without logged renewals; valid_until is the session's (or lease's) proven life
  when the event was logged, the earliest end if the process died then. It bounds a term only when the process
  vanished (no end event); a 100 s term with valid_until 5 s after its start lasts
  100 s. (A single ``renewed`` as a term's last event is the heartbeat such a process
  logs when it crashes, not a renewal.) Memory terms that renew are leases. An end
  event's own valid_until is when the term really ended, if earlier: a zookeeper leader
  resumed after a pause longer than its session logs ``lost`` late, with valid_until =
  the end of its session's proven life (it stopped leading then).

All times are corrected by the clock offsets estimated from the log (clocks module).
Checks:
- overlapping_leadership: terms in *epoch* order (then acquisition, then start): each
  term against the latest-ending term of a lower epoch (or an earlier acquisition); an
  overlap counts when it exceeds what the clocks leave uncertain between the two
  processes (0 within one process, the tolerance without evidence);
  An overlap of the corrected times within that uncertainty is *undecided* (``undecided``):
  the log cannot tell a split brain from clock skew there; it is counted and listed, not
  a violation;
- epoch_not_increasing: an acquisition whose epoch is not above every epoch acquired
  more than the tolerance earlier (the same member re-acquiring its own epoch is allowed).
Failover gap: from the latest end among the earlier terms to the next term's start,
cause "resign" when that term ended by resigning, "expiry" otherwise.
Not guaranteed: terms of a process whose log was lost entirely are invisible.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Row, Window, WindowSpec
from pyspark.sql import functions as F

from kubecoord.analytics import violations
from kubecoord.analytics.clocks import Clocks
from kubecoord.analytics.frames import cut
from kubecoord.analytics.reading import LINE_ORDER, evidence_of
from kubecoord.wire.events import HOLDER_EVENTS, SESSION_BACKENDS, TERM_ENDS, Event, Primitive

ELECTION = ("namespace", "name")
TERM_IDS = ("start_rid", "end_rid")
"""Columns of ``intervals`` that are not the leadership_intervals table's: the row ids of a
term's first and ending events, for the violations' evidence (reading.evidence_arrays)."""
HOLDER = ("namespace", "name", "process", "member", "epoch")
TERM = (*HOLDER, "acquisition")
SESSION_UNLESS_RENEWED = ("memory",)
APPROX_ACCURACY = 10_000


def held(events: DataFrame) -> DataFrame:
    """The leader holders' own events (acquired, renewed, lost, resigned): what terms are made of."""
    return events.filter((F.col("primitive") == Primitive.LEADER_ELECTION) & F.col("event").isin(*HOLDER_EVENTS))


def intervals(events: DataFrame, *, persisted: list[DataFrame]) -> DataFrame:
    """One row per term: TERM, backend, start/end (seconds and timestamps), end_reason, evidence
    (and the row ids of its first and ending events, ``start_rid``/``end_rid``, TERM_IDS).

    One sort of the holders' events in their process's order, one window pass over it (each
    event's place ``_n`` and its acquisition) and one hash aggregate whose buffers are
    numbers only (the first, last and ending events are kept as row ids); the evidence of
    the few events that start and end terms is joined back afterwards. The frames it
    persists are appended to ``persisted`` (release them when done)."""
    holding = held(events).withColumn("pos", F.coalesce("seq", "tu"))  # the process's own order
    own = Window.partitionBy(*HOLDER)
    # One sort serves both windows: the place order refines the position order, so the
    # acquisitions' running count (peers by position included) reads the same sorted rows.
    # (file, block, rid) is the file and line order (reading.ORDER).
    in_place = own.orderBy("pos", "seq", "tu", "file", "block", "rid")
    placed = holding.select(
        *TERM[:-1], "backend", "event", "t", "valid_until", "rid", "pos",
        F.row_number().over(in_place).alias("_n"),
        # A holder's backend is its process's: a grouping key below, so that no buffer holds
        # text; over the whole holder in the place order, so the same window pass finds it.
        F.max("backend").over(in_place.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)).alias(
            "_backend"),
    ).select(
        "*",
        F.sum((F.col("event") == Event.ACQUIRED).cast("int")).over(
            own.orderBy("pos").rangeBetween(Window.unboundedPreceding, Window.currentRow)).cast("int").alias(
            "acquisition"),
    )
    event = F.col("event")
    ending = F.when(event.isin(*TERM_ENDS), F.col("_n"))
    terms = placed.groupBy(*TERM, "_backend").agg(
        F.min(F.when(event == Event.ACQUIRED, F.col("t"))).alias("acquired_t"),
        F.min("t").alias("first_t"),
        F.max("t").alias("last_t"),
        F.max("valid_until").alias("max_valid_until"),
        F.min_by("rid", "_n").alias("first_rid"),
        F.max_by("rid", "_n").alias("last_rid"),
        F.max_by(event == Event.RENEWED, "_n").alias("last_renewed"),
        F.min_by("rid", ending).alias("end_rid"),
        F.min_by("t", ending).alias("end_t"),
        F.min_by("valid_until", ending).alias("end_valid_until"),
        F.min_by(event == Event.RESIGNED, ending).alias("end_resigned"),
        F.count("*").alias("events"),
        F.count(F.when(event == Event.RENEWED, 1)).alias("renewals"),
    )
    end_t = F.col("end_t")
    vanished = F.greatest(F.coalesce("max_valid_until", "last_t"), F.col("last_t"))
    renewed_before_last = F.col("renewals") - F.col("last_renewed").cast("int")
    session = F.col("backend").isin(*SESSION_BACKENDS) | (
        F.col("backend").isin(*SESSION_UNLESS_RENEWED) & (renewed_before_last == 0)
    )
    # A session holder's end event may carry when its leadership really ended (a zookeeper
    # leader paused past its session logs ``lost`` late, with the end of its session's
    # proven life as valid_until).
    ended = F.when(session, F.least(end_t, F.coalesce("end_valid_until", end_t))).otherwise(
        F.least(end_t, F.coalesce("max_valid_until", end_t)))
    end = F.when(end_t.isNotNull(), ended).otherwise(F.when(session, vanished).otherwise(
        F.coalesce("max_valid_until", "last_t")))
    reason = F.when(F.col("end_rid").isNull(), F.lit(Event.EXPIRED)).when(
        F.col("end_resigned"), F.lit(Event.RESIGNED)).otherwise(F.lit(Event.LOST))
    found = cut(terms.withColumnRenamed("_backend", "backend").select(
        *TERM,
        "backend",
        F.coalesce("acquired_t", "first_t").alias("start"),
        end.alias("end"),
        reason.alias("end_reason"),
        "events",
        F.col("first_rid").alias("start_rid"),
        F.coalesce("end_rid", "last_rid").alias("end_rid"),
        F.col("first_rid").alias("_start_rid"),
        F.coalesce("end_rid", "last_rid").alias("_end_rid"),
    ))
    with_evidence = evidence_of(found, holding, {"_start_rid": "start_evidence", "_end_rid": "end_evidence"},
                                persisted=persisted)
    persisted.append(found)
    return with_evidence.select(
        *TERM, "backend", "start", "end", "end_reason", "events", "start_evidence", "end_evidence",
        "start_rid", "end_rid",
        F.timestamp_seconds("start").alias("start_ts"),
        F.timestamp_seconds("end").alias("end_ts"),
        (F.col("end") - F.col("start")).alias("duration"),
    )


def _epoch_order() -> WindowSpec:
    return Window.partitionBy(*ELECTION).orderBy("epoch", "acquisition", "start", "process", "member")


def successions(terms: DataFrame, clocks: Clocks) -> DataFrame:
    """Each term with ``prev``, the latest-ending term before it in epoch order, and the
    overlap between them: ``overlap`` (corrected clocks) and ``slack`` (what the clocks
    leave uncertain). One row per term that has a predecessor."""
    earlier = _epoch_order().rowsBetween(Window.unboundedPreceding, -1)
    summary = F.struct("end", "start", "end_reason", "process", "member", "epoch", "acquisition", "end_ts",
                       "start_evidence", "end_evidence", *TERM_IDS)
    paired = terms.withColumn("prev", F.max(summary).over(earlier)).filter(F.col("prev").isNotNull())
    overlap = F.least(F.col("prev.end"), F.col("end")) - F.greatest(F.col("prev.start"), F.col("start"))
    return paired.select(
        "*",
        overlap.alias("overlap"),
        clocks.slack_column(F.col("prev.process"), F.col("process")).alias("slack"),
    )


def overlaps(pairs: DataFrame) -> DataFrame:
    """overlapping_leadership violations, with the overlap's window (for the timeline)."""
    found = pairs.filter(F.col("overlap") > F.col("slack"))
    detail = F.format_string(
        "%s (epoch %d) took over while %s (epoch %d) still led: %s s of overlap (clock uncertainty %s s)",
        F.col("member"), F.col("epoch"), F.col("prev.member"), F.col("prev.epoch"), violations.seconds("overlap"),
        violations.seconds("slack"),
    )
    return violations.shape(
        found,
        kind="overlapping_leadership",
        primitive=Primitive.LEADER_ELECTION,
        subject=F.col("member"),
        ts=F.col("start_ts"),
        detail=detail,
        evidence=F.array("prev.start_rid", "prev.end_rid", "start_rid", "end_rid"),
    )


UNDECIDED_EXAMPLES = 20


def undecided(pairs: DataFrame) -> DataFrame:
    """Successions whose corrected times overlap, by no more than the clocks leave uncertain
    between the two processes: the log cannot tell a split brain from clock skew. Not
    violations; the summary counts them and lists the first UNDECIDED_EXAMPLES by time."""
    return pairs.filter((F.col("overlap") > 0) & (F.col("overlap") <= F.col("slack"))).select(
        *ELECTION, F.col("prev.member").alias("first_member"), F.col("prev.epoch").alias("first_epoch"),
        F.col("member").alias("second_member"), F.col("epoch").alias("second_epoch"), "start_ts",
        F.round("overlap", 6).alias("overlap_seconds"), F.round("slack", 6).alias("uncertainty_seconds"),
        F.array("prev.start_evidence", "prev.end_evidence", "start_evidence", "end_evidence").alias("evidence"),
    )


def overlap_windows(pairs: DataFrame) -> DataFrame:
    """namespace, name, start, end (seconds) of every overlap found, and the two holders'
    terms: first_member/first_epoch/first_start/first_end (the earlier holder) and
    second_member/... (for the report's plots)."""
    found = pairs.filter(F.col("overlap") > F.col("slack"))
    return found.select(*ELECTION, F.greatest("prev.start", "start").alias("start"),
                        F.least("prev.end", "end").alias("end"),
                        F.col("prev.member").alias("first_member"), F.col("prev.epoch").alias("first_epoch"),
                        F.col("prev.start").alias("first_start"), F.col("prev.end").alias("first_end"),
                        F.col("member").alias("second_member"), F.col("epoch").alias("second_epoch"),
                        F.col("start").alias("second_start"), F.col("end").alias("second_end"))


def epoch_regressions(events: DataFrame, skew: float) -> DataFrame:
    """epoch_not_increasing violations among ``acquired`` events: elections' epochs, and
    locks' fencing tokens (a lock's acquired event repeats its record's epoch for the same
    member, which is no regression). Semaphores are checked through their slot records."""
    return violations.union(
        [_regressions(events, skew, Primitive.LEADER_ELECTION), _regressions(events, skew, Primitive.LOCK)]
    )


def _regressions(events: DataFrame, skew: float, primitive: str) -> DataFrame:
    kinds = {Primitive.LEADER_ELECTION, Primitive.LOCK} if primitive == Primitive.LOCK else {Primitive.LEADER_ELECTION}
    acquired = events.filter(F.col("primitive").isin(*sorted(kinds)) & (F.col("event") == Event.ACQUIRED))
    earlier = violations.earlier_than(skew, *ELECTION)
    best = F.max(F.struct("epoch", "tu", "member", *LINE_ORDER)).over(earlier)
    found = acquired.withColumn("prev", best).filter(
        (F.col("primitive") == primitive)
        & (
            (F.col("prev.epoch") > F.col("epoch"))
            | ((F.col("prev.epoch") == F.col("epoch")) & (F.col("prev.member") != F.col("member")))
        )
    )
    detail = F.format_string(
        "%s acquired %s %d after %s had acquired %s %d",
        F.col("member"), F.lit("token" if primitive == Primitive.LOCK else "epoch"), F.col("epoch"),
        F.col("prev.member"), F.lit("token" if primitive == Primitive.LOCK else "epoch"), F.col("prev.epoch"),
    )
    return violations.shape(
        found,
        kind="epoch_not_increasing",
        primitive=primitive,
        subject=F.col("member"),
        ts=F.col("ts"),
        detail=detail,
        evidence=F.array("prev.rid", "rid"),
    )


def lock_records(events: DataFrame) -> DataFrame:
    """namespace, name of the election records held as locks (their ``lock`` events): a
    free lock between holds is no failover, so their gaps stay out of the failover figures.
    Not found: a semaphore's slot records (NAME-I; the events carry the slot, not read)."""
    return events.filter(F.col("primitive") == Primitive.LOCK).select(*ELECTION).distinct()


def failover_gaps(pairs: DataFrame) -> DataFrame:
    """One row per change of leader that is not an overlap: the latest earlier end to the
    next term's start (a term nested inside another is not a failover)."""
    changes = pairs.filter((F.col("overlap") <= F.col("slack")) & (F.col("end") > F.col("prev.end")))
    return changes.select(
        *ELECTION,
        F.when(F.col("prev.end_reason") == Event.RESIGNED, "resign").otherwise("expiry").alias("cause"),
        F.col("prev.end_reason").alias("end_reason"),
        F.col("prev.member").alias("from_member"),
        F.col("prev.epoch").alias("from_epoch"),
        F.col("member").alias("to_member"),
        F.col("epoch").alias("to_epoch"),
        F.col("prev.end_ts").alias("from_end_ts"),
        F.col("start_ts").alias("to_start_ts"),
        (F.col("start") - F.col("prev.end")).alias("gap"),
        F.array("prev.end_evidence", "start_evidence").alias("evidence"),
    )


def per_election(terms: DataFrame, gaps: DataFrame, found: DataFrame) -> DataFrame:
    """One row per election: terms, failovers, approximate median and max gap, time
    without a leader (the sum of positive gaps), violations."""
    term_counts = terms.groupBy(*ELECTION).agg(
        F.count("*").alias("terms"), F.min("start_ts").alias("first_start_ts"), F.max("end_ts").alias("last_end_ts")
    )
    gap_stats = gaps.groupBy(*ELECTION).agg(
        F.count("*").alias("failovers"),
        F.percentile_approx("gap", 0.5, APPROX_ACCURACY).alias("gap_p50_approx"),
        F.max("gap").alias("gap_max"),
        F.sum(F.greatest(F.col("gap"), F.lit(0.0))).alias("leaderless_seconds"),
    )
    bad = found.filter(F.col("primitive") == Primitive.LEADER_ELECTION).groupBy(*ELECTION).agg(
        F.count("*").alias("violations")
    )
    return (
        term_counts.join(gap_stats, list(ELECTION), "left").join(bad, list(ELECTION), "left")
        .select(
            *ELECTION, "terms", F.coalesce("failovers", F.lit(0)).alias("failovers"), "gap_p50_approx", "gap_max",
            F.coalesce("leaderless_seconds", F.lit(0.0)).alias("leaderless_seconds"),
            F.coalesce("violations", F.lit(0)).alias("violations"), "first_start_ts", "last_end_ts",
        )
    )


def percentile_query(values: DataFrame, column: str, by: str | None = None) -> DataFrame:
    """count, p50/p95/p99 (``p``), max and mean of ``column``, per ``by`` and for all rows
    (``by`` null), or for all rows only (column ``g`` null): rows for percentile_rows.

    Exact percentiles (interpolated): the rows are failovers or expiries, a small
    fraction of the events (one per term or membership), so the exact buffers stay small.
    """
    stats: list[Column] = [
        F.count(column).alias("count"),
        F.percentile(column, [0.5, 0.95, 0.99]).alias("p"),
        F.max(column).alias("max"),
        F.mean(column).alias("mean"),
    ]
    if by is not None:
        return values.rollup(by).agg(*stats)
    return values.agg(*stats).withColumn("g", F.lit(None).cast("string"))


def percentile_rows(rows: Sequence[Row], by: str | None = None) -> list[dict[str, object]]:
    """percentile_query's rows -> the summary's entries: group ("all" first), count, p50,
    p95, p99, max, mean; groups without values left out."""
    found = []
    for row in rows:
        if row["count"] == 0:
            continue
        p = row["p"] or [None, None, None]
        group = row[by or "g"] or "all"
        found.append({"group": group, "count": row["count"], "p50": p[0], "p95": p[1], "p99": p[2],
                      "max": row["max"], "mean": row["mean"]})
    return sorted(found, key=lambda r: (r["group"] != "all", str(r["group"])))
