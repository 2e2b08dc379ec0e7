"""Produce throughput (bytes and records appended as leader) and replication throughput (bytes appended as
follower) per time window, per topic and per broker, from the per-partition counters of broker snapshots.

A counter's increase over a step is its difference from the previous line of the same process (node_id,
started_ms) for the same partition; a smaller value is a reset, and the step then counts the new value
(docs/metrics-dumps.md). A series' first value counts from zero when the counting began inside the data:
the process started after the first line of data, or the partition appeared after the process's first line
(a replica created then). Otherwise it is only the baseline. A step's amount goes to the window holding the
line that ends it, and a window's rate is its amount over the whole window length (so a window the data
covers only in part shows a lower rate).
"""

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from .dumps import window_start

COUNTERS = {  # counter -> the name of its per-window amount
    "bytes_in_total": "produce_bytes",
    "messages_in_total": "produce_records",
    "replication_bytes_in_total": "replication_bytes",
}
BYTES_PER_MB = 1_000_000


def counter_increases(
    broker_snapshots: DataFrame, partition_snapshots: DataFrame, first_ts_ms: int, window_ms: int
) -> DataFrame:
    """Per partition snapshot: how much each counter grew since the previous one of the same series."""
    process_first_lines = broker_snapshots.groupBy("node_id", "started_ms").agg(
        F.min("ts_ms").alias("process_first_ts_ms")
    )
    series = Window.partitionBy("node_id", "started_ms", "topic", "partition").orderBy("ts_ms")
    started_inside_data = F.col("started_ms") >= first_ts_ms
    appeared_later = F.col("ts_ms") > F.col("process_first_ts_ms")
    counts_from_zero = started_inside_data | appeared_later

    def increase(counter: str) -> Column:
        value, previous = F.col(counter), F.lag(counter).over(series)
        return (
            F.when(previous.isNull(), F.when(counts_from_zero, value))
            .when(value < previous, value)
            .otherwise(value - previous)
        )

    return partition_snapshots.join(
        F.broadcast(process_first_lines), on=["node_id", "started_ms"], how="left"
    ).select(
        window_start(F.col("ts_ms"), window_ms).alias("window_start_ms"),
        F.col("node_id"),
        F.col("topic"),
        *[increase(counter).alias(amount) for counter, amount in COUNTERS.items()],
    )


def throughput_tables(
    increases: DataFrame, window_ms: int, keep: Callable[[DataFrame], DataFrame] = lambda frame: frame
) -> dict[str, DataFrame]:
    """Per window and topic, and per window and broker, from `counter_increases`: amounts and rates.

    Both come from one aggregation over two grouping sets, so the increases (a row per partition snapshot)
    are computed and scanned once for both. `keep` is given that aggregation, and what it returns is used
    (persisting it saves recomputing it for each table)."""
    amounts = [F.coalesce(F.sum(amount), F.lit(0)).alias(amount) for amount in COUNTERS.values()]
    grouped = keep(
        increases.groupingSets(
            [("window_start_ms", "topic"), ("window_start_ms", "node_id")],
            "window_start_ms",
            "topic",
            "node_id",
        ).agg(*amounts, F.grouping_id().alias("grouping_id"))
    )
    window_s = window_ms / 1000

    def per_window(key: str, grouping_id: int) -> DataFrame:
        return grouped.filter(F.col("grouping_id") == grouping_id).select(
            F.col("window_start_ms"),
            F.col(key).alias("broker_id" if key == "node_id" else key),
            *[F.col(amount) for amount in COUNTERS.values()],
            (F.col("produce_bytes") / BYTES_PER_MB / window_s).alias("produce_mb_per_s"),
            (F.col("produce_records") / window_s).alias("produce_records_per_s"),
            (F.col("replication_bytes") / BYTES_PER_MB / window_s).alias("replication_mb_per_s"),
        )

    # grouping_id: a bit per grouping column (window_start_ms, topic, node_id), set where not grouped by.
    return {
        "throughput_by_topic": per_window("topic", 0b001),
        "throughput_by_broker": per_window("node_id", 0b010),
    }
