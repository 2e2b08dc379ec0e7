"""What a broker measures about itself: counters bumped on the request paths, and replication-health gauges
computed from the replica manager when someone looks (a Prometheus scrape, a metrics dump).

Counters are plain integers bumped once per batch or per request, never per record. Names follow Kafka's
JMX metrics as the Prometheus JMX exporter spells them (kafka.server:type=ReplicaManager,
name=UnderReplicatedPartitions becomes kafka_server_replicamanager_underreplicatedpartitions); the few with
no Kafka counterpart start with replog_. The dump format is docs/metrics-dumps.md.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from replog.log.partition_log import AppendInfo, TopicPartition
from replog.metrics.dump_writer import MetricsDumper
from replog.metrics.latency import LatencyHistogram
from replog.protocol.apis import ApiKey

from .follower_state import UNKNOWN_OFFSET
from .partition import Partition


@dataclass(slots=True)
class PartitionCounters:
    bytes_in: int = 0  # appended as leader (produce)
    messages_in: int = 0
    replication_bytes_in: int = 0  # appended as follower
    # Follower side: the leader's HW in the last fetch answer, for Kafka's FetcherLagMetrics ConsumerLag.
    leader_high_watermark: int = -1


@dataclass(slots=True)
class TopicCounters:
    bytes_in: int = 0
    messages_in: int = 0
    bytes_out: int = 0  # to consumers
    replication_bytes_in: int = 0
    replication_bytes_out: int = 0  # to followers

    @classmethod
    def total(cls, all_counters: Iterable[TopicCounters]) -> TopicCounters:
        """The broker-wide sums of topics' counters."""
        totals = cls()
        for counters in all_counters:
            totals.bytes_in += counters.bytes_in
            totals.messages_in += counters.messages_in
            totals.bytes_out += counters.bytes_out
            totals.replication_bytes_in += counters.replication_bytes_in
            totals.replication_bytes_out += counters.replication_bytes_out
        return totals


@dataclass(slots=True)
class RequestStats:
    """Kafka's RequestMetrics: local time is the handler's own work, remote time the wait after it (a delayed
    fetch or acks=all produce in purgatory, a forwarded request), total their sum."""

    requests: int = 0
    total_ms: LatencyHistogram = field(default_factory=LatencyHistogram)
    local_ms: LatencyHistogram = field(default_factory=LatencyHistogram)
    remote_ms: LatencyHistogram = field(default_factory=LatencyHistogram)


@dataclass(slots=True)
class ReplicationGauges:
    """Kafka's ReplicaManager gauges, from one pass over the partitions."""

    under_replicated_partitions: int = 0
    under_min_isr_partitions: int = 0
    at_min_isr_partitions: int = 0
    leader_count: int = 0
    partition_count: int = 0
    max_lag_messages: int = 0


class BrokerMetrics:
    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.partitions: dict[TopicPartition, PartitionCounters] = {}
        self.topics: dict[str, TopicCounters] = {}
        self.requests: dict[int, RequestStats] = {}
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.dumper: MetricsDumper | None = None  # set when dumps are on: ISR changes become event lines
        # The partitions whose dump line may have changed since the last dump, in the order first told (a dict
        # as an ordered set); None until a dump asks (track_partition), so without dumps nothing is kept.
        self.changed: dict[TopicPartition, None] | None = None

    def track_partition(self, partition: Partition) -> None:
        """Have `partition` and its log report their changes to `changed` (once the dumps track them)."""
        if self.changed is None:
            return
        mark = functools.partial(self.changed.setdefault, partition.key)
        partition.change_listener = partition.log.change_listener = mark
        mark()

    def _mark_changed(self, tp: TopicPartition) -> None:
        if self.changed is not None:
            self.changed.setdefault(tp)

    def _partition(self, tp: TopicPartition) -> PartitionCounters:
        counters = self.partitions.get(tp)
        if counters is None:
            counters = self.partitions[tp] = PartitionCounters()
        return counters

    def _topic(self, topic: str) -> TopicCounters:
        counters = self.topics.get(topic)
        if counters is None:
            counters = self.topics[topic] = TopicCounters()
        return counters

    # ------------------------------------------------------------------ recording

    def record_produce(self, tp: TopicPartition, info: AppendInfo) -> None:
        if info.duplicate:
            return
        messages = info.last_offset - info.first_offset + 1
        partition, topic = self._partition(tp), self._topic(tp.topic)
        partition.bytes_in += info.num_bytes
        partition.messages_in += messages
        topic.bytes_in += info.num_bytes
        topic.messages_in += messages
        self._mark_changed(tp)

    def record_fetch_out(self, topic: str, nbytes: int, *, to_follower: bool) -> None:
        counters = self._topic(topic)
        if to_follower:
            counters.replication_bytes_out += nbytes
        else:
            counters.bytes_out += nbytes

    def record_follower_fetch(self, tp: TopicPartition, appended_bytes: int, leader_high_watermark: int) -> None:
        partition = self._partition(tp)
        if appended_bytes or partition.leader_high_watermark != leader_high_watermark:  # its line, its lag
            self._mark_changed(tp)
        partition.replication_bytes_in += appended_bytes
        partition.leader_high_watermark = leader_high_watermark
        self._topic(tp.topic).replication_bytes_in += appended_bytes

    def record_isr_change(self, partition: Partition, isr_before: tuple[int, ...], *, source: str,
                          now_ms: int | None = None) -> None:
        """An ISR this broker leads changed: `source` is "leader" (our AlterPartition, committed) or
        "controller" (a LeaderAndIsr). Kafka's IsrShrinksPerSec / IsrExpandsPerSec count the leader's own."""
        isr_after = partition.state.isr
        if source == "leader":
            if len(isr_after) < len(isr_before):
                self.isr_shrinks += 1
            elif len(isr_after) > len(isr_before):
                self.isr_expands += 1
        if self.dumper is not None:
            self.dumper.event("isr_change", {
                "topic": partition.topic, "partition": partition.index,
                "leader_epoch": partition.state.leader_epoch, "partition_epoch": partition.state.partition_epoch,
                "isr_before": list(isr_before), "isr_after": list(isr_after), "source": source,
                "replicas": list(partition.state.replicas), "min_isr": partition.effective_min_isr(),
            }, ts_ms=now_ms)

    def forget_partition(self, tp: TopicPartition) -> None:
        """The replica left this broker: a later one starts its counters from zero (a reset to readers)."""
        self.partitions.pop(tp, None)
        self._mark_changed(tp)  # a dump drops its line

    def observe_request(self, api_key: int, local_ms: float, total_ms: float) -> None:
        stats = self.requests.get(api_key)
        if stats is None:
            stats = self.requests[api_key] = RequestStats()
        stats.requests += 1
        stats.total_ms.observe(total_ms)
        stats.local_ms.observe(local_ms)
        stats.remote_ms.observe(max(0.0, total_ms - local_ms))

    # ------------------------------------------------------------------ reading

    def replication_gauges(self, partitions: dict[TopicPartition, Partition]) -> ReplicationGauges:
        gauges = ReplicationGauges(partition_count=len(partitions))
        for tp, partition in partitions.items():
            state = partition.state
            if partition.is_leader:
                gauges.leader_count += 1
                isr_size, min_isr = len(state.isr), partition.effective_min_isr()
                gauges.under_replicated_partitions += isr_size < len(state.replicas)
                gauges.under_min_isr_partitions += isr_size < min_isr
                gauges.at_min_isr_partitions += isr_size == min_isr
            elif state.leader >= 0:
                gauges.max_lag_messages = max(gauges.max_lag_messages, self.follower_lag(tp, partition))
        return gauges

    def follower_lag(self, tp: TopicPartition, partition: Partition) -> int:
        """Kafka's FetcherLagMetrics ConsumerLag: the leader's HW in its last answer minus our LEO, >= 0."""
        counters = self.partitions.get(tp)
        if counters is None or counters.leader_high_watermark < 0:
            return 0
        return max(0, counters.leader_high_watermark - partition.log.log_end_offset)


def follower_lags(partition: Partition, now_ms: int) -> list[dict]:
    """Each follower's lag as the leader sees it (docs/metrics-dumps.md `followers`)."""
    log = partition.log
    end = log.log_end_offset
    lags = []
    for follower in partition.followers.values():
        fetched = follower.log_end_offset
        start = fetched if fetched != UNKNOWN_OFFSET else log.log_start_offset
        lag_bytes = 0 if start >= end else _bytes_from(log, follower.fetch_position, start)
        if fetched >= end:
            lag_ms = 0
        elif follower.last_caught_up_time_ms > 0:
            lag_ms = now_ms - follower.last_caught_up_time_ms
        else:  # not caught up once in this leader epoch: at least as long as the epoch has lasted
            lag_ms = now_ms - partition.leader_since_ms
        lags.append({
            "broker_id": follower.broker_id, "fetch_offset": fetched, "last_fetch_ms": follower.last_fetch_time_ms,
            "last_caught_up_ms": follower.last_caught_up_time_ms, "lag_messages": max(0, end - start),
            "lag_bytes": lag_bytes, "lag_ms": max(0, lag_ms),
        })
    return lags


def _bytes_from(log, position, offset: int) -> int:
    # The position its last fetch started at, when still in the log; else an index lookup.
    found = None if position is None else log.bytes_after(position)
    return found if found is not None else log.bytes_from(offset)


def request_name(api_key: int) -> str:
    """Kafka's request name in RequestMetrics: LEADER_AND_ISR -> LeaderAndIsr."""
    return "".join(word.capitalize() for word in ApiKey(api_key).name.split("_"))


class BrokerCollector(Collector):
    """Builds the Prometheus families at scrape time from the broker's live state."""

    def __init__(self, metrics: BrokerMetrics, replica_manager, connections=None) -> None:
        """connections: the broker's ConnectionHolder, for its SASL session counts (None: not reported)."""
        self._metrics = metrics
        self._replica_manager = replica_manager
        self._connections = connections

    def collect(self) -> Iterator:
        metrics, replica_manager = self._metrics, self._replica_manager
        partitions = replica_manager.partitions
        gauges = metrics.replication_gauges(partitions)
        for name, value, help_ in (
            ("underreplicatedpartitions", gauges.under_replicated_partitions,
             "Partitions led here whose ISR is smaller than their replica set"),
            ("underminisrpartitioncount", gauges.under_min_isr_partitions,
             "Partitions led here whose ISR is smaller than min.insync.replicas"),
            ("atminisrpartitioncount", gauges.at_min_isr_partitions,
             "Partitions led here whose ISR size equals min.insync.replicas"),
            ("leadercount", gauges.leader_count, "Partitions led by this broker"),
            ("partitioncount", gauges.partition_count, "Partitions with a replica on this broker"),
        ):
            yield GaugeMetricFamily(f"kafka_server_replicamanager_{name}", help_, value=value)
        yield CounterMetricFamily("kafka_server_replicamanager_isrshrinks",
                                  "ISR shrinks this broker made as leader", value=metrics.isr_shrinks)
        yield CounterMetricFamily("kafka_server_replicamanager_isrexpands",
                                  "ISR expansions this broker made as leader", value=metrics.isr_expands)
        yield GaugeMetricFamily("kafka_server_replicafetchermanager_maxlag",
                                "Largest lag in messages of a partition this broker follows",
                                value=gauges.max_lag_messages)
        budget = replica_manager.log_manager.file_budget
        if budget is not None:  # log.open.files.max (file_budget.py): replog's own, no Kafka counterpart
            yield GaugeMetricFamily("replog_log_open_segment_files", "Descriptors the log segments hold open",
                                    value=budget.open_files)
            yield GaugeMetricFamily("replog_log_open_segment_files_max", "log.open.files.max",
                                    value=budget.max_open_files)
            yield CounterMetricFamily("replog_log_segment_file_evictions",
                                      "Segments that gave back their descriptors for others (reopened on use)",
                                      value=budget.evictions)
        yield from _topic_families(metrics)
        yield from _partition_families(metrics, partitions, replica_manager.clock_ms())
        yield from _request_families(metrics)
        purgatory = GaugeMetricFamily("kafka_server_delayedoperationpurgatory_purgatorysize",
                                      "Requests waiting in the purgatory", labels=["delayedOperation"])
        purgatory.add_metric(["Fetch"], replica_manager.fetch_purgatory.size)
        purgatory.add_metric(["Produce"], replica_manager.produce_purgatory.size)
        yield purgatory
        if self._connections is not None:  # Kafka's socket-server-metrics for KIP-368
            yield CounterMetricFamily("kafka_server_socketservermetrics_expiredconnectionskilledcount",
                                      "Connections closed for a request after their SASL session ended",
                                      value=self._connections.expired_sessions_closed)
            yield CounterMetricFamily("kafka_server_socketservermetrics_successfulreauthentication",
                                      "Successful SASL re-authentications",
                                      value=self._connections.reauthentications)


def _topic_families(metrics: BrokerMetrics) -> Iterator:
    for name, attribute, help_ in (
        ("bytesin", "bytes_in", "Record bytes produced to partitions led here"),
        ("messagesin", "messages_in", "Records produced to partitions led here"),
        ("bytesout", "bytes_out", "Record bytes sent to consumers"),
        ("replicationbytesin", "replication_bytes_in", "Record bytes appended as follower"),
        ("replicationbytesout", "replication_bytes_out", "Record bytes sent to followers"),
    ):
        family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}", help_, labels=["topic"])
        for topic, counters in metrics.topics.items():
            family.add_metric([topic], getattr(counters, attribute))
        yield family


def _partition_families(metrics: BrokerMetrics, partitions: dict[TopicPartition, Partition],
                        now_ms: int) -> Iterator:
    labels = ["topic", "partition"]
    end = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset", labels=labels)
    start = GaugeMetricFamily("kafka_log_log_logstartoffset", "Log start offset", labels=labels)
    size = GaugeMetricFamily("kafka_log_log_size", "Log size in bytes", labels=labels)
    under = GaugeMetricFamily("kafka_cluster_partition_underreplicated",
                              "1 when this broker leads the partition and its ISR is short", labels=labels)
    isr = GaugeMetricFamily("kafka_cluster_partition_insyncreplicascount", "ISR size, on the leader",
                            labels=labels)
    consumer_lag = GaugeMetricFamily("kafka_server_fetcherlagmetrics_consumerlag",
                                     "Follower side: the leader's HW minus our LEO", labels=labels)
    follower_labels = [*labels, "follower"]
    lag_messages = GaugeMetricFamily("replog_partition_follower_lag_messages",
                                     "Leader side: leader LEO minus the follower's fetch offset",
                                     labels=follower_labels)
    lag_ms = GaugeMetricFamily("replog_partition_follower_lag_ms",
                               "Leader side: time since the follower was last caught up", labels=follower_labels)
    for tp, partition in partitions.items():
        key = [tp.topic, str(tp.partition)]
        end.add_metric(key, partition.log.log_end_offset)
        start.add_metric(key, partition.log.log_start_offset)
        size.add_metric(key, partition.log.size_in_bytes)
        if partition.is_leader:
            under.add_metric(key, int(len(partition.state.isr) < len(partition.state.replicas)))
            isr.add_metric(key, len(partition.state.isr))
            for lag in follower_lags(partition, now_ms):
                follower_key = [*key, str(lag["broker_id"])]
                lag_messages.add_metric(follower_key, lag["lag_messages"])
                lag_ms.add_metric(follower_key, lag["lag_ms"])
        elif partition.state.leader >= 0:
            consumer_lag.add_metric(key, metrics.follower_lag(tp, partition))
    yield from (end, start, size, under, isr, consumer_lag, lag_messages, lag_ms)


def _request_families(metrics: BrokerMetrics) -> Iterator:
    requests = CounterMetricFamily("kafka_network_requestmetrics_requests", "Requests handled",
                                   labels=["request"])
    histograms = {
        part: HistogramMetricFamily(f"kafka_network_requestmetrics_{part}timems",
                                    f"Request {part} time in ms", labels=["request"])
        for part in ("total", "local", "remote")
    }
    for api_key, stats in sorted(metrics.requests.items()):
        name = [request_name(api_key)]
        requests.add_metric(name, stats.requests)
        for part, histogram in (("total", stats.total_ms), ("local", stats.local_ms), ("remote", stats.remote_ms)):
            histograms[part].add_metric(name, histogram.cumulative_buckets(), histogram.sum_ms)
    yield requests
    yield from histograms.values()
