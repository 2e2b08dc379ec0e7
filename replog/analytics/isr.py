"""The ISR over time: every ISR change classified, the intervals a partition spends under-replicated or under
min ISR, and how long a restarted broker takes to get back into the ISRs of the partitions it follows.

A partition's state is what its current leader reports: the `isr_change` lines (exact edges) and the
leaders' `broker` snapshots (which catch what the change lines miss, one snapshot interval late at most),
merged in time order, keeping only records of the highest leader epoch seen so far (a deposed leader that
has not heard of its successor yet is ignored). A change line carries its replica list and min ISR; in
dumps from before they did, those come from the nearest snapshot of the partition, preferably the one before.
"""

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

CONDITIONS = ("under_replicated", "under_min_isr")
ISR_CHANGE_RECORD, SNAPSHOT_RECORD = 0, 1  # at the same millisecond, the change comes first


def isr_timeline(isr_changes: DataFrame) -> DataFrame:
    """Every ISR change with the replicas that left or joined, classified as shrink, expand,
    shrink_and_expand, unchanged or new_leadership (a new leader's first line, `isr_before` = [])."""
    new_leadership = F.size(F.col("isr_before")) == 0
    no_ids = F.array().cast("array<int>")
    removed = F.when(new_leadership, no_ids).otherwise(
        F.array_except(F.col("isr_before"), F.col("isr_after"))
    )
    added = F.when(new_leadership, no_ids).otherwise(F.array_except(F.col("isr_after"), F.col("isr_before")))
    return isr_changes.select(F.col("*"), removed.alias("removed"), added.alias("added")).select(
        F.col("ts_ms"),
        F.col("topic"),
        F.col("partition"),
        F.col("node_id").alias("leader"),
        F.col("leader_epoch"),
        F.col("partition_epoch"),
        F.col("isr_before"),
        F.col("isr_after"),
        F.col("source"),
        _change_type(new_leadership).alias("change"),
        F.col("removed"),
        F.col("added"),
    )


def _change_type(new_leadership: Column) -> Column:
    shrinks = F.size(F.col("removed")) > 0
    expands = F.size(F.col("added")) > 0
    return (
        F.when(new_leadership, F.lit("new_leadership"))
        .when(shrinks & expands, F.lit("shrink_and_expand"))
        .when(shrinks, F.lit("shrink"))
        .when(expands, F.lit("expand"))
        .otherwise(F.lit("unchanged"))
    )


def partition_states(partition_snapshots: DataFrame, isr_changes: DataFrame) -> DataFrame:
    """The leader-reported state records of every partition (see the module's docstring)."""
    is_leaders_report = F.col("node_id") == F.col("leader")
    snapshot_records = partition_snapshots.filter(is_leaders_report).select(
        F.col("topic"),
        F.col("partition"),
        F.col("ts_ms"),
        F.lit(SNAPSHOT_RECORD).alias("record"),
        F.col("leader"),
        F.col("leader_epoch"),
        F.col("isr"),
        F.col("replicas"),
        F.col("min_isr"),
    )
    change_records = isr_changes.select(
        F.col("topic"),
        F.col("partition"),
        F.col("ts_ms"),
        F.lit(ISR_CHANGE_RECORD).alias("record"),
        F.col("node_id").alias("leader"),
        F.col("leader_epoch"),
        F.col("isr_after").alias("isr"),
        F.col("replicas"),
        F.col("min_isr"),
    )
    in_time_order = Window.partitionBy("topic", "partition").orderBy("ts_ms", "record")
    so_far = in_time_order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    # The records from this one to the partition's last, as the running frame of the reverse order: Spark
    # keeps a running frame's aggregate from row to row, but recomputes a frame that ends at the partition's
    # end for every row, which is quadratic in a partition's records (most of this job's CPU at 1 GB).
    in_reverse_time_order = Window.partitionBy("topic", "partition").orderBy(
        F.col("ts_ms").desc(), F.col("record").desc()
    )
    from_here = in_reverse_time_order.rowsBetween(Window.unboundedPreceding, Window.currentRow)

    def nearest_known(column: str) -> Column:
        return F.coalesce(
            F.last(column, ignorenulls=True).over(so_far), F.last(column, ignorenulls=True).over(from_here)
        )

    records = snapshot_records.unionByName(change_records).select(
        F.col("topic"),
        F.col("partition"),
        F.col("ts_ms"),
        F.col("record"),
        F.col("leader"),
        F.col("leader_epoch"),
        F.col("isr"),
        nearest_known("replicas").alias("replicas"),
        nearest_known("min_isr").alias("min_isr"),
        F.max("leader_epoch").over(so_far).alias("current_epoch"),
    )
    from_current_leader = F.col("leader_epoch") == F.col("current_epoch")
    replicas_known = F.col("replicas").isNotNull()
    return records.filter(from_current_leader & replicas_known).select(
        F.col("topic"),
        F.col("partition"),
        F.col("ts_ms"),
        F.col("record"),
        F.col("leader"),
        F.col("leader_epoch"),
        F.col("isr"),
        F.col("replicas"),
        F.col("min_isr"),
        (F.size(F.col("isr")) < F.size(F.col("replicas"))).alias("under_replicated"),
        (F.size(F.col("isr")) < F.col("min_isr")).alias("under_min_isr"),
    )


def condition_intervals(states: DataFrame) -> DataFrame:
    """The maximal intervals in which a partition is under-replicated, and those it is under min ISR.

    An interval starts at the first record showing the condition and ends at the first record after it
    not showing it; one still going at the partition's last record ends there and is flagged open.

    Both conditions' runs come from one pass over the states in time order (one shuffle and one sort of
    them, not one per condition); each record then gives a row per condition, grouped by run."""
    in_time_order = Window.partitionBy("topic", "partition").orderBy("ts_ms", "record")
    so_far = in_time_order.rowsBetween(Window.unboundedPreceding, Window.currentRow)

    def run_starts(condition: str) -> Column:
        holds = F.col(condition)
        return F.coalesce(F.lag(holds).over(in_time_order) != holds, F.lit(True))

    sequenced = states.select(
        F.col("topic"),
        F.col("partition"),
        F.col("ts_ms"),
        F.col("record"),
        *[F.col(condition) for condition in CONDITIONS],
        F.row_number().over(in_time_order).alias("seq"),
        F.lead("ts_ms").over(in_time_order).alias("next_ts_ms"),
        F.max("ts_ms").over(Window.partitionBy("topic", "partition")).alias("last_ts_ms"),
        *[run_starts(condition).alias(f"{condition}_starts") for condition in CONDITIONS],
    )
    with_runs = sequenced.select(
        F.col("*"),
        *[
            F.sum(F.col(f"{condition}_starts").cast("int")).over(so_far).alias(f"{condition}_run")
            for condition in CONDITIONS
        ],
    )
    per_condition = F.inline(
        F.array(
            *[
                F.struct(
                    F.lit(condition).alias("condition"),
                    F.col(condition).alias("holds"),
                    F.col(f"{condition}_run").alias("run"),
                )
                for condition in CONDITIONS
            ]
        )
    )
    runs = (
        with_runs.select(
            F.col("topic"),
            F.col("partition"),
            F.col("ts_ms"),
            F.col("seq"),
            F.col("next_ts_ms"),
            F.col("last_ts_ms"),
            per_condition,
        )
        .filter(F.col("holds"))
        .groupBy("topic", "partition", "condition", "run")
        .agg(
            F.min("ts_ms").alias("start_ms"),
            # The record after the run's last one ends it; none means the run lasts to the end of the data.
            F.max_by("next_ts_ms", "seq").alias("ended_by_ms"),
            F.max("last_ts_ms").alias("last_ts_ms"),
        )
    )
    end = F.coalesce(F.col("ended_by_ms"), F.col("last_ts_ms"))
    return runs.select(
        F.col("topic"),
        F.col("partition"),
        F.col("condition"),
        F.col("start_ms"),
        end.alias("end_ms"),
        (end - F.col("start_ms")).alias("duration_ms"),
        F.col("ended_by_ms").isNull().alias("open"),
    )


def interval_totals(intervals: DataFrame) -> DataFrame:
    """Per partition and condition: how many intervals, how long in all, and whether one is still open."""
    return (
        intervals.groupBy("topic", "partition", "condition")
        .agg(
            F.count(F.lit(1)).alias("intervals"),
            F.sum("duration_ms").alias("total_ms"),
            F.max("duration_ms").alias("longest_ms"),
            F.max(F.col("open").cast("int")).cast("boolean").alias("open"),
        )
        .select(
            F.col("topic"),
            F.col("partition"),
            F.col("condition"),
            F.col("intervals"),
            F.col("total_ms"),
            F.col("longest_ms"),
            F.col("open"),
        )
    )


def restarts(starts: DataFrame, first_ts_ms: int, last_ts_ms: int) -> DataFrame:
    """Broker starts after the first line of data, each with the time its next start (or the end of the data)
    bounds what belongs to it."""
    next_start = F.lead("ts_ms").over(Window.partitionBy("node_id").orderBy("ts_ms"))
    return (
        starts.filter(F.col("role") == "broker")
        .select(F.col("node_id"), F.col("ts_ms"), next_start.alias("next_start_ms"))
        .filter(F.col("ts_ms") > first_ts_ms)
        .select(
            F.col("node_id").alias("broker_id"),
            F.col("ts_ms").alias("start_ms"),
            F.coalesce(F.col("next_start_ms"), F.lit(last_ts_ms + 1)).alias("horizon_ms"),
        )
    )


def catch_up_by_partition(
    restarts: DataFrame, partition_snapshots: DataFrame, timeline: DataFrame, states: DataFrame
) -> DataFrame:
    """For every restart and partition the broker follows after it: when it was back in the ISR.

    The partitions are those the broker's own snapshots list with another leader before its next start.
    `rejoined_ms` is the first ISR change after the start that adds it; without one, a broker that is in the
    ISR at the last state before its next start (or the end) never left it (catch-up 0, `stayed_in_isr`),
    otherwise it has not caught up (`not_caught_up`, catch-up null)."""
    within_restart = (F.col("ts_ms") >= F.col("start_ms")) & (F.col("ts_ms") < F.col("horizon_ms"))
    follows = F.col("leader") != F.col("broker_id")
    followed = (
        partition_snapshots.select(
            F.col("node_id").alias("broker_id"),
            F.col("ts_ms"),
            F.col("topic"),
            F.col("partition"),
            F.col("leader"),
        )
        .join(F.broadcast(restarts), on="broker_id", how="inner")
        .filter(within_restart & follows)
        .select(
            F.col("broker_id"), F.col("start_ms"), F.col("horizon_ms"), F.col("topic"), F.col("partition")
        )
        .distinct()
    )
    rejoins = (
        timeline.select(
            F.col("ts_ms"), F.col("topic"), F.col("partition"), F.explode("added").alias("broker_id")
        )
        .join(followed, on=["topic", "partition", "broker_id"], how="inner")
        .filter(within_restart)
        .groupBy("broker_id", "start_ms", "topic", "partition")
        .agg(F.min("ts_ms").alias("rejoined_ms"))
    )
    last_isr = (
        states.select(F.col("topic"), F.col("partition"), F.col("ts_ms"), F.col("record"), F.col("isr"))
        .join(followed, on=["topic", "partition"], how="inner")
        .filter(within_restart)
        .groupBy("broker_id", "start_ms", "topic", "partition")
        .agg(F.max_by("isr", F.struct("ts_ms", "record")).alias("last_isr"))
    )
    keys = ["broker_id", "start_ms", "topic", "partition"]
    rejoined = F.col("rejoined_ms").isNotNull()
    stayed = F.coalesce(F.array_contains(F.col("last_isr"), F.col("broker_id")), F.lit(False))
    return (
        followed.join(rejoins, on=keys, how="left")
        .join(last_isr, on=keys, how="left")
        .select(
            F.col("broker_id"),
            F.col("start_ms"),
            F.col("topic"),
            F.col("partition"),
            F.col("rejoined_ms"),
            F.when(rejoined, F.col("rejoined_ms") - F.col("start_ms"))
            .when(stayed, F.lit(0).cast("long"))
            .alias("catch_up_ms"),
            F.when(rejoined, F.lit("rejoined"))
            .when(stayed, F.lit("stayed_in_isr"))
            .otherwise(F.lit("not_caught_up"))
            .alias("status"),
        )
    )


def catch_up_by_start(restarts: DataFrame, by_partition: DataFrame) -> DataFrame:
    """Per restart: partitions followed, how many are back in the ISR, the longest catch-up among those, and
    the time until all were (null while one is not)."""
    caught_up = F.col("catch_up_ms").isNotNull()
    per_start = by_partition.groupBy("broker_id", "start_ms").agg(
        F.count(F.lit(1)).alias("partitions"),
        F.sum(caught_up.cast("int")).alias("caught_up"),
        F.max("catch_up_ms").alias("longest_catch_up_ms"),
    )
    partitions = F.coalesce(F.col("partitions"), F.lit(0).cast("long"))
    all_caught_up = F.coalesce(F.col("caught_up"), F.lit(0).cast("long")) == partitions
    return restarts.join(per_start, on=["broker_id", "start_ms"], how="left").select(
        F.col("broker_id"),
        F.col("start_ms"),
        partitions.alias("partitions"),
        F.coalesce(F.col("caught_up"), F.lit(0).cast("long")).alias("caught_up"),
        F.col("longest_catch_up_ms"),
        F.when(all_caught_up, F.coalesce(F.col("longest_catch_up_ms"), F.lit(0).cast("long"))).alias(
            "all_caught_up_ms"
        ),
    )
