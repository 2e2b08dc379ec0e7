"""Replication lag as the leaders report it for their followers: percentiles of lag in messages, bytes and
milliseconds per partition and follower, per follower broker, per topic, per time window and overall.

Percentiles are nearest-rank (the smallest value that at least that fraction of the samples do not exceed).
Per partition and follower they are exact, taken from the group's sorted samples: those groups are many
(partitions times followers) and small (one sample per leader snapshot). Spark's percentile_approx there
kept a quantile digest per metric and group, and past 128 groups per task fell back to sorting the rows and
serialising and re-merging every digest: it was a quarter of the executors' time. The other groupings are
few and large and use percentile_approx, exact for a group of fewer than 10,000 samples and within
1/10,000 of the rank above that. They come from one aggregation over grouping sets: the samples are scanned
once for the four of them, and Spark plans, generates and compiles one aggregation instead of four.
"""

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .dumps import window_start

LAG_METRICS = ("lag_messages", "lag_bytes", "lag_ms")
PERCENTILES = {"p50": 0.5, "p95": 0.95, "p99": 0.99}
# Table name -> the columns its percentiles are grouped by.
LAG_GROUPINGS = {
    "lag_by_partition_follower": ("topic", "partition", "follower_id"),
    "lag_by_follower": ("follower_id",),
    "lag_by_topic": ("topic",),
    "lag_by_window": ("window_start_ms",),
    "lag_overall": (),
}
EXACT_GROUPINGS = {"lag_by_partition_follower"}  # many small groups (see the module's docstring)
APPROX_GROUPINGS = {name: keys for name, keys in LAG_GROUPINGS.items() if name not in EXACT_GROUPINGS}
GROUPING_ID = "grouping_id"


def follower_lags(partition_snapshots: DataFrame, window_ms: int) -> DataFrame:
    """One row per follower entry of a leader's snapshot."""
    is_leaders_report = F.col("node_id") == F.col("leader")
    return (
        partition_snapshots.filter(is_leaders_report)
        .select(F.col("ts_ms"), F.col("topic"), F.col("partition"), F.explode("followers").alias("f"))
        .select(
            window_start(F.col("ts_ms"), window_ms).alias("window_start_ms"),
            F.col("topic"),
            F.col("partition"),
            F.col("f.broker_id").alias("follower_id"),
            *[F.col(f"f.{metric}").alias(metric) for metric in LAG_METRICS],
        )
    )


def exact_lag_percentiles(lags: DataFrame, keys: tuple[str, ...]) -> DataFrame:
    """Sample count, p50/p95/p99 and max of every lag metric per group of `keys`, exactly, from every
    group's samples collected and sorted: for small groups."""
    collected = lags.groupBy(*keys).agg(
        F.collect_list(F.struct(*[F.col(metric) for metric in LAG_METRICS])).alias("lags")
    )
    # Each metric's values sorted once, in a projection of their own: read four times by the next one, an
    # expression as costly as a sort is not inlined there (Spark's CollapseProject). `lags.<field>` and
    # sort_array are compiled expressions; transform and array_sort take lambdas, which Spark interprets
    # row by row (a comparator call per comparison).
    sorted_lags = collected.select(
        *[F.col(key) for key in keys],
        F.size(F.col("lags")).alias("samples"),
        *[F.sort_array(F.col(f"lags.{metric}")).alias(metric) for metric in LAG_METRICS],
    )
    samples = F.col("samples")
    columns = [F.col(key) for key in keys] + [samples.cast("long").alias("samples")]
    for metric in LAG_METRICS:
        values = F.col(metric)
        for name, fraction in PERCENTILES.items():
            # The 1-based nearest rank, ceil(fraction * n), computed in doubles as percentile_approx does.
            rank = F.ceil(F.lit(fraction) * samples).cast("int")
            columns.append(F.element_at(values, rank).alias(f"{metric}_{name}"))
        columns.append(F.element_at(values, -1).alias(f"{metric}_max"))
    return sorted_lags.select(*columns)


def grouped_lag_percentiles(lags: DataFrame) -> DataFrame:
    """Sample count, approximate p50/p95/p99 and max of every lag metric for every grouping of
    APPROX_GROUPINGS at once: the grouping sets' rows, each with its grouping's id (`grouping_id`, see
    grouping_id_of) and null in the key columns it is not grouped by."""
    aggregates = [F.count(F.lit(1)).alias("samples")]
    for metric in LAG_METRICS:
        aggregates.append(F.percentile_approx(F.col(metric), list(PERCENTILES.values())).alias(metric))
        aggregates.append(F.max(F.col(metric)).alias(f"{metric}_max"))
    return lags.groupingSets(list(APPROX_GROUPINGS.values()), *_approx_keys()).agg(
        *aggregates, F.grouping_id().alias(GROUPING_ID)
    )


def _approx_keys() -> list[str]:
    """Every key column of APPROX_GROUPINGS, once each, in the order grouping_id numbers them."""
    return list(dict.fromkeys(key for keys in APPROX_GROUPINGS.values() for key in keys))


def grouping_id_of(keys: tuple[str, ...]) -> int:
    """Spark's grouping_id of the grouping set `keys`: one bit per key column, most significant first, set
    for a column the set does not group by."""
    columns = _approx_keys()
    return sum(1 << (len(columns) - 1 - i) for i, column in enumerate(columns) if column not in keys)


def grouping_table(grouped: DataFrame, keys: tuple[str, ...]) -> DataFrame:
    """One grouping's rows of `grouped_lag_percentiles`, with lag_percentiles' columns. The grouping by no
    key has one row even without samples (count 0, null percentiles), as a global aggregation does: a
    grouping set has no row for an empty input."""
    rows = grouped.filter(F.col(GROUPING_ID) == grouping_id_of(keys))
    if not keys:
        one_row = grouped.sparkSession.range(1).select()
        rows = one_row.join(rows, how="left").select(
            F.coalesce(F.col("samples"), F.lit(0).cast("long")).alias("samples"),
            *[F.col(column) for column in rows.columns if column != "samples"],
        )
    columns = [F.col(key) for key in keys] + [F.col("samples")]
    for metric in LAG_METRICS:
        columns += [F.col(metric)[i].alias(f"{metric}_{name}") for i, name in enumerate(PERCENTILES)]
        columns.append(F.col(f"{metric}_max"))
    return rows.select(*columns)


def lag_tables(
    lags: DataFrame, keep: Callable[[DataFrame], DataFrame] = lambda frame: frame
) -> dict[str, DataFrame]:
    """Every grouping of LAG_GROUPINGS, from `follower_lags`. `keep` is given the frame the approximate
    groupings share, and what it returns is used (persisting it saves recomputing it for every table)."""
    grouped = keep(grouped_lag_percentiles(lags))
    tables = {name: grouping_table(grouped, keys) for name, keys in APPROX_GROUPINGS.items()}
    tables.update({name: exact_lag_percentiles(lags, LAG_GROUPINGS[name]) for name in EXACT_GROUPINGS})
    return {name: tables[name] for name in LAG_GROUPINGS}
