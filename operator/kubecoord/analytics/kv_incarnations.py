"""Which incarnation of its key each KV write belongs to (column ``incarnation``).

A key lives as a sequence of incarnations, each begun by a ``put`` (version 1) and ended
by a ``deleted`` that names the version it removed; versions order the writes within one.
The log gives each write's call (``sent``) and answer (``tu``), not the instant it took
effect, so the incarnations are read from what the calls allow:

- the skeleton: a key's puts in log order begin incarnations 1, 2, ... and its deletes in
  log order end them, each delete the incarnation of the put before it (incarnation 0 is
  the key's life before the log's first put: a delete or update answered before the first
  put was sent makes the first delete end it);
- incarnation j took effect no earlier than its put's call and the call of the delete that
  ended j - 1 (the put follows that delete), and ended no later than its delete's answer
  and the answer of the put that began j + 1 — each bound carried over to the later
  incarnations, as they follow;
- an update lies in an incarnation that can hold it: begun before the update's answer,
  ended after its call. Of two or more, it lies in the latest, unless that one cannot
  hold it: its delete removed a version below the update's, or it holds another write of
  the update's version — one that can lie nowhere else, or a later one that can lie
  there too — then in the one before.

Guaranteed: with one clock (or corrected clocks) an update is placed by these bounds, so
an update answered before a re-creating put could have taken effect stays in the old
incarnation, and one called after the closing delete could have ended it is in the new
one. Not guaranteed: where three or more incarnations could each hold an update, or two
deletes' (or two puts') calls overlap so that the log's order is not the order they took
effect in, an update can be placed in the wrong one, and a put and an update within the
skew tolerance of each other can be misjudged.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from kubecoord.analytics.reading import ORDER
from kubecoord.wire.events import Event

_UNBOUNDED = Window.unboundedPreceding


def _began_us() -> Column:
    """When a write's call began, in microseconds: its ``sent``, else (or if later) its answer."""
    return F.least(F.coalesce(F.round(F.col("sent") * 1e6).cast("long"), F.col("tu")), F.col("tu"))


def assign(writes: DataFrame, key: tuple[str, ...]) -> DataFrame:
    """``writes`` (puts, updates and deletes of KV keys; ``key`` names a key's columns, starting
    with namespace and name) with the column ``incarnation``: 0 before the key's first put
    in the log, then the number of the put that began it."""
    event = F.col("event")
    is_put, is_delete, is_update = event == Event.PUT, event == Event.DELETED, event == Event.UPDATED
    whole = Window.partitionBy(*key)
    in_order = Window.partitionBy(*key).orderBy(*ORDER).rowsBetween(_UNBOUNDED, 0)

    # 1. The skeleton: puts begin incarnations in log order, deletes end them in log order.
    framed = writes.withColumn("_began", _began_us())
    first_put_began = F.min(F.when(is_put, F.col("_began"))).over(whole)
    first_other = F.min(F.when(~is_put, F.col("tu"))).over(whole)
    before_puts = (first_put_began.isNull() | (first_other < first_put_began)).cast("int")
    skeleton = F.when(is_put, F.sum(is_put.cast("int")).over(in_order)).when(
        is_delete, F.sum(is_delete.cast("int")).over(in_order) - before_puts)
    framed = framed.withColumn("_skel", skeleton)

    # 2. Per incarnation j: its earliest possible start (S, on its put's row) and latest
    # possible end (E, on the rows of its delete and of the next put), running over j.
    start_of = F.when(is_put, F.col("_skel")).when(is_delete, F.col("_skel") + 1)
    end_of = F.when(is_put, F.col("_skel") - 1).when(is_delete, F.col("_skel"))
    framed = framed.withColumns({"_s_of": start_of, "_e_of": end_of})
    by_start = Window.partitionBy(*key).orderBy("_s_of").rangeBetween(_UNBOUNDED, 0)
    # The later incarnations' ends as a running frame in reverse (a frame to the partition's
    # end would be recomputed for every row).
    by_end = Window.partitionBy(*key).orderBy(F.col("_e_of").desc()).rangeBetween(_UNBOUNDED, 0)
    framed = framed.withColumns({
        "_start": F.when(is_put, F.max(F.when(F.col("_s_of").isNotNull(), F.col("_began"))).over(by_start)),
        "_end": F.when(F.col("_e_of").isNotNull(), F.min(F.when(F.col("_e_of").isNotNull(), F.col("tu"))).over(by_end)),
    })

    # 3. Per update, the incarnations that can hold it: the latest begun before its answer
    # (hi), the first not ended before its call (lo).
    hi_at = F.when(is_put, F.col("_start")).otherwise(F.col("tu"))
    by_hi = Window.partitionBy(*key).orderBy(hi_at, is_put.cast("int").desc(), *ORDER).rowsBetween(_UNBOUNDED, 0)
    ends = F.col("_e_of").isNotNull()
    lo_at = F.when(ends, F.col("_end")).otherwise(F.col("_began"))
    by_lo = Window.partitionBy(*key).orderBy(lo_at, ends.cast("int"), *ORDER).rowsBetween(_UNBOUNDED, 0)
    framed = framed.withColumns({
        "_hi": F.coalesce(F.max(F.when(is_put, F.col("_skel"))).over(by_hi), F.lit(0)),
        "_lo": F.coalesce(F.max(F.when(ends, F.col("_e_of"))).over(by_lo) + 1, F.lit(0)),
    })

    # 4. The latest of them, or the one before when the latest cannot hold it.
    candidate = F.when(is_update, F.col("_hi")).otherwise(F.col("_skel"))
    framed = framed.withColumn("_cand", candidate)
    closing = F.max(F.when(is_delete, F.col("version"))).over(Window.partitionBy(*key, "_cand"))
    framed = framed.withColumn("_amb", is_update & (F.col("_lo") < F.col("_hi")))
    ambiguous = F.col("_amb")
    same_version = Window.partitionBy(*key, "_cand", "version")
    pinned = F.sum((is_update & ~ambiguous).cast("int")).over(same_version)
    later = Window.partitionBy(*key, "_cand", "version", "_amb").orderBy(*(F.col(c).desc() for c in ORDER))
    framed = framed.withColumns({"_closing": closing, "_pinned": pinned, "_later": F.row_number().over(later)})
    step_back = ambiguous & (
        (F.col("_closing") < F.col("version")) | (F.col("_pinned") > 0) | (F.col("_later") > 1))
    incarnation = F.when(is_update, F.when(step_back, F.col("_hi") - 1).otherwise(F.col("_hi"))).otherwise(
        F.col("_skel"))
    return framed.withColumn("incarnation", incarnation).drop(
        "_began", "_skel", "_s_of", "_e_of", "_start", "_end", "_hi", "_lo", "_cand", "_amb", "_closing",
        "_pinned", "_later")
