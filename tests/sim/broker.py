"""A simulated broker: the production replication cores wired to the simulated network instead of sockets.

What runs is production code: LogManager and PartitionLog (real files, real recovery), ReplicaManager and
Partition (LeaderAndIsr application, produce, follower fetch, ISR shrink/expand, AlterPartition answers),
the fetch, OffsetForLeaderEpoch and ListOffsets handlers' read functions, and ReplicaFetcher's rounds
(`do_work`: truncate, then fetch). A round is an ordinary coroutine: it is stepped by hand (`coroutine.send`),
and each request it awaits through `SimLeaderEndpoint` leaves as a simulated message, so no event loop and no
real time are involved. Production objects are driven through their public methods only. What is restated
here is only the glue the broker process normally provides: timers (heartbeat, ISR expiry, flush), the
fetcher bookkeeping of ReplicaFetcherManager (one fetcher per leader), parked acks=all produces
(DelayedProduce), AlterPartitionManager's answer handling and retries, and the LeaderAndIsr handler's
broker-epoch rules (wait for the registration, then refuse older epochs).
Not modelled: consumers, the fetch purgatory (a leader answers every fetch at once; followers fetch again
every FETCH_INTERVAL_MS), UpdateMetadata, StopReplica, retention, controlled shutdown.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from replog.broker.alter_partition import RETRY_WHOLE_REQUEST
from replog.broker.delayed_fetch import read_all
from replog.broker.fetch_params import FetchParams, FetchPartitionParams
from replog.broker.handlers.list_offsets import list_offset
from replog.broker.handlers.offset_for_leader_epoch import epoch_end_offset
from replog.broker.partition import Partition, PendingIsrChange
from replog.broker.replica_manager import ReplicaManager
from replog.controller.registry import PartitionRegistration
from replog.fetcher.config import FetcherConfig, InitialFetchState, LeaderInfo
from replog.fetcher.leader_endpoint import (
    EpochEndOffset,
    FetchRequestPartition,
    LeaderEndpointError,
    ListedOffset,
)
from replog.fetcher.replica_fetcher import ReplicaFetcher
from replog.log.config import LogConfig
from replog.log.log_manager import LogManager
from replog.log.partition_log import PartitionLog, TopicPartition
from replog.log.segment_files import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX
from replog.protocol.control import (
    LeaderAndIsrPartitionState,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaTopicState,
)

if TYPE_CHECKING:
    from .simulation import World

# Small segments so that runs roll, truncate across and recover several segments.
LOG_CONFIG = LogConfig(segment_bytes=1_500, index_interval_bytes=200, segment_index_bytes=4_096)
MIN_INSYNC_REPLICAS = 2
REPLICA_LAG_TIME_MAX_MS = 300
HEARTBEAT_INTERVAL_MS = 60
REQUEST_TIMEOUT_MS = 100
FETCH_INTERVAL_MS = 12  # stands in for the leader parking an empty fetch (replica.fetch.wait.max.ms)
PRODUCE_TIMEOUT_MS = 400
REGISTRATION_WAIT_MS = 100  # handlers.leader_and_isr.REGISTRATION_WAIT_S, scaled like the other timeouts
FETCHER_CONFIG_FIELDS = {"max_wait_ms": FETCH_INTERVAL_MS, "backoff_ms": 30, "partition_max_bytes": 600,
                         "max_bytes": 1_200, "request_timeout_ms": REQUEST_TIMEOUT_MS}


class Call:
    """A request a fetcher round awaits: the simulator answers it with `send`, or fails it with `throw`."""

    __slots__ = ("kind", "args")

    def __init__(self, kind: str, *args: Any) -> None:
        self.kind = kind
        self.args = args

    def __await__(self):
        return (yield self)


class SimLeaderEndpoint:
    """The LeaderEndpoint protocol over simulated messages (RemoteLeaderEndpoint speaks the wire instead)."""

    async def fetch(self, partitions: dict[TopicPartition, FetchRequestPartition]) -> dict:
        # A copy, as the wire carries: the fetch plan's dict changes after the round, and a request the network
        # delays past its timeout is served later.
        return await Call("fetch", dict(partitions))

    async def offsets_for_leader_epoch(self, partitions: dict[TopicPartition, tuple[int, int]]) -> dict:
        return await Call("epochs", partitions)

    async def list_offset(self, tp: TopicPartition, current_leader_epoch: int, timestamp: int) -> ListedOffset:
        return await Call("list_offset", tp, current_leader_epoch, timestamp)

    async def close(self) -> None:
        return None


@dataclass(slots=True)
class RunningRound:
    coroutine: Coroutine
    token: int = 0  # identifies the Call being awaited; a late or duplicated answer carries an older one


@dataclass(slots=True)
class ParkedProduce:
    """An acks=all append waiting for the HW (the DelayedProduce of the real broker)."""

    partition: Partition
    first_offset: int
    last_offset: int
    deadline_ms: int
    reply: Callable[[tuple[int, int]], None]


class SimBroker:
    def __init__(self, world: World, broker_id: int, root: Path) -> None:
        self.world = world
        self.broker_id = broker_id
        self.node = f"b{broker_id}"
        self.log_dir = root / self.node
        self.incarnation = 0
        self.up = False
        self.broker_epoch = -1
        self.log_manager: LogManager | None = None
        self.replica_manager: ReplicaManager | None = None
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.rounds: dict[int, RunningRound] = {}
        self.parked: list[ParkedProduce] = []
        self.awaiting_registration: list[tuple] = []
        self.fetcher_config = FetcherConfig(replica_id=broker_id, **FETCHER_CONFIG_FIELDS)

    def __repr__(self) -> str:
        return f"<SimBroker {self.broker_id} inc={self.incarnation} up={self.up}>"

    # --------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Start a new process on the same log dir: the real LogManager recovers what is on disk."""
        assert not self.up
        self.incarnation += 1
        self.up = True
        self.broker_epoch = -1
        self.incarnation_id = uuid.UUID(int=self.world.rng.getrandbits(128))
        self.world.network.set_down(self.node, False)
        clock = self.world.clock
        self.log_manager = LogManager([self.log_dir], LOG_CONFIG, clock_ms=clock)
        self.replica_manager = ReplicaManager(
            self.broker_id, self.log_manager, LOG_CONFIG, MIN_INSYNC_REPLICAS, clock_ms=clock,
            replica_lag_time_max_ms=REPLICA_LAG_TIME_MAX_MS, fetch_purgatory_size=100,
            produce_purgatory_size=100, alter_isr=self._send_alter_partition)
        self.fetchers = {}
        self.rounds = {}
        self.parked = []
        self.awaiting_registration = []
        self._every(HEARTBEAT_INTERVAL_MS, self._heartbeat_or_register)
        self._every(REPLICA_LAG_TIME_MAX_MS // 2, self.replica_manager.maybe_shrink_isr)
        self._every(FETCH_INTERVAL_MS, self._start_idle_rounds)
        self._every_random(50, 300, self.flush)

    def crash(self, *, lose_unflushed: bool) -> dict[TopicPartition, tuple[int, int]]:
        """Stop dead. With lose_unflushed (a power loss) every log keeps what it had flushed plus a random
        part of the rest, cut anywhere, even inside a batch; otherwise (a killed process) the page cache
        survives and every written byte stays. Returns {partition: (flushed offset, LEO)} at the crash."""
        assert self.up
        self.up = False
        self.world.network.set_down(self.node, True)
        for running in self.rounds.values():
            running.coroutine.close()
        self.rounds = {}
        self.parked = []
        self.awaiting_registration = []
        at_crash = {}
        for log in self.log_manager.all_logs():
            at_crash[log.topic_partition] = (log.recovery_point, log.log_end_offset)
            flushed = log.offset_metadata_of(log.recovery_point)
            segments = [(segment.base_offset, segment.log_path, segment.size) for segment in log.segments]
            for segment in log.segments:
                segment.close()
            if lose_unflushed:
                self._cut_unflushed(flushed.segment_base_offset, flushed.relative_position, segments)
        self.log_manager.release_locks()  # the process died: the kernel dropped its flock
        self.log_manager = None
        self.replica_manager = None
        self.fetchers = {}
        return at_crash

    def _cut_unflushed(self, flushed_segment: int, flushed_position: int,
                       segments: list[tuple[int, Path, int]]) -> None:
        """Keep a random prefix of the unflushed bytes (none of them 30% of the time): what reached the disk
        before the power went. Segments left empty past the flushed one disappear with their indexes."""
        unflushed = [(base, path, size, flushed_position if base == flushed_segment else 0)
                     for base, path, size in segments if base >= flushed_segment]
        total = sum(size - start for _, _, size, start in unflushed)
        keep = 0 if self.world.rng.random() < 0.3 else self.world.rng.randint(0, total)
        for base, path, size, start in unflushed:
            kept = min(keep, size - start)
            keep -= kept
            if start + kept == 0 and base > flushed_segment:
                for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                    path.with_suffix(suffix).unlink(missing_ok=True)
            else:
                os.truncate(path, start + kept)

    def flush(self) -> None:
        """The log flusher and the checkpoint tasks, at once: fsync every log, then record recovery points
        and high watermarks (Kafka does these on separate timers; only the order matters here)."""
        for log in self.log_manager.all_logs():
            log.flush()
        self.log_manager.checkpoint_recovery_points()
        self.log_manager.checkpoint_high_watermarks()

    def _every(self, period_ms: int, action: Callable[[], object]) -> None:
        self._every_random(period_ms, period_ms, action)

    def _every_random(self, low_ms: int, high_ms: int, action: Callable[[], object]) -> None:
        incarnation = self.incarnation

        def tick() -> None:
            if self.up and self.incarnation == incarnation:
                action()
                self.world.events.after(self.world.rng.randint(low_ms, high_ms), tick)

        self.world.events.after(self.world.rng.randint(1, high_ms), tick)

    def _alive(self, incarnation: int) -> bool:
        return self.up and self.incarnation == incarnation

    # ----------------------------------------------------- controller session

    def _heartbeat_or_register(self) -> None:
        incarnation = self.incarnation
        controller = self.world.controller
        if self.broker_epoch < 0:
            def registered(epoch: int) -> None:
                if self._alive(incarnation) and epoch >= 0 and self.broker_epoch < 0:
                    self._registered(epoch)
            self.world.rpc(self.node, controller.node,
                           lambda reply: controller.register(self.broker_id, self.incarnation_id, reply), registered)
            return

        def answered(error: ErrorCode) -> None:
            if self._alive(incarnation) and error == ErrorCode.stale_broker_epoch:
                self.broker_epoch = -1  # fenced for good, or never registered: register again
        epoch = self.broker_epoch
        self.world.rpc(self.node, controller.node,
                       lambda reply: controller.heartbeat(self.broker_id, epoch, reply), answered)

    def is_stale_broker_epoch(self, broker_epoch: int) -> bool:
        """BrokerServer.is_stale_broker_epoch (Kafka's isBrokerEpochStale), over this incarnation's epoch."""
        return broker_epoch != -1 and broker_epoch < self.broker_epoch

    def leader_and_isr(self, registration: PartitionRegistration, topic_id: uuid.UUID, configs: dict[str, str],
                       broker_epoch: int, reply: Callable[[ErrorCode], None]) -> None:
        """handlers/leader_and_isr.handle: a request that arrives before this process has registered waits
        for the registration (bounded), since only then can it tell a request for an earlier process (stale)
        from one for this one."""
        if self.broker_epoch >= 0:
            reply(self._apply_leader_and_isr(registration, topic_id, configs, broker_epoch))
            return
        incarnation = self.incarnation
        waiting = (registration, topic_id, configs, broker_epoch, reply)
        self.awaiting_registration.append(waiting)

        def give_up() -> None:
            if self._alive(incarnation) and any(w is waiting for w in self.awaiting_registration):
                self.awaiting_registration = [w for w in self.awaiting_registration if w is not waiting]
                reply(ErrorCode.stale_broker_epoch)
        self.world.events.after(REGISTRATION_WAIT_MS, give_up)

    def _registered(self, epoch: int) -> None:
        self.broker_epoch = epoch
        waiting, self.awaiting_registration = self.awaiting_registration, []
        for registration, topic_id, configs, broker_epoch, reply in waiting:
            reply(self._apply_leader_and_isr(registration, topic_id, configs, broker_epoch))

    def _apply_leader_and_isr(self, registration: PartitionRegistration, topic_id: uuid.UUID,
                              configs: dict[str, str], broker_epoch: int) -> ErrorCode:
        """One partition of LeaderAndIsr, then what ReplicaFetcherManager does with the result."""
        if self.is_stale_broker_epoch(broker_epoch):
            return ErrorCode.stale_broker_epoch
        manager = self.replica_manager
        tp = TopicPartition(registration.topic, registration.partition)
        before = manager.partitions.get(tp)
        followed_before = None if before is None else (before.state.leader, before.state.leader_epoch)
        state = LeaderAndIsrPartitionState(
            registration.topic, registration.partition, 0, registration.leader, registration.leader_epoch,
            list(registration.isr), registration.partition_epoch, list(registration.replicas))
        error = manager.apply_partition_state(tp.topic, topic_id, state, {}, configs, {})
        partition = manager.partitions.get(tp)
        if error != ErrorCode.none or partition is None:
            return error
        if partition.is_leader:
            self._unfollow(tp)
        elif followed_before != (partition.state.leader, partition.state.leader_epoch):
            self._unfollow(tp)
            if partition.state.leader >= 0:
                self._follow(tp, partition)
        return error

    def stop_replica(self, registration: PartitionRegistration, broker_epoch: int,
                     reply: Callable[[ErrorCode], None]) -> None:
        """StopReplica with delete for a replica a reassignment removed (handlers/stop_replica.handle): stop
        fetching, then ReplicaManager deletes the partition and its log."""
        if self.broker_epoch < 0 or self.is_stale_broker_epoch(broker_epoch):
            reply(ErrorCode.stale_broker_epoch)
            return
        tp = TopicPartition(registration.topic, registration.partition)
        request = StopReplicaRequest(0, 0, broker_epoch, [StopReplicaTopicState(tp.topic, [
            StopReplicaPartitionState(tp.partition, registration.leader_epoch, True)])])
        self._unfollow(tp)
        error, per_partition = self.replica_manager._stop_replicas(request)
        self.world.note(f"broker {self.broker_id} stopped and deleted {tp}")
        reply(per_partition.get(tp, error))

    # ------------------------------------------------------------ follower side

    def _follow(self, tp: TopicPartition, partition: Partition) -> None:
        leader = partition.state.leader
        fetcher = self.fetchers.get(leader)
        if fetcher is None:
            fetcher = ReplicaFetcher(leader, 0, SimLeaderEndpoint(), self.fetcher_config, self.world.clock)
            self.fetchers[leader] = fetcher
        info = LeaderInfo(leader, "127.0.0.1", 9000 + leader)
        fetcher.add_partitions({tp: InitialFetchState(partition.topic_id, info, partition.leader_epoch,
                                                      partition.log)})

    def _unfollow(self, tp: TopicPartition) -> None:
        for leader, fetcher in list(self.fetchers.items()):
            fetcher.remove_partitions([tp])
            if fetcher.partition_count == 0:  # ReplicaFetcherManager retires an idle fetcher
                del self.fetchers[leader]
                running = self.rounds.pop(leader, None)
                if running is not None:
                    running.coroutine.close()

    def _start_idle_rounds(self) -> None:
        for leader, fetcher in self.fetchers.items():
            if leader not in self.rounds:
                running = RunningRound(fetcher.do_work())
                self.rounds[leader] = running
                self._advance(leader, running, None, None)

    def _advance(self, leader: int, running: RunningRound, answer: Any, failure: Exception | None) -> None:
        try:
            call = running.coroutine.throw(failure) if failure is not None else running.coroutine.send(answer)
        except StopIteration:
            del self.rounds[leader]
            return
        assert isinstance(call, Call), call
        running.token += 1
        token = running.token
        incarnation = self.incarnation

        def resume(answer: Any, failure: Exception | None) -> None:
            if self._alive(incarnation) and self.rounds.get(leader) is running and running.token == token:
                running.token += 1  # answered: a duplicate or the timeout finds it stale
                self._advance(leader, running, answer, failure)

        target = self.world.brokers[leader]
        self.world.rpc(self.node, target.node, lambda reply: target.serve(call, self.broker_id, reply),
                       lambda answer: resume(answer, None))
        self.world.events.after(REQUEST_TIMEOUT_MS,
                                lambda: resume(None, LeaderEndpointError(f"{call.kind} to {leader} timed out")))

    # -------------------------------------------------------------- leader side

    def serve(self, call: Call, replica_id: int, reply: Callable[[Any], None]) -> None:
        """Answer a follower's request with the production handlers' read functions."""
        if call.kind == "fetch":
            reply(self._serve_fetch(replica_id, call.args[0]))
        elif call.kind == "epochs":
            answers = {}
            for tp, (current_epoch, epoch) in call.args[0].items():
                found = epoch_end_offset(self.replica_manager, tp.topic, tp.partition, current_epoch, epoch)
                answers[tp] = EpochEndOffset(found["error_code"], found["leader_epoch"], found["end_offset"])
            reply(answers)
        else:
            tp, current_epoch, timestamp = call.args
            found = list_offset(self.replica_manager, tp.topic, tp.partition, timestamp, current_epoch, from_follower=True)
            reply(ListedOffset(found["error_code"], found["offset"]))

    def _serve_fetch(self, replica_id: int, partitions: dict[TopicPartition, FetchRequestPartition]) -> dict:
        params = FetchParams(replica_id, self.fetcher_config.max_wait_ms, 1, self.fetcher_config.max_bytes, [
            FetchPartitionParams(tp.topic, tp.partition, p.fetch_offset, p.current_leader_epoch,
                                 -1 if p.last_fetched_epoch is None else p.last_fetched_epoch,
                                 p.log_start_offset, p.max_bytes)
            for tp, p in partitions.items()])
        results, _, _, _ = read_all(self.replica_manager, params)
        answers = {}
        for tp, result in zip(partitions, results, strict=True):
            # On the wire the slice becomes bytes: copy it now, as the socket write would.
            records = result.records.read_bytes() if not isinstance(result.records, bytes) else result.records
            answers[tp] = dataclasses.replace(result, records=memoryview(bytearray(records)))
        return answers

    def produce(self, tp: TopicPartition, batch: bytes, reply: Callable[[tuple[int, int]], None]) -> None:
        """acks=all produce: append now, answer once the HW passes the batch (or on error / timeout)."""
        result = self.replica_manager.append_to_partition(tp.topic, tp.partition, memoryview(bytearray(batch)), -1)
        if result.error_code != ErrorCode.none:
            reply((result.error_code, -1))
            return
        partition = self.replica_manager.partitions[tp]
        self.parked.append(ParkedProduce(partition, result.info.first_offset, result.info.last_offset,
                                         self.world.clock() + PRODUCE_TIMEOUT_MS, reply))

    def complete_parked_produces(self) -> None:
        """Kafka's DelayedProduce.tryComplete: the world runs it whenever a partition's HW, leadership or ISR
        changed (the purgatory's watch keys, in effect) and when a deadline has passed."""
        waiting = []
        for parked in self.parked:
            done, error = parked.partition.check_enough_replicas_reach_offset(parked.last_offset + 1)
            if done:
                parked.reply((error, parked.first_offset))
            elif self.world.clock() >= parked.deadline_ms:
                parked.reply((ErrorCode.request_timed_out, -1))
            else:
                waiting.append(parked)
        self.parked = waiting

    # ---------------------------------------------------------- AlterPartition

    def _send_alter_partition(self, partition: Partition, change: PendingIsrChange) -> None:
        """The AlterPartitionManager: send, and send again on a lost answer while the change is pending."""
        incarnation = self.incarnation
        controller = self.world.controller
        request = {"broker_id": self.broker_id, "broker_epoch": self.broker_epoch, "topic_id": partition.topic_id,
                   "partition_index": partition.index, "leader_epoch": change.leader_epoch,
                   "new_isr": list(change.proposed_isr), "partition_epoch": change.partition_epoch}
        answered = []

        def on_answer(response: dict) -> None:
            if not self._alive(incarnation) or answered or partition.pending_isr is not change:
                return
            answered.append(True)
            if response["error_code"] in RETRY_WHOLE_REQUEST:
                self._send_alter_partition(partition, change)
                return
            answers = response["topics"][0]["partitions"] if response["topics"] else []
            if not answers:  # the whole request failed: revert, the next ISR check proposes again
                self.replica_manager.complete_isr_change(
                    partition, change, response["error_code"] or ErrorCode.unknown_server_error)
                return
            answer = answers[0]
            error = response["error_code"] if response["error_code"] != ErrorCode.none else answer["error_code"]
            self.replica_manager.complete_isr_change(
                partition, change, error, leader_epoch=answer["leader_epoch"], isr=tuple(answer["isr"]),
                partition_epoch=answer["partition_epoch"])

        def on_timeout() -> None:
            if self._alive(incarnation) and not answered and partition.pending_isr is change:
                answered.append(True)
                self._send_alter_partition(partition, change)

        self.world.rpc(self.node, controller.node, lambda reply: controller.alter_partition(request, reply),
                       on_answer)
        self.world.events.after(REQUEST_TIMEOUT_MS, on_timeout)

    # ---------------------------------------------------------------- queries

    def log_of(self, tp: TopicPartition) -> PartitionLog | None:
        """The log of a partition this process has been told about (one only on disk does not count yet)."""
        partition = self.partition_of(tp)
        return None if partition is None else partition.log

    def partition_of(self, tp: TopicPartition) -> Partition | None:
        return None if self.replica_manager is None else self.replica_manager.partitions.get(tp)
