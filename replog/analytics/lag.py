"""Replication lag as the leaders report it for their followers: percentiles of lag in messages, bytes and
milliseconds per partition and follower, per follower broker, per topic, per time window and overall.

Percentiles are nearest-rank (the smallest value that at least that fraction of the samples do not exceed).
Per partition and follower they are exact, taken from the group's sorted samples: those groups are many
(partitions times followers) and small (one sample per leader snapshot). Spark's percentile_approx there
kept a quantile digest per metric and group, and past 128 groups per task fell back to sorting the rows and
serialising and re-merging every digest: it was a quarter of the executors' time. The other groupings are
few and large and use percentile_approx, exact for a group of fewer than 10,000 samples and within
1/10,000 of the rank above that.
"""

from pyspark.sql import Column, DataFrame
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


def lag_percentiles(lags: DataFrame, keys: tuple[str, ...]) -> DataFrame:
    """Sample count, p50/p95/p99 and max of every lag metric per group of `keys` (one row when empty)."""
    aggregates = [F.count(F.lit(1)).alias("samples")]
    for metric in LAG_METRICS:
        aggregates.append(F.percentile_approx(F.col(metric), list(PERCENTILES.values())).alias(metric))
        aggregates.append(F.max(F.col(metric)).alias(f"{metric}_max"))
    columns = [F.col(key) for key in keys] + [F.col("samples")]
    for metric in LAG_METRICS:
        columns += [F.col(metric)[i].alias(f"{metric}_{name}") for i, name in enumerate(PERCENTILES)]
        columns.append(F.col(f"{metric}_max"))
    return lags.groupBy(*keys).agg(*aggregates).select(*columns)


def exact_lag_percentiles(lags: DataFrame, keys: tuple[str, ...]) -> DataFrame:
    """As lag_percentiles, exactly, from every group's samples collected and sorted: for small groups."""
    collected = lags.groupBy(*keys).agg(
        F.collect_list(F.struct(*[F.col(metric) for metric in LAG_METRICS])).alias("lags")
    )
    samples = F.size(F.col("lags"))

    def sorted_values(metric: str) -> Column:
        return F.array_sort(F.transform(F.col("lags"), lambda sample: sample[metric]))

    columns = [F.col(key) for key in keys] + [samples.cast("long").alias("samples")]
    for metric in LAG_METRICS:
        values = sorted_values(metric)
        for name, fraction in PERCENTILES.items():
            # The 1-based nearest rank, ceil(fraction * n), computed in doubles as percentile_approx does.
            rank = F.ceil(F.lit(fraction) * samples).cast("int")
            columns.append(F.element_at(values, rank).alias(f"{metric}_{name}"))
        columns.append(F.element_at(values, -1).alias(f"{metric}_max"))
    return collected.select(*columns)


def lag_tables(lags: DataFrame) -> dict[str, DataFrame]:
    """Every grouping of LAG_GROUPINGS, from `follower_lags`."""
    return {
        name: (exact_lag_percentiles if name in EXACT_GROUPINGS else lag_percentiles)(lags, keys)
        for name, keys in LAG_GROUPINGS.items()
    }
