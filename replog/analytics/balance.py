"""Leader balance across brokers per time window, and the controller's view of the cluster over time."""

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .dumps import window_start


def leader_counts(broker_snapshots: DataFrame, window_ms: int) -> DataFrame:
    """Per window and broker: the leader count of the broker's last snapshot in the window."""
    return (
        broker_snapshots.select(
            window_start(F.col("ts_ms"), window_ms).alias("window_start_ms"),
            F.col("node_id").alias("broker_id"),
            F.col("ts_ms"),
            F.col("leader_count"),
        )
        .groupBy("window_start_ms", "broker_id")
        .agg(F.max_by("leader_count", "ts_ms").alias("leader_count"))
        .select(F.col("window_start_ms"), F.col("broker_id"), F.col("leader_count"))
    )


def leader_imbalance(counts: DataFrame) -> DataFrame:
    """Per window, over the brokers that reported in it: leaders in all, the most and fewest on one broker,
    the mean, and the imbalance max/mean (1.0 is perfectly balanced; null without leaders)."""
    mean = F.col("total_leaders") / F.col("brokers")
    return (
        counts.groupBy("window_start_ms")
        .agg(
            F.count(F.lit(1)).alias("brokers"),
            F.sum("leader_count").alias("total_leaders"),
            F.max("leader_count").alias("max_leaders"),
            F.min("leader_count").alias("min_leaders"),
        )
        .select(
            F.col("window_start_ms"),
            F.col("brokers"),
            F.col("total_leaders"),
            F.col("max_leaders"),
            F.col("min_leaders"),
            mean.alias("mean_leaders"),
            F.when(mean > 0, F.col("max_leaders") / mean).alias("imbalance"),
        )
    )


def controller_table(controller_snapshots: DataFrame) -> DataFrame:
    """The controller's snapshots with the ids of the brokers it had fenced."""
    fenced_ids = F.array_sort(
        F.transform(F.filter(F.col("brokers"), lambda b: b["fenced"]), lambda b: b["broker_id"])
    )
    return controller_snapshots.select(
        F.col("ts_ms"),
        F.col("node_id").alias("controller_id"),
        F.col("controller.active_controller_count").alias("active_controller_count"),
        F.col("controller.offline_partitions_count").alias("offline_partitions"),
        F.col("controller.fenced_broker_count").alias("fenced_brokers"),
        F.col("controller.active_broker_count").alias("active_brokers"),
        F.col("controller.global_partition_count").alias("partitions"),
        F.col("controller.preferred_replica_imbalance_count").alias("preferred_replica_imbalance"),
        fenced_ids.alias("fenced_broker_ids"),
    )
