"""The broker's periodic dump line (docs/metrics-dumps.md `broker`), built from what changed since the last one.

A line holds every partition hosted here; at 10,000 partitions building and encoding all of them every second
was most of an idle broker's CPU (docs/profiles/idle-cpu.md). So the work follows the changes instead:
partitions and their logs tell BrokerMetrics.changed when anything their line shows moves (appends, follower
fetches, HW, log start, size, leadership, ISR, min.insync.replicas, counters), and a dump rebuilds only
those lines, plus the leader lines with a follower not caught up (their lag_ms grows with the clock). The
worker thread keeps the others' encodings (EncodedArray). The broker-wide gauges are kept the same way: each
partition's share is stored with its line and the totals adjusted when it changes.
"""

from __future__ import annotations

from typing import NamedTuple

from replog.log.file_budget import FileBudget
from replog.log.partition_log import TopicPartition
from replog.metrics.encoded_array import ArrayUpdate, EncodedArray

from .metrics import BrokerMetrics, PartitionCounters, TopicCounters, follower_lags
from .partition import Partition


class GaugeShare(NamedTuple):
    """What one partition adds to the broker's replication gauges (Kafka's ReplicaManager gauges)."""

    leader: int = 0
    under_replicated: int = 0
    under_min_isr: int = 0
    at_min_isr: int = 0
    follower_lag: int = 0  # as a follower: the leader's HW minus our LEO


NO_SHARE = GaugeShare()


def partition_line(metrics: BrokerMetrics, partition: Partition, now_ms: int) -> dict:
    """One partition's entry in the `partitions` array of the dump line."""
    state, log = partition.state, partition.log
    counters = metrics.partitions.get(partition.key) or PartitionCounters()
    return {
        "topic": partition.topic, "partition": partition.index, "leader": state.leader,
        "leader_epoch": state.leader_epoch, "replicas": list(state.replicas), "isr": list(state.isr),
        "min_isr": partition.effective_min_isr(), "log_start_offset": log.log_start_offset,
        "log_end_offset": log.log_end_offset, "high_watermark": log.high_watermark,
        "size_bytes": log.size_in_bytes, "bytes_in_total": counters.bytes_in,
        "messages_in_total": counters.messages_in, "replication_bytes_in_total": counters.replication_bytes_in,
        "followers": follower_lags(partition, now_ms) if partition.is_leader else [],
    }


def gauge_share(metrics: BrokerMetrics, partition: Partition, line: dict) -> GaugeShare:
    """From the partition's line just built (the same figures, not computed twice)."""
    if partition.is_leader:
        isr_size, min_isr = len(line["isr"]), line["min_isr"]
        return GaugeShare(1, int(isr_size < len(line["replicas"])), int(isr_size < min_isr), int(isr_size == min_isr))
    if line["leader"] >= 0:
        lag = metrics.follower_lag(partition.key, partition)
        return GaugeShare(follower_lag=lag) if lag else NO_SHARE
    return NO_SHARE


class BrokerDump:
    """The `broker` line's fields (MetricsDumper's snapshot), on the event loop; the partitions array goes to
    the dump's worker thread as an ArrayUpdate of the lines that changed."""

    def __init__(self, metrics: BrokerMetrics, replica_manager) -> None:
        self._metrics = metrics
        self._replica_manager = replica_manager
        self._lines = EncodedArray()
        self._shares: dict[TopicPartition, GaugeShare] = {}
        # Running sums of the shares, and the followed partitions whose lag is not 0 (max_lag_messages).
        self._leaders = self._under_replicated = self._under_min_isr = self._at_min_isr = 0
        self._follower_lags: dict[TopicPartition, int] = {}
        # Leader lines with a follower behind the LEO: their lag_ms moves with the clock alone.
        self._clock_bound: set[TopicPartition] = set()
        self.lines_built = 0  # since creation: how many partition lines the dumps built

    def snapshot(self, now_ms: int) -> tuple[str, dict]:
        metrics, replica_manager = self._metrics, self._replica_manager
        partitions = replica_manager.partitions
        if metrics.changed is None:  # the first dump: from now on partitions report their changes
            metrics.changed = {}
            for partition in partitions.values():
                metrics.track_partition(partition)
        keys = [*metrics.changed, *(key for key in self._clock_bound if key not in metrics.changed)]
        metrics.changed.clear()
        changes = {}
        for key in keys:
            partition = partitions.get(key)
            changes[key] = None if partition is None else self._rebuild(key, partition, now_ms)
            if partition is None:
                self._set_share(key, NO_SHARE)
                self._clock_bound.discard(key)
        return "broker", {"broker": self._broker_fields(len(partitions)),
                          "partitions": ArrayUpdate(self._lines, changes)}

    def _rebuild(self, key: TopicPartition, partition: Partition, now_ms: int) -> dict:
        line = partition_line(self._metrics, partition, now_ms)
        self.lines_built += 1
        self._set_share(key, gauge_share(self._metrics, partition, line))
        end = line["log_end_offset"]
        if any(follower["fetch_offset"] < end for follower in line["followers"]):
            self._clock_bound.add(key)
        else:
            self._clock_bound.discard(key)
        return line

    def _set_share(self, key: TopicPartition, share: GaugeShare) -> None:
        old = self._shares.pop(key, NO_SHARE)
        if share is not NO_SHARE:
            self._shares[key] = share
        self._leaders += share.leader - old.leader
        self._under_replicated += share.under_replicated - old.under_replicated
        self._under_min_isr += share.under_min_isr - old.under_min_isr
        self._at_min_isr += share.at_min_isr - old.at_min_isr
        if share.follower_lag:
            self._follower_lags[key] = share.follower_lag
        else:
            self._follower_lags.pop(key, None)

    def _broker_fields(self, partition_count: int) -> dict:
        metrics, replica_manager = self._metrics, self._replica_manager
        totals = TopicCounters.total(metrics.topics.values())
        fields = {
            "bytes_in_total": totals.bytes_in, "messages_in_total": totals.messages_in,
            "bytes_out_total": totals.bytes_out, "replication_bytes_in_total": totals.replication_bytes_in,
            "replication_bytes_out_total": totals.replication_bytes_out,
            "isr_shrinks_total": metrics.isr_shrinks, "isr_expands_total": metrics.isr_expands,
            "under_replicated_partitions": self._under_replicated,
            "under_min_isr_partitions": self._under_min_isr,
            "at_min_isr_partitions": self._at_min_isr,
            "leader_count": self._leaders, "partition_count": partition_count,
            "max_lag_messages": max(self._follower_lags.values(), default=0),
            "fetch_purgatory_size": replica_manager.fetch_purgatory.size,
            "produce_purgatory_size": replica_manager.produce_purgatory.size,
        }
        budget = replica_manager.log_manager.file_budget
        if budget is not None:  # every broker process has one (log.open.files.max)
            fields.update(file_budget_fields(budget))
        return fields


def file_budget_fields(budget: FileBudget) -> dict:
    """The segment files' descriptors against `log.open.files.max`; evictions count the segments that gave
    theirs back for others (each reopens on its next use: at a full budget, a cost per request)."""
    return {"open_segment_files": budget.open_files, "open_segment_files_max": budget.max_open_files,
            "segment_file_evictions_total": budget.evictions}
