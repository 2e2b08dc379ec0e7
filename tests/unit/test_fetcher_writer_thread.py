"""Fetchers that write their appends in a writer thread (the broker's, through ReplicaFetcherManager): one
write per answer, off the event loop, so that another leader's fetcher goes on meanwhile; a removal waits
for the write in flight, and the log is handed over with it applied."""

from __future__ import annotations

from replog.fetcher.replica_fetcher import ReplicaFetcher
from replog.log.partition_log import PartitionLog, TopicPartition

from ..conditions import wait_until
from .fetcher_fake_leader import (
    CONFIG,
    SMALL,
    TP,
    TP2,
    FakeLeader,
    append_as_leader,
    assert_identical,
    clock_ms,
    cluster,  # noqa: F401 (fixture)
    follow,
    in_sync,
    open_log,
)
from .test_follower_append import WriterThreadDisk


def open_follower_log(tmp_path, disk: WriterThreadDisk, tp: TopicPartition = TP) -> PartitionLog:
    return PartitionLog.open(tmp_path / "follower" / f"{tp.topic}-{tp.partition}", SMALL, clock_ms=clock_ms,
                             clean_shutdown=True, file_ops=disk)  # fmt: skip


def leader_with_backlog(tmp_path, broker_id: int, tp: TopicPartition) -> tuple[FakeLeader, PartitionLog]:
    leader = FakeLeader(broker_id, port=9090 + broker_id)
    log = open_log(tmp_path, f"leader{broker_id}", tp)
    append_as_leader(log, 1, 12)
    leader.lead(tp, log, 1)
    assert log.size_in_bytes > 3 * CONFIG.partition_max_bytes  # several answers
    return leader, log


async def test_each_answer_is_written_once_in_its_fetchers_thread(tmp_path, cluster):
    manager, leaders = cluster
    leader, leader_log = leader_with_backlog(tmp_path, 1, TP)
    leaders[1] = leader
    disk = WriterThreadDisk()
    follower = open_follower_log(tmp_path, disk)

    manager.add_partitions(follow(leader, follower, 1))
    await wait_until(lambda: in_sync(follower, leader_log), what="catch-up")

    assert_identical(follower, leader_log)
    assert {thread for thread, _ in disk.writes} == {"replica-writer-1-0_0"}
    assert sum(size for _, size in disk.writes) == leader_log.size_in_bytes  # each byte written once
    assert 3 < len(disk.writes) <= len(leader.calls_for("fetch", TP))  # at most one write per answer


async def test_another_leaders_fetcher_goes_on_while_a_write_is_held(tmp_path, cluster):
    manager, leaders = cluster
    leaders[1], slow_leader_log = leader_with_backlog(tmp_path, 1, TP)
    leaders[2], other_leader_log = leader_with_backlog(tmp_path, 2, TP2)
    slow_disk = WriterThreadDisk()
    slow_disk.gate.clear()
    slow = open_follower_log(tmp_path, slow_disk, TP)
    other = open_follower_log(tmp_path, WriterThreadDisk(), TP2)

    manager.add_partitions(follow(leaders[1], slow, 1, TP) | follow(leaders[2], other, 1, TP2))
    await wait_until(slow_disk.entered.is_set, what="the first write of leader 1's answer")
    # With the write on the event loop, the loop itself would be stuck at the gate.
    await wait_until(lambda: in_sync(other, other_leader_log), what="leader 2's partition caught up")
    assert slow.log_end_offset == 0 and len(slow_disk.writes) == 1
    slow_disk.gate.set()
    await wait_until(lambda: in_sync(slow, slow_leader_log), what="leader 1's partition caught up")

    assert_identical(slow, slow_leader_log)
    assert_identical(other, other_leader_log)


async def test_a_removal_waits_for_the_write_in_flight_and_hands_over_the_log_with_it(tmp_path):
    leader, leader_log = leader_with_backlog(tmp_path, 1, TP)
    disk = WriterThreadDisk()
    disk.gate.clear()
    follower = open_follower_log(tmp_path, disk)
    fetcher = ReplicaFetcher(1, 0, leader.endpoint(CONFIG), CONFIG, clock_ms, writer_thread=True)
    fetcher.add_partitions(follow(leader, follower, 1))
    fetcher.start()
    try:
        await wait_until(disk.entered.is_set, what="a write in flight")
        disk.gate.set()
        removed = fetcher.remove_partitions([TP])

        assert removed[TP].fetch_offset == 0  # the answer's append is not the fetcher's any more...
        (_, written), = disk.writes
        assert follower.size_in_bytes == written > 0  # ...but the log holds it, published
        assert follower.log_end_offset > 0

        # Whoever follows the log next starts from that end: no offset mismatch, no failed partition.
        fetcher.add_partitions(follow(leader, follower, 1))
        await wait_until(lambda: in_sync(follower, leader_log), what="catch-up after the re-add")
        assert fetcher.failed_partitions == frozenset()
        assert_identical(follower, leader_log)
    finally:
        disk.gate.set()
        await fetcher.stop()


async def test_a_partition_added_while_a_write_is_in_flight_leaves_the_written_partition_fetching(tmp_path):
    # Adding a partition cancels the round that waits for the write; the write's partition must still move
    # its fetch offset past the records its log now holds, or the next round finds the log "moved" and
    # fails it for good (seen as a follower stuck after its first answer, out of the ISR).
    leader, leader_log = leader_with_backlog(tmp_path, 1, TP)
    other_leader_log = open_log(tmp_path, "leader1-other", TP2)
    append_as_leader(other_leader_log, 1, 3)
    leader.lead(TP2, other_leader_log, 1)
    disk = WriterThreadDisk()
    disk.gate.clear()
    follower = open_follower_log(tmp_path, disk)
    other = open_follower_log(tmp_path, WriterThreadDisk(), TP2)
    fetcher = ReplicaFetcher(1, 0, leader.endpoint(CONFIG), CONFIG, clock_ms, writer_thread=True)
    fetcher.add_partitions(follow(leader, follower, 1))
    fetcher.start()
    try:
        await wait_until(disk.entered.is_set, what="a write in flight")
        fetcher.add_partitions(follow(leader, other, 1, TP2))
        disk.gate.set()
        await wait_until(lambda: in_sync(follower, leader_log) and in_sync(other, other_leader_log),
                         what="both partitions caught up")
        assert fetcher.failed_partitions == frozenset()
        assert_identical(follower, leader_log)
        assert_identical(other, other_leader_log)
    finally:
        disk.gate.set()
        await fetcher.stop()
