"""Reading event logs into a typed DataFrame, with malformed-line and unreadable-file accounting.

Input: local paths, globs, directories (read recursively; names starting with '_' or
'.' are skipped, as Hadoop does) and any URI Spark reads (s3a://, hdfs://), JSON Lines,
optionally gzip-compressed (by the .gz extension). Every pattern must match at least
one file (UnmatchedInputError names those that match nothing).

Guarantees:
- a line that is not a valid schema-1 event never fails the job: it lands in the
  malformed table with its file, 1-based line number and the reason. Blank lines are
  ignored. A line without ``v`` is version 1 (the first emitters wrote none);
- a line longer than ``max_line_bytes`` (default 1 MiB; events are a few hundred bytes)
  is malformed, with its file, line and first 300 characters: the scan keeps its length
  and those characters only, so it is never parsed, cached or shuffled. Not bounded: the
  line reader itself holds the whole line while it reads it (Hadoop's own bound,
  ``mapreduce.input.linerecordreader.line.maxlength``, skips such lines and cuts them
  into pieces at split boundaries, which would lose their line numbers and those of the
  lines after them), so one line needs about four times its size of executor memory
  while it is read: a 64 MiB line is read with the default 1 GiB;
- a file that cannot be read (a truncated or corrupt .gz, an I/O error) never fails the
  job: it is reported in the unreadable table (file, reason) and the other files are
  analysed. Its lines are not analysed at all (a prefix of a torn file is not trusted);
- large files are split across tasks as Spark splits them (maxPartitionBytes), and line
  numbers stay exact: each row carries its split's byte offset (``_metadata``) and its
  index within the split; one small aggregate per split gives each split's first line.
Not guaranteed: ordering — the metrics sort by time themselves.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from kubecoord.analytics.frames import cached_leaf, cut, local_rows
from kubecoord.analytics.progress import Progress
from kubecoord.analytics.session import default_setting
from kubecoord.errors import InvalidArgumentError
from kubecoord.wire.events import EVENTS, FIELDS, HOLDER_EVENTS, KV_WRITES, REQUIRED, SCHEMA_VERSION, Primitive

_CORRUPT = "_corrupt"
_BLANK = "blank"
_FAILED_FILE = re.compile(r"Encountered error while reading file (\S+?)\.?\s+SQLSTATE")
MAX_UNREADABLE = 1000
BYTES_PER_SHUFFLE_PARTITION = 128 * 2**20
SPLIT_BYTES = 32 * 2**20
SPARK_DEFAULT_SPLIT = ("134217728b", "134217728", "128m", "128MB")
COMPRESSION = 8
MAX_LINE_BYTES = 1 << 20
"""Longer lines are malformed (``kubecoord analyze --max-line-bytes``)."""
MIN_LINE_BYTES = 1024
"""How much larger than its .gz a JSON Lines log is, roughly (for sizing shuffles)."""
ORDER = ("tu", "seq", "file", "block", "rid")
LINE_ORDER = ("file", "block", "rid")
"""An event's place in the file-and-line order, and its identity (see ORDER): after the
compared fields of a struct that a check takes the max or min of, it breaks ties as the
event's evidence row (file, line, ...) did, and gives the row id its evidence is fetched by
(evidence_arrays)."""
"""A total order of the events read: time (microseconds), the emitter's seq, then file and
line (unique), so a window ordered by it is deterministic and its reversal exact. The file
and line order is (file, block, rid): a split's row ids follow its lines and a file's
splits follow each other by their byte offset (``block``), so windows sort by numbers
without computing line numbers."""
"""Give up after this many unreadable files (each costs one retry of the scan)."""


PARTITIONING = ("namespace", "name")
"""What the cached lines are hash-partitioned by (Inputs.lines)."""
_COLUMNS = ("file", "block", "rid", "reason", "text", "tu", "seq", "source", "process", "backend", "namespace",
            "primitive", "name", "event", "member", "epoch", "vu", "key", "version", "generation", "units",
            "store_incarnation", "mono", "sent")
"""A parsed line's columns (_parse), in order."""
PACKED = {"bad": ("reason", "text"), "sparse": ("key", "version", "store_incarnation", "generation", "units", "sent")}
"""Fields cached as one struct column each, null where all of its fields are (the cached
lines' form: see Inputs.lines)."""


def _partitions(spark: SparkSession) -> int:
    """The shuffle partitions sized to the input (_size_shuffles), given explicitly:
    adaptive execution keeps an explicit count, so the partitioning holds."""
    return int(spark.conf.get("spark.sql.shuffle.partitions") or spark.sparkContext.defaultParallelism)


class EmptyInputError(InvalidArgumentError):
    """The inputs named no file, or the files held no event."""


class UnmatchedInputError(InvalidArgumentError):
    """A pattern matched no file (a typo must not silently shrink what is analysed)."""


@dataclass(frozen=True)
class Inputs:
    files: list[str]
    events: DataFrame
    """One row per valid event (see EVENT_COLUMNS)."""
    malformed: DataFrame
    """file, line, reason, text (first 300 characters)."""
    lines: DataFrame
    """Every line of the readable files, with ``bad`` (reason, text) null for valid events;
    persisted, hash-partitioned by PARTITIONING and ordered by primitive, event and row id
    within partitions. The columnar cache spends 4 bytes on every null value of a column, so
    the fields most lines lack are packed (PACKED: a valid line's reason and text; the KV
    and group coordinator fields and ``sent``) into one struct column each, null on the lines
    without them; ``events`` and ``malformed`` unpack them. The order by row id keeps a split's lines
    together in line order, so the cache's run-length and delta encodings hold their file,
    split offset, row id and seq in a byte or two."""
    unreadable: DataFrame
    """file, reason: the files that could not be read."""
    counts: dict[str, Any]
    """events, malformed, processes, first, last (UNIX seconds)."""
    ranges: list[dict[str, Any]]
    """Per split and process with events: process, file, events, with_seq, seq_min, seq_max,
    consecutive (the seqs are consecutive lines), first_tu/last_tu (of seq_min/seq_max)."""


def expand_inputs(spark: SparkSession, patterns: Sequence[str]) -> dict[str, int]:
    """Globs and directories -> files and their sizes in bytes, through Hadoop's FileSystem
    (so any URI works), sorted by name."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    files: dict[str, int] = {}
    unmatched: list[str] = []
    for pattern in patterns:
        path = jvm.org.apache.hadoop.fs.Path(pattern)
        fs = path.getFileSystem(hadoop_conf)
        found: dict[str, int] = {}
        for status in fs.globStatus(path) or []:
            if status.isDirectory():
                listing = fs.listFiles(status.getPath(), True)
                while listing.hasNext():
                    entry = listing.next()
                    if not _hidden(entry.getPath(), status.getPath()):
                        found[entry.getPath().toString()] = int(entry.getLen())
            else:
                found[status.getPath().toString()] = int(status.getLen())
        if not found:
            unmatched.append(pattern)
        files.update(found)
    if unmatched and len(unmatched) == len(patterns):
        raise EmptyInputError(f"no input files match {', '.join(patterns)}")
    if unmatched:
        raise UnmatchedInputError(f"no input files match {', '.join(unmatched)} (the other patterns do)")
    return dict(sorted(files.items()))


def text_bytes(sizes: dict[str, int]) -> int:
    """The input's size as text: compressed files count COMPRESSION times their size."""
    return sum(size * (COMPRESSION if file.endswith((".gz", ".bz2", ".zst", ".lz4", ".snappy")) else 1)
               for file, size in sizes.items())


def _hidden(path: object, root: object) -> bool:
    """A name starting with '_' or '.' anywhere below the listed directory."""
    relative = str(path)[len(str(root)) :]
    return any(part.startswith(("_", ".")) for part in relative.split("/") if part)


def read_inputs(
    spark: SparkSession, patterns: Sequence[str], *, progress: Progress, max_line_bytes: int = MAX_LINE_BYTES,
) -> Inputs:
    """Expand, read, validate and count: one scan (plus one per unreadable file found)."""
    if max_line_bytes < MIN_LINE_BYTES:
        raise InvalidArgumentError(f"the line bound must be at least {MIN_LINE_BYTES} bytes, got {max_line_bytes}")
    sizes = expand_inputs(spark, patterns)
    files = list(sizes)
    _size_shuffles(spark, text_bytes(sizes))
    progress.step(f"reading {len(files)} file(s), {sum(sizes.values()) / 2**20:,.0f} MiB")
    # Otherwise the optimizer splits the one from_json below into one per field read,
    # parsing every line a dozen times (measured: 3.5x slower reading).
    spark.conf.set("spark.sql.optimizer.enableJsonExpressionOptimization", "false")
    unreadable: list[tuple[str, str]] = []
    readable = list(files)
    while True:
        # The one shuffle of the analysis, here: every line hash-partitioned by (namespace,
        # name), the prefix of every later key (a holder's term, each check's grouping,
        # window and join), so no later step shuffles the events again; ordered by
        # primitive and event within the partitions, so the cache's per-batch statistics
        # let a scan for one primitive or event skip the others' batches unread.
        # Then by row id, for the cache's encodings (Inputs.lines).
        lines = _parse(spark, readable, max_line_bytes).repartition(
            _partitions(spark), *PARTITIONING).sortWithinPartitions("primitive", "event", "rid").persist(
            StorageLevel.MEMORY_AND_DISK_DESER)
        try:
            splits = _per_split(lines)
            break
        except Exception as exc:  # py4j's error: the failed file is named in its message
            lines.unpersist()
            failed = _failed_file(exc, readable)
            if failed is None or len(unreadable) >= MAX_UNREADABLE:
                raise
            unreadable.append((failed, _root_cause(exc)))
            readable.remove(failed)
            progress.step(f"unreadable file skipped: {failed} ({unreadable[-1][1]})")
            if not readable:
                raise EmptyInputError(f"no readable file among {len(files)} (unreadable: {unreadable})") from None
    persisted, lines = lines, cached_leaf(lines)
    offsets: dict[str, int] = {}
    next_line: dict[str, int] = {}
    for (file, block), (first_rid, count) in sorted(splits["splits"].items()):
        first_line = next_line.get(file, 1)
        offsets[f"{file}\n{block}"] = first_line - first_rid
        next_line[file] = first_line + count
    mapping = F.create_map(*[x for key, value in offsets.items() for x in (F.lit(key), F.lit(value))])
    line = F.col("rid") + mapping[F.concat_ws("\n", F.col("file"), F.col("block").cast("string"))]
    # Times are cached as microseconds only; the other forms are derived when read.
    tu, vu = F.col("tu"), F.col("vu")
    unpacked = {name: F.col(f"{group}.{name}").alias(name) for group, names in PACKED.items() for name in names}
    numbered = lines.select(
        "file", unpacked["reason"], unpacked["text"], F.timestamp_micros(tu).alias("ts"), "tu", (tu / 1e6).alias("t"),
        *(unpacked.get(c, F.col(c)) for c in _COLUMNS if c not in ("file", "block", "rid", *PACKED["bad"], "tu", "vu")),
        F.timestamp_micros(vu).alias("valid_until_ts"), (vu / 1e6).alias("valid_until"), line.alias("line"), "block",
        "rid",
    )
    numbered = numbered.filter(F.col("reason").isNull() | (F.col("reason") != _BLANK))
    events = numbered.filter(F.col("reason").isNull()).drop("reason", "text")
    malformed = numbered.filter(F.col("reason").isNotNull()).select("file", "line", "reason", "text")
    unreadable_schema = T.StructType([T.StructField("file", T.StringType()), T.StructField("reason", T.StringType())])
    unreadable_frame = local_rows(spark, unreadable, unreadable_schema)
    return Inputs(files=files, events=events, malformed=malformed, lines=persisted, unreadable=unreadable_frame,
                  counts=splits["counts"], ranges=splits["ranges"])


def _size_shuffles(spark: SparkSession, input_bytes: int) -> None:
    """Shuffle partitions sized to the data (unless the caller set them): one per
    BYTES_PER_SHUFFLE_PARTITION of text, at least one per core. Spark's 200 gave 7,026
    tasks for 197k events; every check shuffles a fraction of the events by its key."""
    if spark.conf.get("spark.sql.files.maxPartitionBytes") in SPARK_DEFAULT_SPLIT:
        # Every split's parsed lines are cached as one block, built in memory before it can
        # spill: Spark's 128 MiB splits ran a 1 GiB driver out of heap at 10M events.
        spark.conf.set("spark.sql.files.maxPartitionBytes", str(SPLIT_BYTES))
    cores = spark.sparkContext.defaultParallelism
    wanted = max(cores, -(-input_bytes // BYTES_PER_SHUFFLE_PARTITION))
    default_setting(spark, "spark.sql.shuffle.partitions", str(wanted))


def _parse(spark: SparkSession, files: Sequence[str], max_line_bytes: int) -> DataFrame:
    size = F.octet_length("value")
    oversized = size > max_line_bytes
    raw = spark.read.text(list(files)).select(
        F.col("_metadata.file_path").alias("file"),
        F.col("_metadata.file_block_start").alias("block"),
        F.monotonically_increasing_id().alias("rid"),
        # An oversized line goes no further than this projection: its length and head only.
        F.when(oversized, F.format_string(f"line of %d bytes, longer than the bound ({max_line_bytes})", size)
               ).alias("too_long"),
        F.when(oversized, F.substring("value", 1, 300)).alias("head"),
        F.when(~oversized, F.col("value")).alias("value"),
    )
    json_schema = T.StructType([T.StructField(name, T.StringType()) for name in (*FIELDS, _CORRUPT)])
    j = F.from_json("value", json_schema, {"columnNameOfCorruptRecord": _CORRUPT, "mode": "PERMISSIVE"})
    blank = F.trim("value") == ""
    parsed = raw.select("file", "block", "rid", "too_long", "head", "value", blank.alias("blank"),
                        F.when(~blank, j).alias("j")).select(
        "file", "block", "rid", "too_long", "head", "value", "blank",
        *(F.col(f"j.{name}").alias(f"raw_{name}") for name in (*FIELDS, _CORRUPT)),
    )
    typed = parsed.select(
        "file", "block", "rid", "too_long", "head", "value", "blank",
        *(F.col(f"raw_{name}") for name in (*FIELDS, _CORRUPT)),
        _try_cast("raw_ts", "timestamp").alias("ts"),
        _try_cast("raw_valid_until", "timestamp").alias("valid_until_ts"),
        _try_cast("raw_sent", "timestamp").alias("sent_ts"),
        *(_try_cast(f"raw_{name}", "bigint").alias(name) for name in ("v", "seq", "epoch", "version", "generation")),
    )
    with_reason = typed.withColumn("reason", F.when(F.col("too_long").isNotNull(), F.col("too_long")).when(
        F.col("blank"), F.lit(_BLANK)).otherwise(_reason()))
    columns = with_reason.select(
        "file",
        "block",
        "rid",
        "reason",
        F.when(F.col("too_long").isNotNull(), F.col("head")).when(
            F.col("reason").isNotNull() & ~F.col("blank"), F.substring("value", 1, 300)).alias("text"),
        F.unix_micros("ts").alias("tu"),
        "seq",
        *(F.col(f"raw_{name}").alias(name) for name in ("source", "process", "backend", "namespace", "primitive")),
        F.col("raw_name").alias("name"),
        F.col("raw_event").alias("event"),
        F.col("raw_member").alias("member"),
        "epoch",
        F.unix_micros("valid_until_ts").alias("vu"),
        F.col("raw_key").alias("key"),
        "version",
        "generation",
        F.col("raw_units").alias("units"),  # JSON text of a list; analytics.rebalance parses it
        F.col("raw_store_incarnation").alias("store_incarnation"),
        _try_cast("raw_mono", "double").alias("mono"),  # the emitter's monotonic clock (analytics.clocks)
        (F.unix_micros("sent_ts") / 1e6).alias("sent"),  # a KV write's start (analytics.kv)
    )
    packed = {name for names in PACKED.values() for name in names}
    return columns.select(
        *(c for c in columns.columns if c not in packed),
        *(_packed(group, names) for group, names in PACKED.items()),
    )


def _packed(group: str, names: Sequence[str]) -> Column:
    """``names`` as one struct column ``group``, null where all of them are (PACKED)."""
    present = F.lit(False)
    for name in names:
        present = present | F.col(name).isNotNull()
    return F.when(present, F.struct(*names)).alias(group)


def _per_split(lines: DataFrame) -> dict[str, Any]:
    """One job over the persisted lines: per split its first row id and row count (for line
    numbers), the input counts, and per split and process the seq range its events cover
    (coverage.from_ranges decides from those alone when no copy can be present)."""
    valid = F.col("bad").isNull()
    numbered = valid & F.col("seq").isNotNull()
    seq = F.when(numbered, F.col("seq"))
    rows = lines.groupBy("file", "block", "process").agg(
        F.min("rid").alias("first_rid"),
        F.count("*").alias("rows"),
        F.count(F.when(valid, 1)).alias("events"),
        F.count(F.when(~valid & (F.col("bad.reason") != _BLANK), 1)).alias("malformed"),
        F.min(F.when(valid, F.col("tu"))).alias("first"),
        F.max(F.when(valid, F.col("tu"))).alias("last"),
        F.count(seq).alias("with_seq"),
        F.min(seq).alias("seq_min"),
        F.max(seq).alias("seq_max"),
        # seq - row id is one constant exactly when the split's events of this process are
        # consecutive lines with consecutive seqs (no copy, no gap, nothing between them).
        F.min(seq - F.col("rid")).alias("step_min"),
        F.max(seq - F.col("rid")).alias("step_max"),
        F.min_by(F.when(numbered, F.col("tu")), seq).alias("seq_min_tu"),
        F.max_by(F.when(numbered, F.col("tu")), seq).alias("seq_max_tu"),
    ).collect()
    splits: dict[tuple[str, int], tuple[int, int]] = {}
    for row in rows:
        key = (row["file"], row["block"])
        first_rid, count = splits.get(key, (row["first_rid"], 0))
        splits[key] = (min(first_rid, row["first_rid"]), count + row["rows"])
    with_events = [r for r in rows if r["events"]]
    firsts = [r["first"] / 1e6 for r in with_events]
    lasts = [r["last"] / 1e6 for r in with_events]
    return {
        "splits": splits,
        "ranges": [{
            "process": r["process"], "file": r["file"], "events": r["events"], "with_seq": r["with_seq"],
            "seq_min": r["seq_min"], "seq_max": r["seq_max"], "consecutive": r["with_seq"] > 0
            and r["step_min"] == r["step_max"], "first_tu": r["seq_min_tu"], "last_tu": r["seq_max_tu"],
        } for r in with_events],
        "counts": {
            "events": sum(r["events"] for r in rows),
            "malformed": sum(r["malformed"] for r in rows),
            "processes": len({r["process"] for r in with_events}),
            "first": min(firsts, default=None),
            "last": max(lasts, default=None),
        },
    }


def _failed_file(exc: BaseException, files: Sequence[str]) -> str | None:
    match = _FAILED_FILE.search(str(exc))
    if match is None:
        return None
    named = _normal(match.group(1))
    return next((f for f in files if _normal(f) == named), None)


def _normal(uri: str) -> str:
    return re.sub(r"^file:/+", "file:/", uri)


def _root_cause(exc: BaseException) -> str:
    """The innermost Java exception's text, e.g. 'java.io.EOFException: Unexpected end of input stream'."""
    java = getattr(exc, "java_exception", None)
    cause = None
    while java is not None:
        cause = java
        java = java.getCause()
    return str(cause.toString()) if cause is not None else str(exc).splitlines()[0][:300]


def evidence(prefix: str = "") -> Column:
    """The evidence row of an event (columns optionally prefixed): where it is and what it says."""
    names = ("file", "line", "ts", "process", "event", "member", "epoch", "valid_until_ts", "key", "version")
    return F.struct(*(F.col(f"{prefix}{name}").alias(name) for name in names))


def evidence_of(rows: DataFrame, events: DataFrame, ids: dict[str, str], *, persisted: list[DataFrame]) -> DataFrame:
    """``rows`` with each row-id column of ``ids`` (its ``rid``: an event's identity) replaced
    by that event's evidence (column ``ids[name]``; null for a null id). The events are
    scanned once for the few ids ``rows`` holds (a broadcast semi-join), so a check keeps
    only numbers in its buffers and sorts until its findings are known. The evidence found
    is persisted (appended to ``persisted``)."""
    wanted = rows.select(F.explode(F.array(*ids)).alias("rid")).filter(F.col("rid").isNotNull()).distinct()
    found = cut(events.join(F.broadcast(wanted), "rid", "left_semi").select("rid", evidence().alias("ev")))
    persisted.append(found)
    out = rows
    for column, name in ids.items():
        out = out.join(F.broadcast(found.select(F.col("rid").alias(column), F.col("ev").alias(name))), column,
                       "left").drop(column)
    return out


def evidence_arrays(rows: DataFrame, events: DataFrame, column: str = "evidence", *,
                    persisted: list[DataFrame]) -> DataFrame:
    """``rows`` with ``column``, an array of row ids (events' ``rid``), replaced by the array
    of those events' evidence rows (``evidence``), in the same order (null for a null id).
    The checks carry row ids only, so their windows, sorts and aggregates hold numbers and
    the evidence columns are pruned from them; the events are scanned once, for the ids the
    rows hold (a broadcast semi-join). The frames it keeps are appended to ``persisted``."""
    numbered = cut(rows.withColumn("_row", F.monotonically_increasing_id()))
    ids = numbered.select("_row", F.posexplode(column).alias("_pos", "rid"))
    wanted = ids.select("rid").filter(F.col("rid").isNotNull()).distinct()
    found = cut(events.join(F.broadcast(wanted), "rid", "left_semi").select("rid", evidence().alias("_ev")))
    persisted += [numbered, found]
    arrays = ids.join(F.broadcast(found), "rid", "left").groupBy("_row").agg(
        F.sort_array(F.collect_list(F.struct("_pos", "_ev"))).alias("_evs"))
    return numbered.join(arrays, "_row", "left").select(*(
        F.transform("_evs", lambda e: e["_ev"]).alias(name) if name == column else F.col(name)
        for name in rows.columns))


def _try_cast(column: str, type_name: str) -> Column:
    return F.expr(f"try_cast({column} AS {type_name})")


def _reason() -> Column:
    """Why a line is not a valid event, or null. The first failing check wins."""
    raw = F.col
    event_known = F.lit(False)
    primitive, event = raw("raw_primitive"), raw("raw_event")
    for kind, names in EVENTS.items():
        event_known = event_known | ((primitive == kind) & event.isin(*sorted(names)))
    leader_holder = (primitive == Primitive.LEADER_ELECTION) & event.isin(*HOLDER_EVENTS)
    lock_hold = primitive.isin(Primitive.LOCK, Primitive.SEMAPHORE)
    needs_member = leader_holder | lock_hold | primitive.isin(Primitive.GROUP, Primitive.GROUP_COORDINATOR)
    checks: list[tuple[Column, str]] = [(raw(f"raw_{_CORRUPT}").isNotNull(), "invalid JSON")]
    # No v at all is version 1: the first emitters wrote none.
    checks.append((raw("raw_v").isNotNull() & (raw("v").isNull() | (raw("v") != SCHEMA_VERSION)),
                   "unsupported schema version"))
    checks += [(raw(f"raw_{name}").isNull(), f"missing field {name}") for name in REQUIRED]
    checks += [
        (raw("ts").isNull(), "unparseable ts"),
        (~event_known, "unknown primitive or event"),
        (raw("raw_valid_until").isNotNull() & raw("valid_until_ts").isNull(), "unparseable valid_until"),
        (leader_holder & raw("epoch").isNull(), "leader event without an integer epoch"),
        (lock_hold & raw("epoch").isNull(), "lock event without an integer token (epoch)"),
        (needs_member & raw("raw_member").isNull(), "missing field member"),
        ((primitive == Primitive.KV) & raw("raw_key").isNull(), "missing field key"),
        (event.isin(*KV_WRITES) & raw("version").isNull(), "kv write without an integer version"),
    ]
    reason: Column = F.when(checks[0][0], checks[0][1])
    for condition, text in checks[1:]:
        reason = reason.when(condition, text)
    return reason
