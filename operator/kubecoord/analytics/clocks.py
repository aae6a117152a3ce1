"""Clock offsets between processes, estimated from events that must have happened in order.

Every process stamps its events with its own wall clock. Some pairs of events are
causally ordered whatever the clocks say (x on process A happened before y on B):
- a leader's acquisition of epoch e before any other process's ``observed`` of epoch e
  naming it (two candidates of a lease backend may write one epoch, the record deleted
  between them, and only the one that raised the epoch mark leads), and before the
  acquisition of the next epoch of that election was confirmed (its ``acquired``). The
  acquisition's side is its ``sent`` (when its write went out) where the event has it:
  ``acquired`` itself is stamped once the write is confirmed, and others may see the
  record before that (a producer without ``sent`` is taken to stamp ``acquired`` when
  the write took effect, except on a session backend, ZooKeeper and etcd, where the
  acquisition is an older candidate's node going away, not the acquirer's write: there
  an ``acquired`` without ``sent`` bounds nothing);
- a KV write of version v before the write of version v + 1 of the same key in the same
  store incarnation, when the log holds one write of version v of that key within the
  pairing window (a key deleted and re-created writes each version once per incarnation,
  and the nearest of several may be another incarnation's: no pair is made then). The
  earlier write's side is its ``sent`` where the event has it: its ``ts`` is stamped once
  the write is confirmed, which may be long after it took effect (a writer paused before
  stamping, an unknown outcome resolved by a later read). A write without ``sent`` is
  taken to be stamped when it took effect, except Cassandra's (KV_STAMPED_WHEN_CONFIRMED),
  which bounds nothing as the earlier side; the later write's side is its ``ts``.
Each such pair bounds the clock offset between A and B: offset(B) - offset(A) <=
ts_B(y) - ts_A(x). Bounds from both directions bracket the offset, as NTP does. The
bounds are closed transitively (A-C and C-B bound A-B) on the driver: there are at most
a few hundred processes, so the bounds matrix is small.

What the checks get (``Clocks``):
- ``offset``: a per-process estimate (seconds, relative to a reference process of its
  connected group): the midpoint of what the evidence allows when the evidence is tight
  (within twice the tolerance), else the allowed value closest to 0 — no evidence, no
  correction. Checks compare corrected times (ts - offset).
- ``slack(A, B)``: how far the corrected difference between a time on A and a time on B
  may still be off. With no evidence it is the stated tolerance; with evidence it is
  what the bounds leave (0 within one process), so a proven 2 s skew does not turn a
  clean handover into an overlap and a 0.9 s overlap between clocks known to within
  0.01 s is not hidden by a 1 s tolerance.
Guarantees: only causally certain pairs are used, so with a linearizable backend the
bounds hold. A pair of processes whose evidence contradicts a constant offset (a clock
stepped during the log) gets no bound (the tolerance applies to it) and is named in the
summary; evidence contradicting itself across more processes (a negative cycle) is
discarded entirely and said so.
Clocks stepped during the log: events that carry ``mono`` (the emitter's monotonic clock
at ``ts``) are first placed on each process's monotonic timeline (``place``): t = mono +
the process's median of (ts - mono), so a step of its wall clock moves none of them and
what is left is one constant offset per process, which the evidence above estimates.
valid_until and sent move with their event: kubecoord's clients log ``sent`` on the wall
clock of the event's ``ts`` (``ts`` minus the monotonic time elapsed since the request went
out), so a step between the two (an etcd or ZooKeeper candidate may wait minutes behind
the leader) does not move ``sent`` past the write. Events without ``mono`` (older logs, injected clocks)
keep their ts.
Not guaranteed: offsets that drift during the log without ``mono`` (one constant per
process is assumed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from kubecoord.analytics.frames import cut, release
from kubecoord.wire.events import SESSION_BACKENDS, Event, Primitive

MAX_PROCESSES = 400
"""Beyond this many processes the transitive closure (cubic) is skipped: direct bounds only."""
REPORTED_PAIRS = 20
KV_PAIRING_SECONDS = 60
KV_STAMPED_WHEN_CONFIRMED = ("cassandra",)
"""Backends whose KV writes were logged without ``sent``, stamped once the write was
confirmed — after a Paxos timeout's resolving read, long after the write took effect: such
a write without ``sent`` is no lower bound of its write."""


@dataclass
class Clocks:
    tolerance: float
    offsets: dict[str, float] = field(default_factory=dict)
    slacks: dict[tuple[str, str], float] = field(default_factory=dict)
    """For process pairs with evidence: the uncertainty left after correction (seconds)."""
    bounds: list[dict[str, Any]] = field(default_factory=list)
    """Per pair with evidence: a, b, low, high (bounds of offset(b) - offset(a)) and pairs."""
    inconsistent: bool = False
    """Evidence contradicted itself across processes (a cycle): none of it was used."""
    contradicted: list[tuple[str, str]] = field(default_factory=list)
    """Pairs whose evidence contradicts a constant offset (a stepped clock): not used."""

    def offset_column(self, process: Column) -> Column:
        """This process's estimated offset in seconds (0 when unknown)."""
        if not self.offsets:
            return F.lit(0.0)
        mapping = F.create_map(*[x for p, o in sorted(self.offsets.items()) for x in (F.lit(p), F.lit(float(o)))])
        return F.coalesce(mapping[process], F.lit(0.0))

    def slack_column(self, a: Column, b: Column) -> Column:
        """The uncertainty of a corrected time difference between processes ``a`` and ``b``."""
        estimated = self.offset_column(b) - self.offset_column(a)
        default = F.when(a == b, F.lit(0.0)).otherwise(F.greatest(F.lit(0.0), estimated + F.lit(self.tolerance)))
        if not self.slacks:
            return default
        mapping = F.create_map(*[x for (p, q), s in sorted(self.slacks.items()) for x in (F.lit(f"{p}\n{q}"),
                                                                                          F.lit(float(s)))])
        return F.coalesce(mapping[F.concat_ws("\n", a, b)], default)

    def summary(self) -> dict[str, Any]:
        seen = max((_proven(b) for b in self.bounds), default=0.0)
        stated = [b for b in map(self._stated, self.bounds) if b["low"] is not None or b["high"] is not None]
        widest = sorted(stated, key=lambda b: -_proven(b))
        return {
            "tolerance_seconds": self.tolerance,
            "estimated_skew_seconds": round(seen, 6),
            "note": "estimated_skew_seconds is the largest clock difference between two processes that the "
                    "log proves (causally ordered events); the tolerance applies where there is no such evidence. "
                    "largest_skews: low/high bound offset(b) - offset(a) in seconds; a side no tighter than the "
                    "tolerance is null",
            "process_offsets_seconds": {p: round(o, 6) for p, o in sorted(self.offsets.items())},
            "pairs_with_evidence": len(self.bounds),
            "largest_skews": widest[:REPORTED_PAIRS],
            "inconsistent_evidence": self.inconsistent,
            "pairs_with_stepped_clocks": [list(pair) for pair in self.contradicted],
        }


    def _stated(self, bound: dict[str, Any]) -> dict[str, Any]:
        """A pair's bounds as the summary states them: a side looser than the tolerance (say
        the time between two acquisitions 98 s apart, the only order two processes' events
        share) says nothing about their clocks and is left out, unless the other side
        brackets the offset with it within twice the tolerance."""
        low, high = bound["low"], bound["high"]
        if low is not None and high is not None and high - low <= 2 * self.tolerance:
            return bound
        return {**bound, "low": low if low is not None and low > -self.tolerance else None,
                "high": high if high is not None and high < self.tolerance else None}


def _proven(bound: dict[str, Any]) -> float:
    """The least clock difference a pair's bounds allow."""
    low, high = bound["low"], bound["high"]
    return max(0.0, low if low is not None else 0.0, -high if high is not None else 0.0)


def place(events: DataFrame) -> DataFrame:
    """Events whose ``mono`` is known moved onto their process's monotonic timeline: ``t``,
    ``tu``, ``valid_until`` and ``sent`` shifted by (median(ts - mono) + mono) - ts of the process."""
    # One job, here: the anchors (one number per process) go into every later query as a
    # literal map, instead of each check's plan aggregating all events again to find them.
    anchors = {
        row["process"]: float(row["anchor"])
        for row in events.filter(F.col("mono").isNotNull())
        .groupBy("process")
        .agg(F.percentile_approx(F.col("t") - F.col("mono"), 0.5, 10_000).alias("anchor"))
        .collect()
    }
    if not anchors:
        return events
    mapping = F.create_map(*[x for p, a in sorted(anchors.items()) for x in (F.lit(p), F.lit(a))])
    shift = F.coalesce(mapping[F.col("process")] + F.col("mono") - F.col("t"), F.lit(0.0))
    placed = events.withColumn("_shift", shift)
    return placed.withColumns({
        "t": F.col("t") + F.col("_shift"),
        "tu": F.col("tu") + F.round(F.col("_shift") * 1e6).cast("long"),
        "valid_until": F.col("valid_until") + F.col("_shift"),
        "sent": F.col("sent") + F.col("_shift"),
    }).drop("_shift").select(*events.columns)


CANDIDATE_COLUMNS = ("namespace", "name", "primitive", "event", "process", "backend", "member", "epoch", "key",
                     "store_incarnation", "version", "t", "sent", "rid")


def candidates(events: DataFrame) -> DataFrame:
    """The events a causal pair can be made of (leader ``acquired`` and ``observed``, KV
    ``put`` and ``updated``: a few percent of a log), with the columns the pairs read."""
    primitive, event = F.col("primitive"), F.col("event")
    causal = ((primitive == Primitive.LEADER_ELECTION) & event.isin(Event.ACQUIRED, Event.OBSERVED)) | (
        (primitive == Primitive.KV) & event.isin(Event.PUT, Event.UPDATED))
    return events.filter(causal).select(*CANDIDATE_COLUMNS)


def evidence_pairs(events: DataFrame) -> DataFrame:
    """(a, b, hi): offset(b) - offset(a) <= hi, the tightest per ordered pair of processes.
    ``events`` may be any frame holding the candidates' rows and columns (``candidates``)."""
    leader = events.filter(F.col("primitive") == Primitive.LEADER_ELECTION)
    # An acquisition took effect no earlier than its write was sent (``sent``); ``acquired``
    # itself is stamped once the write is confirmed, which another process may see first.
    # On a session backend the acquisition is not the acquirer's write: without ``sent``
    # nothing bounds it from below (another process may see it lead well before the stamp).
    own_write = ~F.col("backend").isin(*SESSION_BACKENDS)
    began = F.when(F.col("sent").isNotNull(), F.least("sent", "t")).when(own_write, F.col("t"))
    acquired = leader.filter(F.col("event") == Event.ACQUIRED).select(
        "namespace", "name", "epoch", "member", F.col("process").alias("a"), began.alias("ta"),
        F.col("t").alias("confirmed"),
    )
    observed = leader.filter(F.col("event") == Event.OBSERVED).select(
        "namespace", "name", "epoch", "member", F.col("process").alias("b"), F.col("t").alias("tb")
    )
    # An observation of epoch e names its holder: on a lease backend two candidates may
    # write epoch e (the record deleted between them), and only the one that raised the
    # epoch mark leads; an observation of the other's record may come before the leader's
    # write was sent, so only an observation naming the acquirer is paired with it.
    seen = acquired.join(observed, ["namespace", "name", "epoch", "member"])
    # The next epoch's acquisition took effect by the time it was confirmed.
    by_epoch = Window.partitionBy("namespace", "name").orderBy("epoch", "ta")
    following = acquired.select(
        "a", "ta", F.lead(F.struct("a", "confirmed", "epoch")).over(by_epoch).alias("n"), "epoch"
    ).filter(F.col("n.epoch") > F.col("epoch")).select(
        "a", "ta", F.col("n.a").alias("b"), F.col("n.confirmed").alias("tb"))

    # Versions restart at 1 in a re-created store: pair only within one store incarnation.
    unstamped = F.col("backend").isin(*KV_STAMPED_WHEN_CONFIRMED)
    writes = events.filter((F.col("primitive") == Primitive.KV) & F.col("event").isin(Event.PUT, Event.UPDATED)).select(
        "namespace", "name", "key", F.coalesce("store_incarnation", F.lit("")).alias("life"), "version", "process",
        "t", "rid",
        F.when(F.col("sent").isNotNull(), F.least("sent", "t")).when(~unstamped, F.col("t")).alias("began"),
    )
    # Only versions written within a minute or two of each other are paired: keys
    # re-created often would otherwise pair every incarnation with every other.
    before = writes.select(
        # The earlier write happened no earlier than it began (``sent``): its ts may be late
        # (a writer paused before stamping it, an unknown outcome resolved by a later read),
        # which would make the bound too tight. A Cassandra write without ``sent`` bounds
        # nothing as the earlier side, but still counts as a candidate (one-candidate rule).
        "namespace", "name", "key", "life", (F.col("version") + 1).alias("version"), F.col("process").alias("a"),
        F.col("began").alias("ta"), F.floor(F.col("t") / KV_PAIRING_SECONDS).alias("bucket"),
    )
    here = F.floor(F.col("t") / KV_PAIRING_SECONDS)
    after = writes.select("namespace", "name", "key", "life", "version", F.col("process").alias("b"),
                          F.col("t").alias("tb"),
                          "rid", F.explode(F.array(here, here - 1)).alias("bucket"))
    # A key deleted and re-created writes each version once per incarnation of the key:
    # with two candidates for version v, the nearest may be another incarnation's (which
    # can even come after this write), so only a write with one candidate is paired.
    nearest = (
        after.join(before, ["namespace", "name", "key", "life", "version", "bucket"])
        .groupBy("rid", "b", "tb")  # per later write (its row id)
        .agg(F.min_by(F.struct("a", "ta"), F.abs(F.col("tb") - F.col("ta"))).alias("p"),
             F.count("*").alias("candidates"))
        .filter(F.col("candidates") == 1)
        .select(F.col("p.a").alias("a"), F.col("p.ta").alias("ta"), "b", "tb")
    )
    pairs = seen.select("a", "ta", "b", "tb").unionByName(following).unionByName(nearest)
    return (
        pairs.filter((F.col("a") != F.col("b")) & F.col("ta").isNotNull())
        .groupBy("a", "b")
        .agg(F.min(F.col("tb") - F.col("ta")).alias("hi"), F.count("*").alias("pairs"))
    )


def estimate(events: DataFrame, tolerance: float) -> Clocks:
    """Bounds from the log, closed transitively, and the per-process estimates."""
    # The pairs' five branches (acquisitions twice, observations, the KV writes on both
    # sides of a pair) each scanned every event, reading a dozen columns of each: they
    # read the few percent that can make a pair instead, taken from the events by one
    # scan and kept until the bounds are collected.
    found = cut(candidates(events))
    try:
        rows = evidence_pairs(found).collect()
    finally:
        release(found)
    clocks = Clocks(tolerance=tolerance)
    if not rows:
        return clocks
    names = sorted({r["a"] for r in rows} | {r["b"] for r in rows})
    index = {p: i for i, p in enumerate(names)}
    n = len(names)
    inf = math.inf
    hi = [[0.0 if i == j else inf for j in range(n)] for i in range(n)]
    count = [[0] * n for _ in range(n)]
    for r in rows:
        i, j = index[r["a"]], index[r["b"]]
        hi[i][j] = min(hi[i][j], float(r["hi"]))
        count[i][j] += int(r["pairs"])
    # A pair whose two directions contradict a constant offset (a clock stepped or
    # jumping during the log, as soak tests make them) gives no bound at all; the other
    # pairs keep theirs.
    for i in range(n):
        for j in range(i + 1, n):
            if hi[i][j] + hi[j][i] < 0:
                hi[i][j] = hi[j][i] = inf
                clocks.contradicted.append((names[i], names[j]))
    if n <= MAX_PROCESSES:
        for k in range(n):
            row_k = hi[k]
            for i in range(n):
                through = hi[i][k]
                if through == inf:
                    continue
                row_i = hi[i]
                for j in range(n):
                    candidate = through + row_k[j]
                    if candidate < row_i[j]:
                        row_i[j] = candidate
        if any(hi[i][i] < 0 for i in range(n)):
            clocks.inconsistent = True
            return clocks
    # Per connected group: a reference process, and each member's allowed offset range.
    reference: dict[int, int] = {}
    for i in range(n):
        if i in reference:
            continue
        for j in range(n):
            if j not in reference and (i == j or hi[i][j] < inf or hi[j][i] < inf):
                reference[j] = i
    for i, name in enumerate(names):
        ref = reference[i]
        clocks.offsets[name] = _pick(-hi[i][ref], hi[ref][i], tolerance)
    for i in range(n):
        for j in range(n):
            if i == j or (hi[i][j] == inf and hi[j][i] == inf):
                continue
            low, high = -hi[j][i], hi[i][j]  # offset(j) - offset(i) in [low, high]
            a, b = names[i], names[j]
            estimated = clocks.offsets[b] - clocks.offsets[a]
            clocks.slacks[(a, b)] = max(0.0, estimated - _lower(low, high, tolerance))
            if i < j:
                clocks.bounds.append({
                    "a": a, "b": b, "low": None if low == -inf else round(low, 6),
                    "high": None if high == inf else round(high, 6), "pairs": count[i][j] + count[j][i],
                })
    return clocks


def _lower(low: float, high: float, tolerance: float) -> float:
    """The lowest offset difference to allow: the evidence within the tolerance, the
    evidence alone where it proves more skew than the tolerance."""
    if high < -tolerance:
        return low
    return max(low, -tolerance)


def _pick(low: float, high: float, tolerance: float) -> float:
    if low <= 0 <= high and (high - low > 2 * tolerance or math.isinf(low) or math.isinf(high)):
        return 0.0
    if not (math.isinf(low) or math.isinf(high)) and high - low <= 2 * tolerance:
        return (low + high) / 2
    return low if low > 0 else high
