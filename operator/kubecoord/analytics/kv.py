"""KV stores: operations and conflicts per store and key, and the two version checks.

Per key and store incarnation (``store_incarnation``: the uid of the ConfigMap a
kubernetes store's key lives in, the czxid of a zookeeper store's root znode; a store
deleted and re-created behind its clients' backs is a new incarnation whose keys start
again at version 1), writes are split into the key's incarnations by
``kv_incarnations.assign``: each ``put`` (which creates the key at version 1) begins one
and each ``deleted`` ends one, and an update lies in an incarnation its call and answer,
its version and the closing delete's version allow. The checks below compare the writes
of one incarnation. Writes acknowledged in a store incarnation that was later
replaced were lost with the deletion: counted per key (``writes_lost_to_store_deletion``)
and in the summary, not a kubecoord safety violation (someone deleted the store). Events
without the field (memory://, older logs) form one store incarnation.
- lost_update: two ``updated`` events acknowledging the same version of one
  incarnation (two writers both believed they wrote it: one write was lost);
- version_backwards: an ``updated``/``deleted`` whose version is below a version put or
  updated (its ts) more than ``skew`` seconds before this write began (its ``sent``: the
  writer logs when the write's request went out, so a writer paused before stamping ts is
  no false alarm; else its ts) in the same incarnation;
- create_race: a ``put`` (which creates version 1) while the key exists: an earlier
  ``put`` of the key with no ``deleted`` logged between them (give or take ``skew``; a
  delete counts from when it began, its ``sent``, to its answer, and each put likewise, so
  a delete whose call overlaps either put may lie between them);
- stale_epoch_write: a write carrying a leader's fencing epoch (``epoch``) after a write
  with a newer epoch — in the key's version order (exact, no clocks), or to any key of
  the store more than ``skew`` seconds after the newer epoch's first write.
Conflict rate = conflicts / (puts + updates + deletes + conflicts).
Guaranteed with one clock (or corrected clocks): an update answered before a re-creating
put could have taken effect is judged in the old incarnation, one called after the closing
delete could have ended the old incarnation in the new one, and of an update that either
could hold, the one its version and the other writes allow (``kv_incarnations``).
Not guaranteed: an update that three or more incarnations could hold, or whose key had two
deletes (or two puts) with overlapping calls, can be judged in the wrong incarnation, and
a put and an update of one key within the skew tolerance of each other can be misjudged.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from kubecoord.analytics import kv_incarnations, violations
from kubecoord.analytics.frames import cut
from kubecoord.analytics.reading import LINE_ORDER, ORDER
from kubecoord.wire.events import KV_WRITES, Event, Primitive

KEY = ("namespace", "name", "key")
KEY_LIFE = (*KEY, "store_incarnation")
"""A key within one incarnation of its store."""


def _key_violation(rows: DataFrame, kind: str, *, detail: Column, evidence: Column) -> DataFrame:
    """A KV check's violations (violations.shape): each about a key (the subject), at the
    ts of the write found."""
    return violations.shape(rows, kind=kind, primitive=Primitive.KV, subject=F.col("key"), ts=F.col("ts"),
                            detail=detail, evidence=evidence)


@dataclass(frozen=True)
class KvStores:
    """What the KV checks found, per key and per store (not a kubecoord.api.Storage client)."""

    per_key: DataFrame
    per_store: DataFrame
    lost_updates: DataFrame
    backwards: DataFrame
    create_races: DataFrame
    stale_epochs: DataFrame
    lost_to_deletion: DataFrame
    """Per key: store incarnations seen and acknowledged writes lost with a deleted store."""
    persisted: DataFrame
    """The writes with their incarnations, which every check reads (a local checkpoint:
    release it when done)."""


def _counts() -> list[Column]:
    event = F.col("event")
    return [
        F.count(F.when(event == Event.PUT, 1)).alias("puts"),
        F.count(F.when(event == Event.UPDATED, 1)).alias("updates"),
        F.count(F.when(event == Event.DELETED, 1)).alias("deletes"),
        F.count(F.when(event == Event.CONFLICT, 1)).alias("conflicts"),
    ]


def _rate(frame: DataFrame) -> DataFrame:
    total = F.col("puts") + F.col("updates") + F.col("deletes") + F.col("conflicts")
    return frame.withColumn("operations", total).withColumn("conflict_rate", F.col("conflicts") / total)


def analyze(events: DataFrame, skew: float) -> KvStores:
    ops = events.filter(F.col("primitive") == Primitive.KV)
    per_key = _rate(ops.groupBy(*KEY).agg(*_counts()))
    per_store = _rate(
        per_key.groupBy("namespace", "name").agg(
            F.count("*").alias("keys"),
            *(F.sum(c).alias(c) for c in ("puts", "updates", "deletes", "conflicts")),
        )
    )

    # The incarnations' window passes once, kept (the writes are a few percent of a log):
    # each check below reads them, and would otherwise repeat every pass.
    writes = cut(kv_incarnations.assign(ops.filter(F.col("event").isin(*KV_WRITES)), KEY_LIFE))

    acked = writes.filter(F.col("event") == Event.UPDATED).groupBy(*KEY_LIFE, "incarnation", "version").agg(
        F.count("*").alias("acks"),
        F.min("ts").alias("ts"),
        F.sort_array(F.collect_list(F.struct("tu", *LINE_ORDER))).alias("rows"),
    )
    lost = acked.filter(F.col("acks") > 1)
    lost_updates = _key_violation(
        lost,
        "lost_update",
        detail=F.format_string("version %d of %s acknowledged %d times", F.col("version"), F.col("key"), F.col("acks")),
        evidence=F.transform("rows", lambda r: r["rid"]),
    )

    # Each update/delete is judged from when it began (``sent``, logged by the writer; else
    # its ts) against the writes acknowledged (ts) more than ``skew`` before: a writer
    # paused between its write and the event's timestamp stamps a late ts, but not a late
    # sent. Only puts and updates set the bar: a delete logged (through clock skew) just
    # after the put that followed it must not make the new incarnation's versions look low.
    began = F.least(F.coalesce(F.round(F.col("sent") * 1e6).cast("long"), F.col("tu")), F.col("tu"))
    checked = writes.filter(F.col("event").isin(Event.UPDATED, Event.DELETED)).withColumns(
        {"_at": began, "_bar": F.lit(False)}
    )
    bars = writes.filter(F.col("event") != Event.DELETED).withColumns({"_at": F.col("tu"), "_bar": F.lit(True)})
    earlier = (
        Window.partitionBy(*KEY_LIFE, "incarnation").orderBy("_at")
        .rangeBetween(Window.unboundedPreceding, -(round(skew * 1e6) + 1))
    )
    written = F.when(F.col("_bar"), F.struct("version", "tu", *LINE_ORDER))
    back = (
        checked.unionByName(bars).withColumn("prev", F.max(written).over(earlier))
        .filter(~F.col("_bar") & (F.col("version") < F.col("prev.version")))
    )
    backwards = _key_violation(
        back,
        "version_backwards",
        detail=F.format_string(
            "%s %s at version %d after version %d", F.col("key"), F.col("event"), F.col("version"),
            F.col("prev.version"),
        ),
        evidence=F.array("prev.rid", "rid"),
    )
    return KvStores(per_key=per_key, per_store=per_store, lost_updates=lost_updates, backwards=backwards,
                   create_races=_create_races(writes, skew), stale_epochs=_stale_epochs(writes, skew),
                   lost_to_deletion=_lost_to_deletion(writes), persisted=writes)


def _lost_to_deletion(writes: DataFrame) -> DataFrame:
    """Per key with a known store incarnation: how many incarnations its writes saw, and
    the acknowledged writes (puts and updates) of every incarnation but the latest."""
    known = writes.filter(F.col("store_incarnation").isNotNull() & F.col("event").isin(Event.PUT, Event.UPDATED))
    lives = known.groupBy(*KEY_LIFE).agg(F.min("tu").alias("first_tu"), F.count("*").alias("writes"))
    latest = Window.partitionBy(*KEY).orderBy(F.col("first_tu").desc())
    ranked = lives.withColumn("rank", F.row_number().over(latest))
    return ranked.groupBy(*KEY).agg(
        F.count("*").alias("store_incarnations"),
        F.sum(F.when(F.col("rank") > 1, F.col("writes")).otherwise(0)).alias("writes_lost_to_store_deletion"),
    )


def _create_races(writes: DataFrame, skew: float) -> DataFrame:
    before = Window.partitionBy(*KEY_LIFE).orderBy(*ORDER).rowsBetween(Window.unboundedPreceding, -1)
    # The rows after, as the rows before in the reverse order: a frame reaching to the
    # partition's end is recomputed for every row (quadratic in a key's writes), a frame
    # from its start is running. ORDER is total (file, line), so the reversal is exact.
    after = Window.partitionBy(*KEY_LIFE).orderBy(*(F.col(c).desc() for c in ORDER)).rowsBetween(
        Window.unboundedPreceding, -1)
    event, t = F.col("event"), F.col("t")
    began = F.least(F.coalesce("sent", "t"), t)
    enriched = writes.select(
        "*",
        # The earlier creation from when it began: a delete answered after its call began
        # may have taken effect after it (the creation's answer came later).
        F.last(F.when(event == Event.PUT, F.struct("t", began.alias("began"), "ts", "rid")), True)
        .over(before).alias("prev_put"),
        F.last(F.when(event == Event.DELETED, t), True).over(before).alias("prev_delete_t"),
        # The next delete from when it began: one whose call began before this put
        # returned may have taken effect before it (its answer came later).
        F.last(F.when(event == Event.DELETED, began), True).over(after).alias("next_delete_began"),
    )
    no_delete_between = (
        (F.col("prev_delete_t").isNull() | (F.col("prev_delete_t") < F.col("prev_put.began") - skew))
        & (F.col("next_delete_began").isNull() | (F.col("next_delete_began") > t + skew))
    )
    found = enriched.filter((event == Event.PUT) & F.col("prev_put").isNotNull() & no_delete_between)
    return _key_violation(
        found,
        "create_race",
        detail=F.format_string("%s created again by %s while it existed (created at %s), no delete between",
                               F.col("key"), F.col("process"), F.col("prev_put.ts").cast("string")),
        evidence=F.array("prev_put.rid", "rid"),
    )


def _stale_epochs(writes: DataFrame, skew: float) -> DataFrame:
    fenced = writes.filter(F.col("epoch").isNotNull())
    by_version = (
        Window.partitionBy(*KEY_LIFE, "incarnation").orderBy("version", *ORDER)
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    newer = F.struct("epoch", *LINE_ORDER)
    found = fenced.select(
        "*",
        F.max(newer).over(by_version).alias("in_key"),
        F.max(newer).over(violations.earlier_than(skew, "namespace", "name")).alias("in_store"),
    )
    prev = F.when(F.col("in_key.epoch") > F.col("epoch"), F.col("in_key")).otherwise(F.col("in_store"))
    found = found.withColumn("prev", prev).filter(F.col("prev.epoch") > F.col("epoch"))
    return _key_violation(
        found,
        "stale_epoch_write",
        detail=F.format_string("%s %s with epoch %d after a write with epoch %d", F.col("key"), F.col("event"),
                               F.col("epoch"), F.col("prev.epoch")),
        evidence=F.array("prev.rid", "rid"),
    )
