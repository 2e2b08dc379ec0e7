"""The shell around the sans-IO GroupCoordinator (coordinator/coordinator.py): it carries out Outcomes.

- Replies complete the future of the request they answer; a JoinGroup or SyncGroup parks on its future
  until a later event (another member's join, a timer, a replicated write) answers it. Nothing polls.
- Timers go into one KeyedDeadlines (a timer replaces the earlier one with its key), served by one event-loop
  timer armed for the earliest deadline; the periodic offset expiry is one more entry there.
- Writes become one record batch appended to the group's __consumer_offsets partition through the
  ReplicaManager with acks=all; on_written runs once the HW passes it (or it fails or times out).
- Leadership of an offsets partition, as the ReplicaManager reports it, loads the partition (read from the
  log start to its end, replayed by the coordinator's loader) or unloads it.
"""

import asyncio
import itertools
import logging
from collections.abc import Callable

from kio.schema.errors import ErrorCode

from replog.coordinator.config import GroupCoordinatorConfig
from replog.coordinator.coordinator import GroupCoordinator
from replog.coordinator.outcomes import AppendTombstones, Outcome, Timer, Write
from replog.coordinator.writes import records_of
from replog.log.errors import LogError
from replog.log.partition_log import TopicPartition
from replog.protocol.primitives import DecodeError
from replog.protocol.records import CorruptRecordError, build_batch, decode_records, iter_batches
from replog.protocol.topics import OFFSETS_TOPIC

from .replica_manager import ReplicaManager
from .timer import KeyedDeadlines

log = logging.getLogger(__name__)

# Coordinator timers live: about two per member and two per group. Far above any group.max.size in use;
# past it the broker would refuse rather than grow without bound (DeadlineQueueFull).
MAX_TIMERS = 1_000_000
EXPIRY_KEY = ("offsets-expiry",)
LOAD_READ_BYTES = 1 << 20  # one read of the log while loading; the loop gets a turn between reads


class GroupCoordinatorShell:
    def __init__(self, config: GroupCoordinatorConfig, replicas: ReplicaManager,
                 clock_ms: Callable[[], int]) -> None:
        self.config = config
        self.coordinator = GroupCoordinator(config)
        self.replicas = replicas
        self.clock_ms = clock_ms
        self.timers = KeyedDeadlines(MAX_TIMERS)
        self._parked: dict[int, asyncio.Future] = {}
        self._request_ids = itertools.count(1)
        self._wakeup: asyncio.TimerHandle | None = None
        self._wakeup_deadline_ms: int | None = None
        self._leader_epochs: dict[int, int] = {}  # offsets partitions led, by the epoch they were loaded in
        self._loads: dict[int, asyncio.Task] = {}
        self._stopped = False

    # ------------------------------------------------------------ requests

    def new_request(self) -> tuple[int, asyncio.Future]:
        request_id = next(self._request_ids)
        future = asyncio.get_running_loop().create_future()
        self._parked[request_id] = future
        return request_id, future

    def apply(self, out: Outcome) -> None:
        for reply in out.replies:
            future = self._parked.pop(reply.request_id, None)
            assert future is not None, f"request {reply.request_id} answered twice or never asked"
            if not future.done():  # a client that went away leaves a cancelled future behind
                future.set_result(reply)
        for timer in out.timers:
            self.timers.set(timer.key, timer.deadline_ms, timer)
        for write in out.writes:
            self._append(write)
        self._arm()

    @property
    def now_ms(self) -> int:
        return self.clock_ms()

    # -------------------------------------------------------------- writes

    def _append(self, write: Write) -> None:
        partition = self.coordinator.partition_for(write.group_id)
        now = self.now_ms
        batch = build_batch([(key, value, [], now) for key, value in records_of(write)])
        results = self.replicas.append_records([(OFFSETS_TOPIC, partition, memoryview(bytearray(batch)))],
                                               -1, self.config.offsets_commit_timeout_ms)
        if isinstance(results, dict):
            self._written(write, partition, results)
        else:
            results.add_done_callback(lambda f: self._written(write, partition, f.result()))

    def _written(self, write: Write, partition: int, results: dict) -> None:
        error = results[(OFFSETS_TOPIC, partition)].error_code
        if error != ErrorCode.none:
            log.warning("group %r: writing to %s-%d failed: %s", write.group_id, OFFSETS_TOPIC, partition,
                        error.name)
        if not isinstance(write, AppendTombstones):
            self.apply(self.coordinator.on_written(write, error, self.now_ms))

    # -------------------------------------------------------------- timers

    def _arm(self) -> None:
        """One loop timer for the earliest deadline (the periodic expiry is always one of them)."""
        if self._stopped:
            return
        if EXPIRY_KEY not in self.timers:
            self.timers.set(EXPIRY_KEY, self.now_ms + self.config.offsets_retention_check_interval_ms, None)
        deadline = self.timers.next_deadline()
        if deadline == self._wakeup_deadline_ms:
            return
        if self._wakeup is not None:
            self._wakeup.cancel()
        loop = asyncio.get_running_loop()
        self._wakeup = loop.call_later(max(0, deadline - self.now_ms) / 1000, self._fire)
        self._wakeup_deadline_ms = deadline

    def _fire(self) -> None:
        self._wakeup = self._wakeup_deadline_ms = None
        now = self.now_ms
        for item in self.timers.pop_expired(now):
            if isinstance(item, Timer):
                self.apply(self.coordinator.on_timer(item, now))
            else:
                self.apply(self.coordinator.expire_offsets(now))
        self._arm()

    # ---------------------------------------------------------- leadership

    def on_leadership(self, key: TopicPartition, leader_epoch: int | None) -> None:
        """The ReplicaManager's report: this broker leads `key` in leader_epoch, or (None) no longer does."""
        if key.topic != OFFSETS_TOPIC or self._stopped:
            return
        partition = key.partition
        if self._leader_epochs.get(partition) == leader_epoch:
            return
        if partition in self._leader_epochs:
            self._unload(partition)
        if leader_epoch is not None:
            self._leader_epochs[partition] = leader_epoch
            self.coordinator.begin_loading(partition)
            self._loads[partition] = asyncio.get_running_loop().create_task(self._load(partition, leader_epoch))

    def _unload(self, partition: int, *, shutting_down: bool = False) -> None:
        del self._leader_epochs[partition]
        task = self._loads.pop(partition, None)
        if task is not None:
            task.cancel()
        if not shutting_down:
            log.info("unloading %s-%d: no longer its leader", OFFSETS_TOPIC, partition)
        self.apply(self.coordinator.unload(partition))

    async def _load(self, partition: int, leader_epoch: int) -> None:
        started = self.now_ms
        try:
            records = await self._read_partition(partition)
        except (LogError, OSError, CorruptRecordError, DecodeError) as e:
            log.error("loading %s-%d failed, its groups stay unavailable: %s", OFFSETS_TOPIC, partition, e)
            return
        finally:
            if self._loads.get(partition) is asyncio.current_task():
                del self._loads[partition]
        if self._leader_epochs.get(partition) != leader_epoch:
            return  # leadership moved on while reading
        try:
            self.apply(self.coordinator.finish_loading(partition, records, self.now_ms))
        except DecodeError as e:
            log.error("%s-%d holds a record that does not decode: %s", OFFSETS_TOPIC, partition, e)
            return
        log.log(logging.INFO if records else logging.DEBUG, "loaded %s-%d (%d records) in %d ms", OFFSETS_TOPIC,
                partition, len(records), self.now_ms - started)

    async def _read_partition(self, partition: int) -> list[tuple[bytes, bytes | None]]:
        """Every record from the log start to the log end offset, in order (Kafka's loadGroupsAndOffsets)."""
        hosted = self.replicas.get_partition(OFFSETS_TOPIC, partition)
        if hosted is None:
            return []
        partition_log = hosted.log
        end = partition_log.log_end_offset
        offset = partition_log.log_start_offset
        pairs: list[tuple[bytes, bytes | None]] = []
        while offset < end:
            result = partition_log.read(offset, max_bytes=LOAD_READ_BYTES, upper_bound=end, min_one_batch=True)
            if result.slice is None or result.slice.length == 0:
                break
            for batch in iter_batches(result.slice.read_bytes()):
                for record in decode_records(batch):
                    if record.offset >= offset and record.key is not None:
                        pairs.append((record.key, record.value))
                offset = max(offset, batch.header.next_offset)
            await asyncio.sleep(0)
        return pairs

    async def shutdown(self) -> None:
        """Answer everything parked with NOT_COORDINATOR (members find the next coordinator)."""
        for partition in list(self._leader_epochs):
            self._unload(partition, shutting_down=True)
        self._stopped = True
        if self._wakeup is not None:
            self._wakeup.cancel()
        self.timers.clear()
