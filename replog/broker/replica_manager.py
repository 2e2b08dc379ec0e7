"""The broker's partitions: leadership changes, appends, reads, ISR upkeep, and delayed operations.

Handlers parse and encode; this module decides, and parks the requests that must wait (an acks=all append
in the produce purgatory, a fetch short of min_bytes in the fetch purgatory). Leadership arrives from the controller (LeaderAndIsr,
StopReplica) or, on a single node without a controller, from the local metadata image. Wake-up rule
(facts §5): any append or follower fetch wakes delayed fetches on that partition; a high-watermark move or
a leadership change also wakes delayed produces.
"""

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from kio.schema.errors import ErrorCode

from replog.fetcher.manager import InitialFetchState, LeaderInfo, ReplicaFetcherManager
from replog.fetcher.replication_quota import ReplicationQuota
from replog.log.config import LogConfig
from replog.log.errors import (
    InvalidProducerEpochError,
    LogError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    StorageError,
)
from replog.log.log_manager import LogManager
from replog.log.partition_log import AppendInfo, LogReadResult, TopicPartition
from replog.protocol.control import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    StopReplicaRequest,
)
from replog.protocol.fetch import FetchPartitionResult
from replog.protocol.records import CorruptRecordError, InvalidRecordError
from replog.server.completion import Completion

from .delayed_fetch import DelayedFetch, read_all
from .delayed_produce import DelayedProduce
from .fetch_params import FetchParams, FollowerFetch
from .fetch_sessions import FetchSession, FetchSessionCache
from .log_creation import create_missing_logs, storage_error_code
from .metadata import MetadataImage
from .metrics import BrokerMetrics
from .partition import AlterIsr, LeadershipState, Partition, PartitionError, PendingIsrChange
from .purgatory import Purgatory
from .replication_rules import is_stale_partition_state

log = logging.getLogger(__name__)

# StopReplica leader epochs that skip the epoch check (Kafka's LeaderAndIsr.EpochDuringDelete / NoEpoch).
EPOCH_DURING_DELETE = -2
NO_EPOCH = -1
# How long a LeaderAndIsr may hold the event loop before it yields once (to heartbeats, produces, fetchers).
# Far below the 2 s heartbeat interval; 10 ms slices made a 1,000-partition move 2-3x slower, every yield
# letting fetchers and consumers act on a half-applied request.
STATE_CHANGE_SLICE_S = 0.1


@dataclass(slots=True)
class PartitionAppendResult:
    error_code: ErrorCode
    info: AppendInfo | None = None
    error_message: str | None = None


AppendResults = dict[tuple[str, int], PartitionAppendResult]
FetchResults = list[FetchPartitionResult]  # in the order of the request's partitions
VALID_ACKS = (-1, 0, 1)


@dataclass(slots=True)
class PartitionReadResult:
    error_code: ErrorCode
    result: LogReadResult | None = None
    high_watermark: int = -1
    log_start_offset: int = -1
    diverging_epoch: tuple[int, int] | None = None


# Everything the log and record layers raise carries the Kafka error code it travels as.
_APPEND_ERRORS = (PartitionError, LogError, CorruptRecordError, InvalidRecordError)
_PRODUCER_STATE_ERRORS = (OutOfOrderSequenceError, InvalidProducerEpochError)


class ReplicaManager:
    def __init__(self, node_id: int, log_manager: LogManager, base_log_config: LogConfig,
                 default_min_insync_replicas: int, *, clock_ms: Callable[[], int], replica_lag_time_max_ms: int,
                 fetch_purgatory_size: int, produce_purgatory_size: int,
                 fetcher_manager: ReplicaFetcherManager | None = None, alter_isr: AlterIsr | None = None,
                 metrics: BrokerMetrics | None = None, fetch_session_cache_slots: int = 1000,
                 fetch_max_bytes: int = 57_671_680) -> None:
        self.node_id = node_id
        self.log_manager = log_manager
        self.base_log_config = base_log_config
        self.default_min_insync_replicas = default_min_insync_replicas
        self.clock_ms = clock_ms
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.fetch_max_bytes = fetch_max_bytes  # fetch.max.bytes: a consumer's response at most (KIP-541)
        self.partitions: dict[TopicPartition, Partition] = {}
        self.fetch_purgatory = Purgatory("fetch", fetch_purgatory_size)
        self.produce_purgatory = Purgatory("produce", produce_purgatory_size)
        self.delete_records_purgatory = Purgatory("deleteRecords", produce_purgatory_size)
        # Incremental fetch sessions (KIP-227) of the followers and consumers fetching from this broker.
        self.fetch_sessions = FetchSessionCache(fetch_session_cache_slots)
        self.fetcher_manager = fetcher_manager
        self._alter_isr = alter_isr or _no_followers_without_controller
        self.metrics = metrics or BrokerMetrics(node_id)
        self.controller_epoch = -1
        # Replication throttles (KIP-73), configured from the dynamic configs; the follower's is the fetchers'.
        self.leader_quota: ReplicationQuota | None = None
        self.follower_quota: ReplicationQuota | None = None
        # Told (partition, leader epoch) when this broker becomes a partition's leader, (partition, None) when
        # it stops leading one: the group coordinator loads and unloads __consumer_offsets partitions by it.
        self.leadership_listener: Callable[[TopicPartition, int | None], None] | None = None
        # Kafka's replicaStateChangeLock: LeaderAndIsr and StopReplica apply one at a time, in arrival order.
        self._state_change_lock = asyncio.Lock()
        log_manager.failure_channel.subscribe(self.handle_log_dir_failure)

    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get(TopicPartition(topic, index))

    def partition_or_error(self, topic: str, index: int) -> Partition:
        partition = self.partitions.get(TopicPartition(topic, index))
        if partition is None:
            raise PartitionError(ErrorCode.unknown_topic_or_partition)
        return partition

    # ---------------------------------------------------- log dir failure

    def handle_log_dir_failure(self, log_dir: Path, error: OSError) -> None:
        """Take every partition in the failed dir offline (Kafka's ReplicaManager.handleLogDirFailure):
        stop fetching them, answer their parked produces and fetches with KAFKA_STORAGE_ERROR, and refuse
        them from now on. Runs synchronously inside the failed operation's call stack, so the next request
        already sees the partitions offline. The broker tells the controller through its heartbeat."""
        keys = [key for key in self.log_manager.logs_in(log_dir) if key in self.partitions]
        if self.fetcher_manager is not None:
            self.fetcher_manager.remove_partitions(keys)
        for key in keys:
            self.partitions[key].mark_storage_failed()
            self._report_leadership(key, None)
            self._wake(key, hw_moved=True)
        log.error("log dir %s failed (%s): %d partitions offline", log_dir, error, len(keys))

    def _in_offline_dir(self, key: TopicPartition) -> bool:
        partition_log = self.log_manager.get_log(*key)
        return partition_log is not None and partition_log.is_offline

    def _report_disk_failure(self, key: TopicPartition, error: OSError) -> None:
        """An OSError outside PartitionLog's own guard (an epoch checkpoint write) also fails the dir."""
        partition_log = self.log_manager.get_log(*key)
        if partition_log is not None and not isinstance(error, StorageError):
            partition_log.report_disk_failure(error)

    def _get_or_create_partition(self, topic: str, index: int, topic_id, configs: dict[str, str]) -> Partition:
        key = TopicPartition(topic, index)
        partition = self.partitions.get(key)
        if partition is None:
            config = LogConfig.from_topic_configs(configs, self.base_log_config)
            partition_log = self.log_manager.get_or_create_log(topic, index, config, topic_id)
            min_isr = int(configs.get("min.insync.replicas", self.default_min_insync_replicas))
            partition = Partition(topic, index, topic_id, partition_log, self.node_id, min_isr,
                                  clock_ms=self.clock_ms, replica_lag_time_max_ms=self.replica_lag_time_max_ms,
                                  alter_isr=self._alter_isr)
            self.partitions[key] = partition
            self.metrics.track_partition(partition)
        return partition

    # ---------------------------------------------------- single node (no controller)

    def apply_metadata(self, image: MetadataImage) -> None:
        """Single-node mode: lead every partition of every topic in image; drop the ones no longer there."""
        for topic in image.topics.values():
            for index, meta in topic.partitions.items():
                assert meta.leader == self.node_id and meta.replicas == [self.node_id]
                partition = self._get_or_create_partition(topic.name, index, topic.topic_id, topic.configs)
                if partition.storage_failed:
                    continue  # offline until the broker restarts
                state = LeadershipState(meta.leader, meta.leader_epoch, meta.partition_epoch,
                                        tuple(meta.replicas), tuple(meta.isr))
                if not partition.is_leader or state.leader_epoch > partition.leader_epoch:
                    partition.make_leader(state)
                    self._report_leadership(partition.key, state.leader_epoch)
                    self._wake(partition.key, hw_moved=True)
        live = {TopicPartition(t.name, i) for t in image.topics.values() for i in t.partitions}
        for key in [k for k in self.partitions if k not in live]:
            self._delete_partition(key)

    # ---------------------------------------------------- controller requests

    async def become_leader_or_follower(self, request: LeaderAndIsrRequest) -> tuple[ErrorCode, dict]:
        """Apply a LeaderAndIsr request: (top-level error, {(topic_id, partition): error}).

        Kafka's ReplicaManager.becomeLeaderOrFollower: a stale controller epoch rejects the whole request;
        per partition, an older leader epoch (or the same one without a newer partition epoch) is stale.
        One request may carry thousands of partitions, so new logs are created in worker threads
        (log_creation.py) and the states are applied in slices that yield to the event loop: heartbeats and
        client requests keep flowing (Kafka applies it on a request handler thread while its heartbeat thread
        runs).
        """
        async with self._state_change_lock:
            if request.controller_epoch < self.controller_epoch:
                return ErrorCode.stale_controller_epoch, {}
            self.controller_epoch = request.controller_epoch
            storage_errors = await create_missing_logs(self.log_manager, self.base_log_config, self.node_id,
                                                       self.partitions, request)
            leaders = {leader.broker_id: leader for leader in request.live_leaders}
            errors: dict = {}
            new_followers: dict[TopicPartition, InitialFetchState] = {}
            slice_started = time.monotonic()
            for topic in request.topic_states:
                for state in topic.partition_states:
                    error = storage_errors.get(TopicPartition(topic.topic_name, state.partition_index))
                    if error is None:
                        error = self.apply_partition_state(
                            topic.topic_name, topic.topic_id, state, leaders, topic.configs, new_followers)
                    errors[(topic.topic_id, state.partition_index)] = error
                    if time.monotonic() - slice_started > STATE_CHANGE_SLICE_S:
                        await asyncio.sleep(0)
                        slice_started = time.monotonic()
            # A dir that failed while this request applied took its partitions offline: do not fetch them.
            new_followers = {key: state for key, state in new_followers.items()
                             if not self.partitions[key].storage_failed}
            if self.fetcher_manager is not None and new_followers:
                self.fetcher_manager.add_partitions(new_followers)
            return ErrorCode.none, errors

    def apply_partition_state(self, topic: str, topic_id, state: LeaderAndIsrPartitionState, leaders: dict,
                              configs: dict[str, str], new_followers: dict) -> ErrorCode:
        """One partition of a LeaderAndIsr: lead or follow it; the error to answer for it. A partition this
        broker starts to follow lands in new_followers, for the fetcher manager."""
        # A failed checkpoint write, no file descriptors left, a log on disk with another topic id: this
        # partition stays as it was and the controller hears why; the rest of the request still applies.
        try:
            return self._apply_partition_state(topic, topic_id, state, leaders, configs, new_followers)
        except (LogError, OSError) as e:
            log.error("%s-%d: applying leader epoch %d failed: %s", topic, state.partition_index,
                      state.leader_epoch, e)
            if isinstance(e, OSError):
                self._report_disk_failure(TopicPartition(topic, state.partition_index), e)
            return storage_error_code(e)

    def _apply_partition_state(self, topic: str, topic_id, state: LeaderAndIsrPartitionState, leaders: dict,
                               configs: dict[str, str], new_followers: dict) -> ErrorCode:
        if self.node_id not in state.replicas:
            return ErrorCode.unknown_topic_or_partition
        existing = self.partitions.get(TopicPartition(topic, state.partition_index))
        # Before the epoch checks, as Kafka does for HostedPartition.Offline: the controller learns from this
        # answer that the replica is offline, whatever the epochs it sent.
        if (existing is not None and existing.storage_failed) or self._in_offline_dir(
                TopicPartition(topic, state.partition_index)):
            return ErrorCode.kafka_storage_error
        if existing is not None and existing.topic_id != topic_id:
            return ErrorCode.inconsistent_topic_id
        if existing is not None and is_stale_partition_state(
                current_leader_epoch=existing.state.leader_epoch,
                current_partition_epoch=existing.state.partition_epoch,
                leader_epoch=state.leader_epoch, partition_epoch=state.partition_epoch):
            return ErrorCode.stale_controller_epoch
        partition = self._get_or_create_partition(topic, state.partition_index, topic_id, configs)
        leadership = LeadershipState(state.leader, state.leader_epoch, state.partition_epoch,
                                     tuple(state.replicas), tuple(state.isr))
        key = partition.key
        if state.leader == self.node_id:
            if self.fetcher_manager is not None:
                self.fetcher_manager.remove_partitions([key])
            isr_before = partition.state.isr if partition.is_leader else ()
            partition.make_leader(leadership)
            self._report_leadership(key, state.leader_epoch)
            if partition.state.isr != isr_before:
                self.metrics.record_isr_change(partition, isr_before, source="controller")
            log.info("%s-%d: leader in epoch %d, ISR %s", topic, state.partition_index, state.leader_epoch,
                     list(state.isr))
        else:
            self._report_leadership(key, None)
            if partition.make_follower(leadership) and self.fetcher_manager is not None:
                self.fetcher_manager.remove_partitions([key])
                leader = leaders.get(state.leader)
                if leader is not None:
                    new_followers[key] = InitialFetchState(
                        topic_id, LeaderInfo(leader.broker_id, leader.host_name, leader.port),
                        state.leader_epoch, partition.log)
            log.info("%s-%d: follower of %d in epoch %d", topic, state.partition_index, state.leader,
                     state.leader_epoch)
        self._wake(key, hw_moved=True)  # parked requests re-check leadership now
        return ErrorCode.none

    async def stop_replicas(self, request: StopReplicaRequest) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """StopReplica: stop following (and delete the log when asked). Kafka's ReplicaManager.stopReplicas."""
        async with self._state_change_lock:
            return self._stop_replicas(request)

    def _stop_replicas(self, request: StopReplicaRequest) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        if request.controller_epoch < self.controller_epoch:
            return ErrorCode.stale_controller_epoch, {}
        self.controller_epoch = request.controller_epoch
        errors: dict[TopicPartition, ErrorCode] = {}
        for topic in request.topic_states:
            for state in topic.partition_states:
                key = TopicPartition(topic.topic_name, state.partition_index)
                partition = self.partitions.get(key)
                if (partition is not None and state.leader_epoch not in (EPOCH_DURING_DELETE, NO_EPOCH)
                        and state.leader_epoch < partition.leader_epoch):
                    errors[key] = ErrorCode.fenced_leader_epoch
                    continue
                if self.fetcher_manager is not None:
                    self.fetcher_manager.remove_partitions([key])
                if (partition is not None and partition.storage_failed) or self._in_offline_dir(key):
                    errors[key] = ErrorCode.kafka_storage_error  # its files cannot be touched until a restart
                    continue
                if state.delete_partition:
                    self._delete_partition(key)
                elif partition is not None:
                    partition.make_offline()
                    self._report_leadership(key, None)
                    self._wake(key, hw_moved=True)
                errors[key] = ErrorCode.none
        return ErrorCode.none, errors

    def _delete_partition(self, key: TopicPartition) -> None:
        self.partitions.pop(key, None)
        self._report_leadership(key, None)
        self.metrics.forget_partition(key)
        # Also a log loaded from disk that no LeaderAndIsr claimed: a replica of a topic deleted while this
        # broker was down, which the controller deletes when the broker returns.
        self.log_manager.delete_log(*key)
        self._wake(key, hw_moved=True)  # parked requests on it answer NOT_LEADER / UNKNOWN now

    # ---------------------------------------------------------------- ISR

    def maybe_shrink_isr(self) -> int:
        """The isr-expiration task (every replica.lag.time.max.ms / 2): returns how many shrinks were sent."""
        shrinking = [p for p in list(self.partitions.values()) if p.maybe_shrink_isr()]
        for partition in shrinking:
            # A follower leaving the ISR is read by each of its fetches again (each may retry the expansion).
            self.fetch_sessions.partition_changed(partition.key)
        return len(shrinking)

    def complete_isr_change(self, partition: Partition, change: PendingIsrChange, error: ErrorCode, **state) -> None:
        """The controller answered an AlterPartition for partition."""
        if self.partitions.get(partition.key) is not partition:
            return  # deleted or recreated meanwhile
        isr_before = partition.state.isr
        self.fetch_sessions.partition_changed(partition.key)
        hw_moved = partition.complete_isr_change(change, error, **state)
        isr_changed = partition.state.isr != isr_before
        if hw_moved:
            self._wake(partition.key, hw_moved=True)
        elif isr_changed:
            # The low watermark counts the ISR's log starts: a follower leaving it may raise it.
            self.delete_records_purgatory.check_and_complete(partition.key)
        if isr_changed:
            self.metrics.record_isr_change(partition, isr_before, source="leader")
        if error == ErrorCode.none:
            log.info("%s-%d: ISR is now %s (partition epoch %d)", partition.topic, partition.index,
                     list(partition.state.isr), partition.state.partition_epoch)

    # ---------------------------------------------------------------- produce

    def append_records(self, entries: Iterable[tuple[str, int, memoryview | None]], required_acks: int,
                       timeout_ms: int) -> AppendResults | Completion:
        """Kafka's appendRecords: append each (topic, partition, records) as leader, in order. Returns the
        results by partition; for acks=all with anything appended, a Completion of them instead, resolved once
        the HW passes every appended partition's last offset, or timeout_ms passes (a DelayedProduce)."""
        if required_acks not in VALID_ACKS:
            return {(topic, index): PartitionAppendResult(ErrorCode.invalid_required_acks)
                    for topic, index, _ in entries}
        results: AppendResults = {}
        # A duplicate (a retried batch) waits like a new append: the original may not be committed yet, and
        # Kafka's ReplicaManager.appendRecords waits for the HW to pass its offsets all the same.
        appended: AppendResults = {}
        for topic, index, records in entries:
            result = results[(topic, index)] = self.append_to_partition(topic, index, records, required_acks)
            if result.info is not None:
                appended[(topic, index)] = result
        if required_acks == -1 and appended:
            op = DelayedProduce(self, timeout_ms, results, appended)
            self.produce_purgatory.try_complete_else_watch(op, appended.keys())
            return op.future
        return results

    def append_to_partition(self, topic: str, index: int, records: memoryview | None,
                            required_acks: int) -> PartitionAppendResult:
        try:
            partition = self.partition_or_error(topic, index)
            if records is None or len(records) == 0:
                raise PartitionError(ErrorCode.corrupt_message, "empty record set")
            hw_before = partition.high_watermark
            info = partition.append_as_leader(records, required_acks)
        except _APPEND_ERRORS as e:
            if isinstance(e, _PRODUCER_STATE_ERRORS):
                # Rare, and what makes an idempotent producer bump its epoch (KIP-360) and renumber what it has
                # not seen acknowledged: logged so that a duplicate found later can be traced back to it.
                log.info("%s-%d: refused %s: %s", topic, index, e.error_code.name, e)
            return PartitionAppendResult(e.error_code, error_message=str(e))
        except OSError as e:
            log.error("append to %s-%d failed: %s", topic, index, e)
            self._report_disk_failure(TopicPartition(topic, index), e)
            return PartitionAppendResult(ErrorCode.kafka_storage_error, error_message=str(e))
        if info.duplicate:
            log.info("%s-%d: a retried batch is answered with its original offsets %d..%d", topic, index,
                     info.first_offset, info.last_offset)
        self.metrics.record_produce(partition.key, info)
        self._wake(partition.key, hw_moved=partition.high_watermark != hw_before)
        return PartitionAppendResult(ErrorCode.none, info)

    # ------------------------------------------------------------------ fetch

    def fetch_messages(self, params: FetchParams,
                       session: FetchSession | None = None) -> FetchResults | Completion:
        """Kafka's fetchMessages: the read results at once if max_wait <= 0, min_bytes is met, or a partition
        has an error or a diverging epoch (facts §5); else a Completion of them, from a DelayedFetch parked on the
        partitions, woken by appends and HW moves, that reads everything afresh when it completes.

        `session`: the fetch session whose quiet partitions were not read now (nothing changed since the
        fetcher was told). A parked fetch takes in each one that changes while it waits (it joins
        params.partitions, so the results, and the partitions they answer, may then be more than were asked);
        the purgatory watches only the partitions read."""
        results, fetch_offsets, readable_bytes, respond_now = read_all(self, params)
        watches_quiet = session is not None and session.active_count < session.size
        if (params.max_wait_ms <= 0 or not (params.partitions or watches_quiet)
                or readable_bytes >= params.min_bytes or respond_now):
            return results
        op = DelayedFetch(self, params, fetch_offsets, session, just_read=True)
        self.fetch_purgatory.try_complete_else_watch(op, [(p.topic, p.partition) for p in params.partitions])
        return op.future

    def read_partition(self, topic: str, index: int, fetch_offset: int, *, current_leader_epoch: int,
                       last_fetched_epoch: int, max_bytes: int, fetcher: FollowerFetch,
                       min_one_batch: bool, update_fetch_state: bool = True) -> PartitionReadResult:
        """Read for a consumer (to the HW) or a follower (to the LEO, recording its progress).

        A follower whose last fetched epoch diverges from our log gets DivergingEpoch and no data, and its
        fetch state is not updated from that request (facts §2). Nor is it by the re-read that answers a
        parked fetch (`update_fetch_state` False): as in Kafka, where DelayedFetch.onComplete reads with
        readFromLocalLog, the fetch reported the follower's position once, when it arrived, and that
        position has not changed while it waited.
        """
        partition = self.partitions.get(TopicPartition(topic, index))
        if partition is None:
            return PartitionReadResult(ErrorCode.unknown_topic_or_partition)
        if partition.storage_failed:
            return PartitionReadResult(ErrorCode.kafka_storage_error)
        if not partition.is_leader:
            return PartitionReadResult(ErrorCode.not_leader_or_follower)
        epoch_error = partition.check_leader_epoch(current_leader_epoch)
        if epoch_error != ErrorCode.none:
            return PartitionReadResult(epoch_error)
        log_ = partition.log
        from_follower = fetcher.is_follower  # asked four times a read
        try:
            diverging = partition.diverging_epoch(fetch_offset, last_fetched_epoch)
            if diverging is not None:
                return PartitionReadResult(ErrorCode.none, None, partition.high_watermark, log_.log_start_offset,
                                           diverging_epoch=diverging)
            held_back = from_follower and self.holds_back(partition, fetcher.replica_id)  # its progress counts
            result = partition.read(fetch_offset, max_bytes=0 if held_back else max_bytes,
                                    from_follower=from_follower, min_one_batch=min_one_batch and not held_back)
        except OffsetOutOfRangeError:
            return PartitionReadResult(ErrorCode.offset_out_of_range, high_watermark=partition.high_watermark,
                                       log_start_offset=log_.log_start_offset)
        except OSError as e:
            log.error("read of %s-%d failed: %s", topic, index, e)
            self._report_disk_failure(partition.key, e)
            return PartitionReadResult(ErrorCode.kafka_storage_error)
        if from_follower and update_fetch_state:
            follower = partition.followers.get(fetcher.replica_id)
            try:
                hw_moved = partition.update_follower_fetch_state(fetcher.replica_id, fetch_offset,
                                                                 fetcher.log_start_offset, result.log_end_offset,
                                                                 result.fetch_offset_metadata)
            except PartitionError as e:
                return PartitionReadResult(e.error_code)
            if hw_moved:
                self._wake(partition.key, hw_moved=True)  # the DeleteRecords check with it
            elif follower.log_start_offset != fetcher.log_start_offset:
                # The low watermark is the smallest log start among the replicas: it can only have moved if this
                # one's did (Kafka completes delayed requests after a fetch only when the HW or the low
                # watermark moved: Partition.updateFollowerFetchState). Checked on every fetch, that was one
                # purgatory check per partition per follower fetch.
                self.delete_records_purgatory.check_and_complete(partition.key)
        if from_follower and result.slice is not None and self.leader_quota is not None:
            self.leader_quota.record_if_throttled(topic, index, result.slice.length)
        return PartitionReadResult(ErrorCode.none, result, partition.high_watermark, log_.log_start_offset)

    def holds_back(self, partition: Partition, replica_id: int) -> bool:
        """Whether the leader throttle keeps a follower's fetch of `partition` empty now (no data, KIP-73)."""
        return self.leader_quota is not None and self.leader_quota.throttles(
            partition.topic, partition.index, in_sync=replica_id in partition.state.isr)

    def _report_leadership(self, key: TopicPartition, leader_epoch: int | None) -> None:
        if self.leadership_listener is not None:
            self.leadership_listener(key, leader_epoch)

    def log_start_moved(self, key: TopicPartition) -> None:
        """DeleteRecords moved a leader's log start: fetchers are told at once, so the followers move theirs
        and the request's wait for them ends."""
        self._wake(key, hw_moved=False)

    def _wake(self, key: TopicPartition, *, hw_moved: bool) -> None:
        # Sessions first: a fetch parked on a session holding `key` quiet takes it in, then is checked for it.
        self.fetch_sessions.partition_changed(key)
        self.fetch_purgatory.check_and_complete(key)
        if hw_moved:
            self.produce_purgatory.check_and_complete(key)
            self.delete_records_purgatory.check_and_complete(key)

    async def shutdown(self) -> None:
        # A LeaderAndIsr being applied finishes first, so it cannot start fetchers after they are stopped.
        await self._state_change_lock.acquire()
        if self.fetcher_manager is not None:
            await self.fetcher_manager.shutdown()
        self.fetch_purgatory.complete_all()
        self.produce_purgatory.complete_all()
        self.delete_records_purgatory.complete_all()


def _no_followers_without_controller(partition: Partition, change: PendingIsrChange) -> None:
    raise AssertionError(f"{partition}: an ISR change needs a controller; single-node partitions have no followers")
