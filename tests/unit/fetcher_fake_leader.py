"""A fake leader for the real ReplicaFetcher: Kafka's leader rules over real PartitionLogs, with injectable
errors, connection failures and a gate that holds fetch answers back; and helpers to build, copy and compare
the logs of a leader and its follower."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from kio.schema.errors import ErrorCode

from replog.fetcher.leader_endpoint import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    EpochEndOffset,
    FetchRequestPartition,
    LeaderEndpointError,
    ListedOffset,
)
from replog.fetcher.manager import (
    FetcherConfig,
    InitialFetchState,
    LeaderInfo,
    ReplicaFetcherManager,
)
from replog.fetcher.replication_quota import ReplicationQuota
from replog.log.config import LogConfig
from replog.log.partition_log import PartitionLog, TopicPartition
from replog.protocol.fetch import FetchPartitionResult
from replog.protocol.records import build_batch, iter_batches

SMALL = LogConfig(segment_bytes=600, index_interval_bytes=100, segment_index_bytes=4096)
CONFIG = FetcherConfig(
    replica_id=7,
    max_wait_ms=10,
    backoff_ms=60,
    partition_max_bytes=400,
    max_bytes=2_000,
    request_timeout_ms=1_000,
)
TP = TopicPartition("events", 0)
TP2 = TopicPartition("events", 1)


def clock_ms() -> int:
    return int(time.monotonic() * 1000)


def open_log(path, broker: str, tp: TopicPartition = TP) -> PartitionLog:
    return PartitionLog.open(
        path / broker / f"{tp.topic}-{tp.partition}", SMALL, clock_ms=clock_ms, clean_shutdown=True
    )


def batch(count: int = 2, *, tag: bytes = b"v", base_offset: int = 0, epoch: int = -1) -> memoryview:
    records = [(None, tag * 30 + b"%d" % i, [], 1_000 + i) for i in range(count)]
    return memoryview(bytearray(build_batch(records, base_offset=base_offset, partition_leader_epoch=epoch)))


def append_as_leader(
    log: PartitionLog, epoch: int, batches: int, *, tag: bytes = b"v", count: int = 2
) -> None:
    """What a leader at `epoch` does: an epoch entry at its LEO when it takes over, then stamped appends."""
    log.epoch_cache.assign(epoch, log.log_end_offset)
    for _ in range(batches):
        log.append_as_leader(batch(count, tag=tag), leader_epoch=epoch)


def append_without_epoch(log: PartitionLog, batches: int, *, tag: bytes = b"v", count: int = 2) -> None:
    """Old-format data: batches with no partition leader epoch, so no epoch cache entries."""
    for _ in range(batches):
        log.append_as_follower(batch(count, tag=tag, base_offset=log.log_end_offset))


def copy_log(source: PartitionLog, target: PartitionLog, upto: int) -> None:
    """Give `target` exactly `source`'s batches below `upto` (a batch boundary)."""
    for b in batches_of(source):
        if b.base_offset >= target.log_end_offset and b.last_offset < upto:
            target.append_as_follower(memoryview(bytearray(b.buffer)))
    assert target.log_end_offset == upto


def batches_of(log: PartitionLog) -> list:
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        read = log.read(offset, max_bytes=1 << 20, upper_bound=log.log_end_offset)
        assert read.slice is not None
        found = list(iter_batches(read.slice.read_bytes()))
        out += [b for b in found if b.last_offset >= log.log_start_offset]
        offset = found[-1].next_offset
    return out


def log_bytes(log: PartitionLog) -> bytes:
    return b"".join(bytes(b.buffer) for b in batches_of(log))


def in_sync(follower: PartitionLog, leader: PartitionLog) -> bool:
    return (
        follower.log_end_offset == leader.log_end_offset and follower.high_watermark == leader.log_end_offset
    )


def assert_identical(follower: PartitionLog, leader: PartitionLog) -> None:
    assert follower.log_end_offset == leader.log_end_offset
    assert follower.log_start_offset == leader.log_start_offset
    assert log_bytes(follower) == log_bytes(leader)
    assert follower.epoch_cache.entries() == leader.epoch_cache.entries()
    assert follower.high_watermark <= follower.log_end_offset


# ----------------------------------------------------------------- fake leader


class FakeLeader:
    """One broker's leader side of replication over real logs, with Kafka's leader rules (facts section 2)."""

    def __init__(self, broker_id: int, port: int = 9092) -> None:
        self.info = LeaderInfo(broker_id, "127.0.0.1", port)
        self.logs: dict[TopicPartition, PartitionLog] = {}
        self.epochs: dict[TopicPartition, int] = {}
        self.injected_errors: dict[TopicPartition, list[int]] = {}
        self.failing_requests = 0
        self.calls: list[tuple[str, float, frozenset[TopicPartition]]] = []
        self.gate: asyncio.Event | None = None  # when set, fetch answers wait for it to open
        self.parked = 0

    def lead(self, tp: TopicPartition, log: PartitionLog, epoch: int) -> None:
        self.logs[tp] = log
        self.epochs[tp] = epoch

    def endpoint(self, config: FetcherConfig) -> FakeLeaderEndpoint:
        return FakeLeaderEndpoint(self, config)

    def calls_for(self, kind: str, tp: TopicPartition) -> list[float]:
        return [at for name, at, tps in self.calls if name == kind and tp in tps]

    def record(self, kind: str, tps) -> None:
        self.calls.append((kind, time.monotonic(), frozenset(tps)))
        if self.failing_requests:
            self.failing_requests -= 1
            raise LeaderEndpointError("injected connection failure")

    def epoch_error(self, tp: TopicPartition, current_leader_epoch: int) -> int:
        if tp not in self.logs:
            return ErrorCode.unknown_topic_or_partition
        if current_leader_epoch < self.epochs[tp]:
            return ErrorCode.fenced_leader_epoch
        if current_leader_epoch > self.epochs[tp]:
            return ErrorCode.unknown_leader_epoch
        return ErrorCode.none

    def read(
        self, tp: TopicPartition, p: FetchRequestPartition, budget: int, first: bool
    ) -> FetchPartitionResult:
        injected = self.injected_errors.get(tp)
        if injected:
            return FetchPartitionResult(tp.partition, injected.pop(0))
        error = self.epoch_error(tp, p.current_leader_epoch)
        if error != ErrorCode.none:
            return FetchPartitionResult(tp.partition, error)
        log = self.logs[tp]
        out_of_range = FetchPartitionResult(tp.partition, ErrorCode.offset_out_of_range)
        if p.last_fetched_epoch is not None:
            epoch, end_offset = log.epoch_cache.end_offset_for(p.last_fetched_epoch, log.log_end_offset)
            if end_offset < 0 or p.fetch_offset < log.log_start_offset:
                return out_of_range
            if epoch < p.last_fetched_epoch or end_offset < p.fetch_offset:
                return FetchPartitionResult(
                    tp.partition,
                    high_watermark=log.high_watermark,
                    log_start_offset=log.log_start_offset,
                    diverging_epoch=(epoch, end_offset),
                )
        if not log.log_start_offset <= p.fetch_offset <= log.log_end_offset:
            return out_of_range
        # The ISR is this leader and the follower, whose LEO is its fetch offset.
        log.maybe_increment_high_watermark(min(p.fetch_offset, log.log_end_offset))
        read = log.read(
            p.fetch_offset,
            max_bytes=min(p.max_bytes, budget),
            upper_bound=log.log_end_offset,
            min_one_batch=first,
        )
        records = None if read.slice is None else memoryview(bytearray(read.slice.read_bytes()))
        return FetchPartitionResult(
            tp.partition,
            high_watermark=log.high_watermark,
            log_start_offset=log.log_start_offset,
            records=records,
        )


class FakeLeaderEndpoint:
    def __init__(self, leader: FakeLeader, config: FetcherConfig) -> None:
        self.leader = leader
        self.config = config
        self.closed = False

    async def fetch(self, partitions: dict[TopicPartition, FetchRequestPartition]):
        self.leader.record("fetch", partitions)
        budget = self.config.max_bytes
        results = {}
        for tp, p in partitions.items():
            results[tp] = self.leader.read(tp, p, budget, first=not results)
            budget -= len(results[tp].records or b"")
        if self.leader.gate is not None:
            self.leader.parked += 1
            await self.leader.gate.wait()
        if not any(r.records or r.error_code or r.diverging_epoch for r in results.values()):
            await asyncio.sleep(self.config.max_wait_ms / 1000)  # a parked DelayedFetch that timed out
        return results

    async def offsets_for_leader_epoch(self, partitions: dict[TopicPartition, tuple[int, int]]):
        self.leader.record("epochs", partitions)
        answers = {}
        for tp, (current_leader_epoch, epoch) in partitions.items():
            error = self.leader.epoch_error(tp, current_leader_epoch)
            if error != ErrorCode.none:
                answers[tp] = EpochEndOffset(error, -1, -1)
                continue
            log = self.leader.logs[tp]
            answers[tp] = EpochEndOffset(0, *log.epoch_cache.end_offset_for(epoch, log.log_end_offset))
        return answers

    async def list_offset(
        self, tp: TopicPartition, current_leader_epoch: int, timestamp: int
    ) -> ListedOffset:
        self.leader.record("list_offsets", [tp])
        error = self.leader.epoch_error(tp, current_leader_epoch)
        if error != ErrorCode.none:
            return ListedOffset(error, -1)
        log = self.leader.logs[tp]
        assert timestamp in (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP)
        return ListedOffset(0, log.log_end_offset if timestamp == LATEST_TIMESTAMP else log.log_start_offset)

    async def close(self) -> None:
        self.closed = True


@asynccontextmanager
async def fetchers_with_fake_leaders(
    config: FetcherConfig = CONFIG, quota: ReplicationQuota | None = None,
) -> AsyncIterator[tuple[ReplicaFetcherManager, dict[int, FakeLeader]]]:
    """Fake leaders by broker id and a manager whose endpoints reach them; every endpoint closed at the end."""
    leaders: dict[int, FakeLeader] = {}
    endpoints: list[FakeLeaderEndpoint] = []

    def endpoint_factory(info: LeaderInfo, fetcher_id: int) -> FakeLeaderEndpoint:
        assert leaders[info.broker_id].info == info
        endpoints.append(leaders[info.broker_id].endpoint(config))
        return endpoints[-1]

    manager = ReplicaFetcherManager(config, endpoint_factory, clock_ms, quota=quota)
    yield manager, leaders
    await manager.shutdown()
    assert all(endpoint.closed for endpoint in endpoints)


def follow(leader: FakeLeader, log: PartitionLog, epoch: int, tp: TopicPartition = TP):
    return {tp: InitialFetchState(None, leader.info, epoch, log)}


def two_partitions_behind(tmp_path, leader: FakeLeader, records: int) -> dict:
    """TP and TP2 led by `leader` with `records` records each, followed from empty logs."""
    partitions = {}
    for tp in (TP, TP2):
        log = open_log(tmp_path, "leader", tp)
        append_as_leader(log, 0, records)
        leader.lead(tp, log, 0)
        partitions.update(follow(leader, open_log(tmp_path, "follower", tp), 0, tp))
    return partitions


def idle_partitions_beside_tp(tmp_path, leader: FakeLeader, manager, idle: int):
    """`idle` partitions of topic "idle" and TP, one record each, led by `leader` and followed by `manager`'s
    fetchers from empty logs: (the partitions, leader logs, follower logs)."""
    tps = [TopicPartition("idle", i) for i in range(idle)] + [TP]
    leader_logs = {tp: open_log(tmp_path, "leader", tp) for tp in tps}
    follower_logs = {tp: open_log(tmp_path, "follower", tp) for tp in tps}
    for tp in tps:
        append_as_leader(leader_logs[tp], 0, 1)
        leader.lead(tp, leader_logs[tp], 0)
    manager.add_partitions({tp: InitialFetchState(None, leader.info, 0, follower_logs[tp]) for tp in tps})
    return tps, leader_logs, follower_logs


@pytest.fixture
async def cluster():
    """(ReplicaFetcherManager, {leader id: FakeLeader}) for one test; the fetchers are stopped after it."""
    async with fetchers_with_fake_leaders() as manager_and_leaders:
        yield manager_and_leaders
