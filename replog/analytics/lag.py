"""Replication lag as the leaders report it for their followers: percentiles of lag in messages, bytes and
milliseconds per partition and follower, per follower broker, per topic, per time window and overall.

Percentiles are nearest-rank (the smallest value that at least that fraction of the samples do not exceed),
computed by Spark's percentile_approx: exact for a group of fewer than 10,000 samples, within 1/10,000 of
the rank above that.
"""

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


def lag_tables(lags: DataFrame) -> dict[str, DataFrame]:
    """Every grouping of LAG_GROUPINGS, from `follower_lags`."""
    return {name: lag_percentiles(lags, keys) for name, keys in LAG_GROUPINGS.items()}
