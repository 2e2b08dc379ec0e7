"""Reading metrics dumps (docs/metrics-dumps.md, version 1) into typed DataFrames.

Every `*.jsonl` file under the given directories is parsed in one pass against one explicit schema of the
fields the analyses read, over the four line kinds (no schema inference; other fields are skipped unread, so
a bad value in one of those does not reject its line). A line that does not parse (a process killed mid-write leaves a partial last line), has another
format version or an unknown kind, or lacks a field the analyses need is not used: it is counted per file
and reason instead.
"""

import functools
import operator
import os
from dataclasses import dataclass
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from . import AnalysisError

FORMAT_VERSION = 1
KINDS = ("start", "broker", "isr_change", "controller")
CORRUPT_COLUMN = "_corrupt_record"


def _struct(**fields: T.DataType) -> T.StructType:
    return T.StructType([T.StructField(name, data_type) for name, data_type in fields.items()])


_LONG, _INT, _STRING, _BOOL = T.LongType(), T.IntegerType(), T.StringType(), T.BooleanType()
_IDS = T.ArrayType(_INT)

# The schema holds only the fields the analyses read: Spark's JSON reader skips the others without building
# them, and a broker line is mostly fields no analysis reads (offsets, sizes, fetch times, the broker-wide
# counters). Building every field of every partition of every snapshot cost more than half of the parse.
FOLLOWER_SCHEMA = _struct(broker_id=_INT, lag_messages=_LONG, lag_bytes=_LONG, lag_ms=_LONG)
PARTITION_SCHEMA = _struct(
    topic=_STRING,
    partition=_INT,
    leader=_INT,
    leader_epoch=_INT,
    replicas=_IDS,
    isr=_IDS,
    min_isr=_INT,
    bytes_in_total=_LONG,
    messages_in_total=_LONG,
    replication_bytes_in_total=_LONG,
    followers=T.ArrayType(FOLLOWER_SCHEMA),
)
BROKER_METRICS_SCHEMA = _struct(leader_count=_INT)
CONTROLLER_METRICS_SCHEMA = _struct(
    active_controller_count=_INT,
    offline_partitions_count=_INT,
    global_partition_count=_INT,
    fenced_broker_count=_INT,
    active_broker_count=_INT,
    preferred_replica_imbalance_count=_INT,
)
CONTROLLER_BROKER_SCHEMA = _struct(broker_id=_INT, fenced=_BOOL)
# One schema for every kind: a field another kind has is null. The corrupt-record column holds the text of a
# line that did not parse (PERMISSIVE mode).
LINE_SCHEMA = _struct(
    v=_INT,
    kind=_STRING,
    ts_ms=_LONG,
    node_id=_INT,
    role=_STRING,  # start
    started_ms=_LONG,  # broker, controller
    broker=BROKER_METRICS_SCHEMA,
    partitions=T.ArrayType(PARTITION_SCHEMA),  # broker
    topic=_STRING,
    partition=_INT,
    leader_epoch=_INT,
    partition_epoch=_INT,  # isr_change
    isr_before=_IDS,
    isr_after=_IDS,
    source=_STRING,  # isr_change
    replicas=_IDS,
    min_isr=_INT,  # isr_change, optional: taken from the leader's snapshots when absent
    controller=CONTROLLER_METRICS_SCHEMA,
    brokers=T.ArrayType(CONTROLLER_BROKER_SCHEMA),  # controller
    **{CORRUPT_COLUMN: _STRING},
)

# What the analyses read; a line of a kind without one of these is counted as missing_field.
COMMON_REQUIRED = ("v", "kind", "ts_ms", "node_id")
REQUIRED_BY_KIND = {
    "start": ("role",),
    "broker": ("started_ms", "broker.leader_count", "partitions"),
    "isr_change": ("topic", "partition", "leader_epoch", "isr_before", "isr_after", "source"),
    "controller": (
        "controller.offline_partitions_count",
        "controller.fenced_broker_count",
        "controller.active_broker_count",
        "brokers",
    ),
}
PARTITION_REQUIRED = (
    "topic",
    "partition",
    "leader",
    "leader_epoch",
    "replicas",
    "isr",
    "min_isr",
    "bytes_in_total",
    "messages_in_total",
    "replication_bytes_in_total",
    "followers",
)
FOLLOWER_REQUIRED = ("broker_id", "lag_messages", "lag_bytes", "lag_ms")
CONTROLLER_BROKER_REQUIRED = ("broker_id", "fenced")


# The columns of a row of `Dumps.rows` (see read_dumps). A partition snapshot and an isr_change line share
# the columns of the fields they both have (topic, partition, leader_epoch, replicas, min_isr).
ISR_CHANGE_PARTITION_FIELDS = ("topic", "partition", "leader_epoch", "replicas", "min_isr")
ROW_COLUMNS = (
    "kind",
    "ts_ms",
    "node_id",
    "first_of_line",
    "role",
    "started_ms",
    "leader_count",
    *PARTITION_REQUIRED,
    "partition_epoch",
    "isr_before",
    "isr_after",
    "source",
    "controller",
    "brokers",
)


@dataclass
class Dumps:
    """The valid lines of a set of dump files, and what was left out of them."""

    files: list[Path]
    total_bytes: int
    parsed: DataFrame  # flat rows of every line with its rejection reason (null for a valid one), persisted
    rows: DataFrame  # valid lines, flat: one row per partition of a broker snapshot, one per other line
    lines: DataFrame  # one row per valid line (the first of its rows)
    malformed: DataFrame  # file, reason, lines
    valid_lines: int
    first_ts_ms: int
    last_ts_ms: int

    def release(self) -> None:
        """Drop the parsed lines from Spark's cache."""
        self.parsed.unpersist()


def find_dump_files(directories: list[Path]) -> list[Path]:
    """Every `*.jsonl` file under the directories, recursively, in name order."""
    files = []
    for directory in directories:
        if not directory.is_dir():
            raise AnalysisError(f"{directory}: not a directory")
        files += sorted(path for path in directory.rglob("*.jsonl") if path.is_file())
    if not files:
        raise AnalysisError(f"no *.jsonl metrics dump files under {', '.join(map(str, directories))}")
    return files


def read_dumps(spark: SparkSession, files: list[Path]) -> Dumps:
    """Parse the files and split their lines into valid ones and counted malformed ones.

    What is kept (persisted, for every analysis to read) is one flat frame: a valid broker line becomes one
    row per partition it reports, with that partition's fields as columns (`first_of_line` marks the row
    that stands for the line itself), and every other line one row. The analyses read partition snapshots
    several times; reading them from flat columns spares each one from decoding and exploding the nested
    lines again, and the cached columns hold only what the analyses read."""
    lines_read = (
        spark.read.schema(LINE_SCHEMA)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT_COLUMN)
        .json([str(path) for path in files])
        .select(F.col("*"), _rejection_reason().alias("reason"))
    )
    valid_broker_line = F.col("reason").isNull() & (F.col("kind") == "broker")
    exploded = lines_read.select(
        F.col("*"), F.posexplode_outer(F.when(valid_broker_line, F.col("partitions"))).alias("pos", "p")
    )
    def partition_field(field: str) -> Column:
        """On a broker line's row, its partition's field (null for a line without partitions); on another
        line's row, a field the isr_change line shares, else null."""
        own = F.col(field) if field in ISR_CHANGE_PARTITION_FIELDS else F.lit(None)
        return F.when(F.col("kind") == "broker", F.col(f"p.{field}")).otherwise(own)

    partition_fields = {field: partition_field(field) for field in PARTITION_REQUIRED}
    columns = {
        "kind": F.col("kind"),
        "ts_ms": F.col("ts_ms"),
        "node_id": F.col("node_id"),
        "first_of_line": F.coalesce(F.col("pos") == 0, F.lit(True)),
        "role": F.col("role"),
        "started_ms": F.col("started_ms"),
        "leader_count": F.col("broker.leader_count"),
        **partition_fields,
        "partition_epoch": F.col("partition_epoch"),
        "isr_before": F.col("isr_before"),
        "isr_after": F.col("isr_after"),
        "source": F.col("source"),
        "controller": F.col("controller"),
        "brokers": F.col("brokers"),
    }
    parsed = exploded.select(
        # Only a rejected line needs its file (its count is per file); a valid row carries no path string.
        F.when(F.col("reason").isNotNull(), _local_path(F.col("_metadata.file_path"))).alias("file"),
        F.col("reason"),
        *[columns[name].alias(name) for name in ROW_COLUMNS],
    ).persist(StorageLevel.MEMORY_AND_DISK)
    rows = parsed.filter(F.col("reason").isNull()).drop("file", "reason")
    lines = rows.filter(F.col("first_of_line"))
    malformed = (
        parsed.filter(F.col("reason").isNotNull())
        .groupBy(F.col("file"), F.col("reason"))
        .agg(F.count(F.lit(1)).alias("lines"))
        .select(F.col("file"), F.col("reason"), F.col("lines"))
    )
    extent = lines.agg(
        F.count(F.lit(1)).alias("valid_lines"), F.min("ts_ms").alias("first"), F.max("ts_ms").alias("last")
    ).first()
    if not extent["valid_lines"]:
        counts = ", ".join(f"{row['lines']} {row['reason']}" for row in malformed.collect()) or "no lines"
        parsed.unpersist()
        raise AnalysisError(f"no valid metrics line in {len(files)} dump files ({counts})")
    return Dumps(
        files=files,
        total_bytes=sum(os.path.getsize(path) for path in files),
        parsed=parsed,
        rows=rows,
        lines=lines,
        malformed=malformed,
        valid_lines=extent["valid_lines"],
        first_ts_ms=extent["first"],
        last_ts_ms=extent["last"],
    )


def _local_path(uri: Column) -> Column:
    """The path of a file: URI as Spark gives it (percent-encoded; a '+' is a '+', not a space)."""
    return F.url_decode(F.regexp_replace(F.regexp_replace(uri, "^file:", ""), "\\+", "%2B"))


def _all_not_null(columns: list[Column]) -> Column:
    return functools.reduce(operator.and_, [column.isNotNull() for column in columns])


def _rejection_reason() -> Column:
    """Why a parsed line cannot be used, or null when it can."""
    kind = F.col("kind")

    def has_fields(fields: tuple[str, ...]) -> Column:
        return _all_not_null([F.col(field) for field in fields])

    partitions_complete = F.forall(
        F.col("partitions"),
        lambda p: (
            _all_not_null([p[field] for field in PARTITION_REQUIRED])
            & F.forall(p["followers"], lambda f: _all_not_null([f[field] for field in FOLLOWER_REQUIRED]))
        ),
    )
    brokers_complete = F.forall(
        F.col("brokers"), lambda b: _all_not_null([b[field] for field in CONTROLLER_BROKER_REQUIRED])
    )
    complete = {line_kind: has_fields(fields) for line_kind, fields in REQUIRED_BY_KIND.items()}
    complete["broker"] = complete["broker"] & partitions_complete
    complete["controller"] = complete["controller"] & brokers_complete
    kind_complete = (
        F.when(kind == "start", complete["start"])
        .when(kind == "broker", complete["broker"])
        .when(kind == "isr_change", complete["isr_change"])
        .when(kind == "controller", complete["controller"])
    )
    return (
        F.when(F.col(CORRUPT_COLUMN).isNotNull(), F.lit("unparseable"))
        .when(~has_fields(COMMON_REQUIRED), F.lit("missing_field"))
        .when(F.col("v") != FORMAT_VERSION, F.lit("unknown_version"))
        .when(~kind.isin(*KINDS), F.lit("unknown_kind"))
        .when(~kind_complete, F.lit("missing_field"))
    )


def window_start(ts_ms: Column, window_ms: int) -> Column:
    """The start of the `window_ms` window, aligned to the epoch, that holds `ts_ms`."""
    return ts_ms - F.pmod(ts_ms, F.lit(window_ms))


def starts(rows: DataFrame) -> DataFrame:
    return rows.filter(F.col("kind") == "start").select(F.col("ts_ms"), F.col("node_id"), F.col("role"))


def broker_snapshots(rows: DataFrame) -> DataFrame:
    """One row per broker line: its time, process and leader count."""
    return rows.filter((F.col("kind") == "broker") & F.col("first_of_line")).select(
        F.col("ts_ms"), F.col("node_id"), F.col("started_ms"), F.col("leader_count")
    )


def partition_snapshots(rows: DataFrame) -> DataFrame:
    """One row per partition of every broker snapshot: what that broker reports for it at `ts_ms`."""
    return rows.filter((F.col("kind") == "broker") & F.col("topic").isNotNull()).select(
        F.col("ts_ms"),
        F.col("node_id"),
        F.col("started_ms"),
        *[F.col(field) for field in PARTITION_REQUIRED],
    )


def isr_changes(rows: DataFrame) -> DataFrame:
    return rows.filter(F.col("kind") == "isr_change").select(
        F.col("ts_ms"),
        F.col("node_id"),
        F.col("topic"),
        F.col("partition"),
        F.col("leader_epoch"),
        F.col("partition_epoch"),
        F.col("isr_before"),
        F.col("isr_after"),
        F.col("source"),
        F.col("replicas"),
        F.col("min_isr"),
    )


def controller_snapshots(rows: DataFrame) -> DataFrame:
    return rows.filter(F.col("kind") == "controller").select(
        F.col("ts_ms"), F.col("node_id"), F.col("controller"), F.col("brokers")
    )
