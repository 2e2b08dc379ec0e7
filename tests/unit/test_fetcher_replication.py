"""The real ReplicaFetcher (through ReplicaFetcherManager) against a fake leader over real PartitionLogs.

Every scenario ends with the follower's log byte-identical to the leader's: same batches, offsets, log start
and epoch cache.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from kio.schema.errors import ErrorCode

from replog.fetcher.fetch_state import FetchPhase
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
    FetcherKey,
    InitialFetchState,
    LeaderInfo,
    ReplicaFetcherManager,
)
from replog.fetcher.replica_fetcher import ReplicaFetcher
from replog.log.config import LogConfig
from replog.log.partition_log import PartitionLog, TopicPartition
from replog.protocol.fetch import FetchPartitionResult
from replog.protocol.records import build_batch, iter_batches

from ..conditions import wait_until

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


@pytest.fixture
async def cluster():
    """Fake leaders by broker id and a manager whose endpoints reach them."""
    leaders: dict[int, FakeLeader] = {}
    endpoints: list[FakeLeaderEndpoint] = []

    def endpoint_factory(info: LeaderInfo, fetcher_id: int) -> FakeLeaderEndpoint:
        assert leaders[info.broker_id].info == info
        endpoints.append(leaders[info.broker_id].endpoint(CONFIG))
        return endpoints[-1]

    manager = ReplicaFetcherManager(CONFIG, endpoint_factory, clock_ms)
    yield manager, leaders
    await manager.shutdown()
    assert all(endpoint.closed for endpoint in endpoints)


def follow(leader: FakeLeader, log: PartitionLog, epoch: int, tp: TopicPartition = TP):
    return {tp: InitialFetchState(None, leader.info, epoch, log)}


# ----------------------------------------------------------------------- scenarios


async def test_fresh_follower_catches_up_over_many_rounds(tmp_path, cluster):
    manager, leaders = cluster
    leader = leaders[1] = FakeLeader(1)
    leader_log = open_log(tmp_path, "leader")
    append_as_leader(leader_log, 0, 12)
    append_as_leader(leader_log, 2, 12, tag=b"w")
    leader.lead(TP, leader_log, 2)
    assert leader_log.size_in_bytes > 5 * CONFIG.partition_max_bytes
    follower = open_log(tmp_path, "follower")

    manager.add_partitions(follow(leader, follower, 2))
    await wait_until(lambda: in_sync(follower, leader_log), what="catch-up")

    assert_identical(follower, leader_log)
    assert len(leader.calls_for("fetch", TP)) > 5
    state = manager.fetch_state(TP)
    assert (state.phase, state.fetch_offset, state.last_fetched_epoch) == (FetchPhase.FETCHING, 48, 2)

    # It keeps following: new data arrives without anything being re-added.
    append_as_leader(leader_log, 2, 3, tag=b"x")
    await wait_until(lambda: in_sync(follower, leader_log), what="new data")
    assert_identical(follower, leader_log)


async def test_kip101_divergent_tail_is_truncated_via_diverging_epoch(tmp_path, cluster):
    manager, leaders = cluster
    leader = leaders[1] = FakeLeader(1)
    leader_log = open_log(tmp_path, "leader")
    follower = open_log(tmp_path, "follower")
    append_as_leader(leader_log, 0, 5)
    copy_log(leader_log, follower, 10)
    # The follower led epoch 1 briefly and wrote an uncommitted tail nobody else has...
    append_as_leader(follower, 1, 3, tag=b"f")
    follower.maybe_update_high_watermark(10)
    # ...while the new leader, at epoch 2, wrote different data at those offsets.
    append_as_leader(leader_log, 2, 5, tag=b"L")
    leader.lead(TP, leader_log, 2)
    assert follower.log_end_offset == 16 and follower.epoch_cache.latest_epoch == 1

    manager.add_partitions(follow(leader, follower, 2))
    await wait_until(lambda: in_sync(follower, leader_log), what="convergence")

    assert_identical(follower, leader_log)
    assert leader.calls_for("epochs", TP) == []  # DivergingEpoch alone found the point


async def test_kip279_follower_that_missed_epochs_needs_several_truncation_rounds(tmp_path, cluster):
    manager, leaders = cluster
    leader = leaders[1] = FakeLeader(1)
    leader_log = open_log(tmp_path, "leader")
    follower = open_log(tmp_path, "follower")
    append_as_leader(leader_log, 0, 5)
    copy_log(leader_log, follower, 10)
    # Follower: epochs 1 and 3 it never shared. Leader: epochs 2 and 4 the follower never saw.
    append_as_leader(follower, 1, 5, tag=b"a")
    append_as_leader(follower, 3, 3, tag=b"b")
    append_as_leader(leader_log, 2, 4, tag=b"c")
    append_as_leader(leader_log, 4, 6, tag=b"d")
    leader.lead(TP, leader_log, 4)
    assert follower.epoch_cache.entries() == ((0, 0), (1, 10), (3, 20))
    assert leader_log.epoch_cache.entries() == ((0, 0), (2, 10), (4, 18))

    manager.add_partitions(follow(leader, follower, 4))
    await wait_until(lambda: in_sync(follower, leader_log), what="convergence")

    assert_identical(follower, leader_log)
    # DivergingEpoch(2, 18) cut to 20 and left the partition Truncating; OffsetForLeaderEpoch(1) then answered
    # (0, 10), and the follower cut to 10.
    assert len(leader.calls_for("epochs", TP)) >= 1


async def test_follower_without_epochs_truncates_to_its_high_watermark(tmp_path, cluster):
    manager, leaders = cluster
    leader = leaders[1] = FakeLeader(1)
    leader_log = open_log(tmp_path, "leader")
    follower = open_log(tmp_path, "follower")
    append_without_epoch(leader_log, 5)
    copy_log(leader_log, follower, 10)
    append_without_epoch(follower, 5, tag=b"x")  # beyond the HW and not on the leader
    follower.maybe_update_high_watermark(10)
    append_as_leader(leader_log, 2, 6, tag=b"y")
    leader.lead(TP, leader_log, 2)
    assert follower.epoch_cache.latest_epoch == -1

    manager.add_partitions(follow(leader, follower, 2))
    await wait_until(lambda: in_sync(follower, leader_log), what="convergence")

    assert_identical(follower, leader_log)
    assert leader.calls_for("epochs", TP) == []


async def test_out_of_range_below_leader_log_start_truncates_fully(tmp_path, cluster):
    manager, leaders = cluster
    leader = leaders[1] = FakeLeader(1)
    leader_log = open_log(tmp_path, "leader")
    follower = open_log(tmp_path, "follower")
    append_as_leader(leader_log, 0, 5)
    copy_log(leader_log, follower, 10)
    append_as_leader(leader_log, 0, 20)
    leader_log.maybe_increment_high_watermark(leader_log.log_end_offset)
    leader_log.maybe_increment_log_start_offset(30)
    leader_log.delete_retention_segments()
    leader.lead(TP, leader_log, 0)

    manager.add_partitions(follow(leader, follower, 0))
    await wait_until(lambda: in_sync(follower, leader_log), what="convergence")

    assert follower.log_start_offset == 30
    assert_identical(follower, leader_log)
    assert len(leader.calls_for("list_offsets", TP)) == 2


async def test_out_of_range_past_a_shorter_leader_truncates_to_its_end(tmp_path, cluster):
    manager, leaders = cluster
    leader = leaders[1] = FakeLeader(1)
    leader_log = open_log(tmp_path, "leader")
    follower = open_log(tmp_path, "follower")
    append_without_epoch(leader_log, 5)
    copy_log(leader_log, follower, 10)
    append_without_epoch(follower, 5, tag=b"x")
    follower.maybe_update_high_watermark(16)  # it believed more was committed than the new leader has
    leader.lead(TP, leader_log, 3)

    manager.add_partitions(follow(leader, follower, 3))
    await wait_until(lambda: follower.log_end_offset == 10, what="truncation to the leader's end")
    append_as_leader(leader_log, 3, 4, tag=b"n")
    await wait_until(lambda: in_sync(follower, leader_log), what="convergence")

    assert_identical(follower, leader_log)
    assert len(leader.calls_for("list_offsets", TP)) >= 2


@pytest.mark.parametrize("change", ["removed and re-added", "re-added at a new epoch"])
async def test_answer_for_an_older_state_is_dropped(tmp_path, change):
    leader = FakeLeader(1)
    leader_log = open_log(tmp_path, "leader")
    append_as_leader(leader_log, 1, 5)
    leader.lead(TP, leader_log, 1)
    follower = open_log(tmp_path, "follower")
    fetcher = ReplicaFetcher(1, 0, leader.endpoint(CONFIG), CONFIG, clock_ms)
    leader.gate = first_gate = asyncio.Event()
    fetcher.add_partitions(follow(leader, follower, 1))
    fetcher.start()
    try:
        await wait_until(lambda: leader.parked == 1, what="a fetch in flight")
        if change == "removed and re-added":
            fetcher.remove_partitions([TP])
            fetcher.add_partitions(follow(leader, follower, 1))
        else:
            append_as_leader(leader_log, 2, 1, tag=b"e")
            leader.lead(TP, leader_log, 2)
            fetcher.add_partitions(follow(leader, follower, 2))
        leader.gate = asyncio.Event()
        first_gate.set()
        # The next fetch is parked only once the first answer has been handled.
        await wait_until(lambda: leader.parked == 2, what="the next fetch")
        assert follower.log_end_offset == 0
        assert follower.high_watermark == 0
        assert fetcher.fetch_state(TP).fetch_offset == 0

        leader.gate.set()
        leader.gate = None
        await wait_until(lambda: in_sync(follower, leader_log), what="convergence")
        assert_identical(follower, leader_log)
    finally:
        await fetcher.stop()


async def test_leader_change_moves_the_partition_and_stops_the_idle_fetcher(tmp_path, cluster):
    manager, leaders = cluster
    old = leaders[1] = FakeLeader(1, port=9001)
    new = leaders[2] = FakeLeader(2, port=9002)
    old_log = open_log(tmp_path, "old")
    new_log = open_log(tmp_path, "new")
    follower = open_log(tmp_path, "follower")
    append_as_leader(old_log, 1, 6)
    old.lead(TP, old_log, 1)

    manager.add_partitions(follow(old, follower, 1))
    await wait_until(lambda: in_sync(follower, old_log), what="following the first leader")
    key = FetcherKey(1, manager.fetcher_id(TP))
    old_fetcher = manager.fetchers[key]

    copy_log(old_log, new_log, old_log.log_end_offset)
    append_as_leader(new_log, 2, 4, tag=b"n")
    new.lead(TP, new_log, 2)
    old.logs.clear()  # the old leader is gone
    manager.add_partitions(follow(new, follower, 2))

    assert list(manager.fetchers) == [FetcherKey(2, manager.fetcher_id(TP))]
    await manager.settle()
    assert not old_fetcher.running
    assert old_fetcher.partition_count == 0
    await wait_until(lambda: in_sync(follower, new_log), what="following the new leader")
    assert_identical(follower, new_log)


async def test_partitions_spread_over_fetchers_by_a_stable_id(tmp_path):
    config = FetcherConfig(
        replica_id=7, num_fetchers=3, max_wait_ms=10, backoff_ms=60, request_timeout_ms=1_000
    )
    leader = FakeLeader(1)
    manager = ReplicaFetcherManager(config, lambda info, fetcher_id: leader.endpoint(config), clock_ms)
    tps = [TopicPartition("t", p) for p in range(12)]
    try:
        partitions = {}
        for tp in tps:
            log = open_log(tmp_path, "leader", tp)
            append_as_leader(log, 0, 1)
            leader.lead(tp, log, 0)
            partitions.update(follow(leader, open_log(tmp_path, "follower", tp), 0, tp))
        manager.add_partitions(partitions)
        assert {key.fetcher_id for key in manager.fetchers} == {0, 1, 2}
        assert sum(f.partition_count for f in manager.fetchers.values()) == len(tps)
        assert [manager.fetcher_id(tp) for tp in tps[:4]] == [2, 2, 0, 2]  # crc32: the same in every process
        await wait_until(
            lambda: all(in_sync(p.log, leader.logs[tp]) for tp, p in partitions.items()), what="all in sync"
        )
        removed = manager.remove_partitions(tps)
        await manager.settle()
        assert set(removed) == set(tps)
        assert manager.fetchers == {}
    finally:
        await manager.shutdown()


async def test_re_adding_at_the_same_epoch_keeps_the_fetch_state(tmp_path, cluster):
    manager, leaders = cluster
    leader = leaders[1] = FakeLeader(1)
    leader_log = open_log(tmp_path, "leader")
    append_as_leader(leader_log, 0, 3)
    leader.lead(TP, leader_log, 0)
    follower = open_log(tmp_path, "follower")
    manager.add_partitions(follow(leader, follower, 0))
    await wait_until(lambda: in_sync(follower, leader_log), what="catch-up")
    before = manager.fetch_state(TP)
    manager.add_partitions(follow(leader, follower, 0))
    assert manager.fetch_state(TP) is before


async def test_retriable_errors_back_off_one_partition_while_others_go_on(tmp_path, cluster):
    manager, leaders = cluster
    leader = leaders[1] = FakeLeader(1)
    partitions = {}
    for tp in (TP, TP2):
        log = open_log(tmp_path, "leader", tp)
        append_as_leader(log, 0, 4)
        leader.lead(tp, log, 0)
        partitions.update(follow(leader, open_log(tmp_path, "follower", tp), 0, tp))
    leader.injected_errors[TP] = [ErrorCode.unknown_leader_epoch, ErrorCode.not_leader_or_follower]

    manager.add_partitions(partitions)
    await wait_until(
        lambda: all(in_sync(p.log, leader.logs[tp]) for tp, p in partitions.items()), what="sync"
    )

    for tp, initial in partitions.items():
        assert_identical(initial.log, leader.logs[tp])
    fetches = leader.calls_for("fetch", TP)
    # The two errored fetches were each followed by a pause of replica.fetch.backoff.ms...
    assert fetches[1] - fetches[0] >= CONFIG.backoff_ms / 1000 * 0.9
    assert fetches[2] - fetches[1] >= CONFIG.backoff_ms / 1000 * 0.9
    # ...during which the other partition kept fetching.
    assert any(fetches[0] < at < fetches[1] for at in leader.calls_for("fetch", TP2))


async def test_connection_failure_backs_off_every_partition_and_recovers(tmp_path, cluster):
    manager, leaders = cluster
    leader = leaders[1] = FakeLeader(1)
    partitions = {}
    for tp in (TP, TP2):
        log = open_log(tmp_path, "leader", tp)
        append_as_leader(log, 0, 4)
        leader.lead(tp, log, 0)
        partitions.update(follow(leader, open_log(tmp_path, "follower", tp), 0, tp))
    leader.failing_requests = 2

    manager.add_partitions(partitions)
    await wait_until(
        lambda: all(in_sync(p.log, leader.logs[tp]) for tp, p in partitions.items()), what="sync"
    )

    for tp, initial in partitions.items():
        assert_identical(initial.log, leader.logs[tp])
    fetches = [at for kind, at, _ in leader.calls if kind == "fetch"]
    assert fetches[1] - fetches[0] >= CONFIG.backoff_ms / 1000 * 0.9
    assert fetches[2] - fetches[1] >= CONFIG.backoff_ms / 1000 * 0.9
    assert leader.calls[0][2] == leader.calls[2][2] == frozenset({TP, TP2})


async def test_fenced_partition_waits_to_be_added_again(tmp_path, cluster):
    manager, leaders = cluster
    leader = leaders[1] = FakeLeader(1)
    leader_log = open_log(tmp_path, "leader")
    append_as_leader(leader_log, 3, 4)
    leader.lead(TP, leader_log, 3)
    follower = open_log(tmp_path, "follower")

    manager.add_partitions(follow(leader, follower, 2))  # our epoch is already stale
    await wait_until(lambda: TP in manager.failed_partitions, what="the partition to fail")
    assert manager.fetch_state(TP) is None
    assert follower.log_end_offset == 0

    manager.add_partitions(follow(leader, follower, 3))
    assert TP not in manager.failed_partitions
    await wait_until(lambda: in_sync(follower, leader_log), what="convergence")
    assert_identical(follower, leader_log)


async def test_a_bug_in_the_loop_is_not_swallowed(tmp_path):
    class BrokenEndpoint(FakeLeaderEndpoint):
        async def fetch(self, partitions):
            raise RuntimeError("bug")

    leader = FakeLeader(1)
    leader_log = open_log(tmp_path, "leader")
    leader.lead(TP, leader_log, 0)
    endpoint = BrokenEndpoint(leader, CONFIG)
    fetcher = ReplicaFetcher(1, 0, endpoint, CONFIG, clock_ms)
    fetcher.add_partitions(follow(leader, open_log(tmp_path, "follower"), 0))
    fetcher.start()
    await wait_until(lambda: not fetcher.running, what="the loop to die")
    with pytest.raises(RuntimeError, match="bug"):
        await fetcher.stop()
    assert endpoint.closed


async def test_a_leader_at_a_new_address_gets_a_new_fetcher_with_all_its_partitions(tmp_path, cluster):
    manager, leaders = cluster
    leader = leaders[1] = FakeLeader(1, port=9001)
    partitions = {}
    for tp in (TP, TP2):
        log = open_log(tmp_path, "leader", tp)
        append_as_leader(log, 0, 3)
        leader.lead(tp, log, 0)
        partitions.update(follow(leader, open_log(tmp_path, "follower", tp), 0, tp))
    manager.add_partitions(partitions)
    await wait_until(
        lambda: all(in_sync(p.log, leader.logs[tp]) for tp, p in partitions.items()), what="sync"
    )
    ((key, old_fetcher),) = manager.fetchers.items()

    leader.info = LeaderInfo(1, "127.0.0.1", 9003)  # restarted on another port
    manager.add_partitions(follow(leader, partitions[TP].log, 0, TP))
    await manager.settle()

    new_fetcher = manager.fetchers[key]
    assert new_fetcher is not old_fetcher and not old_fetcher.running
    assert new_fetcher.partition_count == 2  # TP2 moved along
    for tp in (TP, TP2):
        append_as_leader(leader.logs[tp], 0, 2, tag=b"z")
    await wait_until(
        lambda: all(in_sync(p.log, leader.logs[tp]) for tp, p in partitions.items()), what="sync"
    )
    for tp, initial in partitions.items():
        assert_identical(initial.log, leader.logs[tp])
