"""Every table the analysis produces, from the valid lines of the dumps."""

from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import DataFrame

from . import balance, dumps, isr, lag, throughput


@dataclass
class Table:
    name: str
    description: str
    frame: DataFrame
    order_by: tuple[str, ...]  # how its rows are listed in the CSV, the plots and the report


def build_tables(parsed: dumps.Dumps, window_ms: int) -> tuple[list[Table], list[DataFrame]]:
    """The tables, and the intermediate frames persisted for them (to unpersist once they are written)."""
    rows = parsed.rows
    brokers = dumps.broker_snapshots(rows)
    partitions = dumps.partition_snapshots(rows)
    changes = dumps.isr_changes(rows)
    kept: list[DataFrame] = []

    def keep(frame: DataFrame) -> DataFrame:
        """Persisted until the tables are written: more than one table reads it, and it is much smaller
        than the lines it comes from."""
        kept.append(frame.persist(StorageLevel.MEMORY_AND_DISK))
        return kept[-1]

    timeline = keep(isr.isr_timeline(changes))
    states = keep(isr.partition_states(partitions, changes))
    intervals = keep(isr.condition_intervals(states))
    restarts = isr.restarts(dumps.starts(rows), parsed.first_ts_ms, parsed.last_ts_ms)
    catch_up = keep(isr.catch_up_by_partition(restarts, partitions, timeline, states))
    counts = balance.leader_counts(brokers, window_ms)
    lags = keep(lag.follower_lags(partitions, window_ms))
    # The increases (a row per partition snapshot) are read once, by the aggregation both throughput
    # tables share: that aggregation is what is kept.
    increases = throughput.counter_increases(brokers, partitions, parsed.first_ts_ms, window_ms)
    lag_tables = lag.lag_tables(lags, keep)
    throughput_tables = throughput.throughput_tables(increases, window_ms, keep)
    window_s = f"{window_ms / 1000:g} s"
    tables = [
        Table("malformed_lines", "Lines not used, per file and reason", parsed.malformed, ("file", "reason")),
        Table("lag_overall", "Follower lag over all leaders' reports", lag_tables["lag_overall"], ()),
        Table("lag_by_topic", "Follower lag per topic", lag_tables["lag_by_topic"], ("topic",)),
        Table(
            "lag_by_follower",
            "Follower lag per follower broker",
            lag_tables["lag_by_follower"],
            ("follower_id",),
        ),
        Table(
            "lag_by_window",
            f"Follower lag per {window_s} window",
            lag_tables["lag_by_window"],
            ("window_start_ms",),
        ),
        Table(
            "lag_by_partition_follower",
            "Follower lag per partition and follower",
            lag_tables["lag_by_partition_follower"],
            ("topic", "partition", "follower_id"),
        ),
        Table(
            "under_replicated_intervals",
            "Intervals under-replicated (ISR smaller than replicas) and under min ISR",
            intervals,
            ("condition", "topic", "partition", "start_ms"),
        ),
        Table(
            "under_replicated_totals",
            "Time under-replicated and under min ISR per partition",
            isr.interval_totals(intervals),
            ("condition", "topic", "partition"),
        ),
        Table("isr_timeline", "Every ISR change, classified", timeline, ("ts_ms", "topic", "partition")),
        Table(
            "throughput_by_topic",
            f"Produce and replication throughput per topic and {window_s} window",
            throughput_tables["throughput_by_topic"],
            ("window_start_ms", "topic"),
        ),
        Table(
            "throughput_by_broker",
            f"Produce and replication throughput per broker and {window_s} window",
            throughput_tables["throughput_by_broker"],
            ("window_start_ms", "broker_id"),
        ),
        Table(
            "catch_up_by_start",
            "Catch-up after each broker restart",
            isr.catch_up_by_start(restarts, catch_up),
            ("start_ms", "broker_id"),
        ),
        Table(
            "catch_up_by_partition",
            "Catch-up per restart and followed partition",
            catch_up,
            ("start_ms", "broker_id", "topic", "partition"),
        ),
        Table(
            "leader_counts",
            f"Leaders per broker ({window_s} windows)",
            counts,
            ("window_start_ms", "broker_id"),
        ),
        Table(
            "leader_imbalance",
            f"Leader balance per {window_s} window",
            balance.leader_imbalance(counts),
            ("window_start_ms",),
        ),
        Table(
            "controller_snapshots",
            "The controller's snapshots",
            balance.controller_table(dumps.controller_snapshots(rows)),
            ("ts_ms",),
        ),
    ]
    return tables, kept
