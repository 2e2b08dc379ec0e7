"""A fetcher appends each answer inline, on the event loop: one write per partition per answer, in the
leader's order, and a write that fails midway fails only its partition and leaves its log whole."""

from __future__ import annotations

import errno
import os
import threading

from replog.log.partition_log import PartitionLog, TopicPartition
from replog.log.segment_files import SegmentFileOps

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
    log_bytes,
    open_log,
)


class CountingDisk(SegmentFileOps):
    """Counts segment write calls by (thread name, partition directory, bytes asked); the writes into one
    partition's directory can fail as a nearly full disk does: half the bytes are taken, then ENOSPC."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, str, int]] = []
        self.failing_dir: str | None = None
        self._torn = False

    def write(self, fd, data):
        directory = os.path.dirname(os.readlink(f"/proc/self/fd/{fd}"))
        self.writes.append((threading.current_thread().name, os.path.basename(directory), len(data)))
        if self.failing_dir is None or directory != self.failing_dir:
            return super().write(fd, data)
        if self._torn:
            raise OSError(errno.ENOSPC, "injected: disk full")
        self._torn = True
        return super().write(fd, data[: len(data) // 2])

    def bytes_asked(self, tp: TopicPartition) -> int:
        return sum(size for _, directory, size in self.writes if directory == f"{tp.topic}-{tp.partition}")

    def writes_of(self, tp: TopicPartition) -> int:
        return sum(1 for _, directory, _ in self.writes if directory == f"{tp.topic}-{tp.partition}")


def open_follower_log(tmp_path, disk: CountingDisk, tp: TopicPartition) -> PartitionLog:
    return PartitionLog.open(tmp_path / "follower" / f"{tp.topic}-{tp.partition}", SMALL, clock_ms=clock_ms,
                             clean_shutdown=True, file_ops=disk)  # fmt: skip


def leader_with_backlogs(tmp_path) -> tuple[FakeLeader, dict[TopicPartition, PartitionLog]]:
    leader = FakeLeader(1)
    logs = {}
    for tp in (TP, TP2):
        logs[tp] = open_log(tmp_path, "leader", tp)
        append_as_leader(logs[tp], 1, 12, tag=tp.partition.to_bytes(1, "big"))
        leader.lead(tp, logs[tp], 1)
        assert logs[tp].size_in_bytes > 3 * CONFIG.partition_max_bytes  # several answers each
    return leader, logs


def segment_file_bytes(log: PartitionLog) -> int:
    return sum(path.stat().st_size for path in log.directory.glob("*.log"))


async def test_each_answer_is_one_write_per_partition_on_the_event_loop(tmp_path, cluster):
    manager, leaders = cluster
    leaders[1], leader_logs = leader_with_backlogs(tmp_path)
    disk = CountingDisk()
    followers = {tp: open_follower_log(tmp_path, disk, tp) for tp in (TP, TP2)}

    manager.add_partitions(follow(leaders[1], followers[TP], 1, TP) | follow(leaders[1], followers[TP2], 1, TP2))
    await wait_until(lambda: all(in_sync(followers[tp], leader_logs[tp]) for tp in (TP, TP2)), what="catch-up")

    for tp in (TP, TP2):
        assert_identical(followers[tp], leader_logs[tp])  # every batch, in the leader's order
        assert disk.bytes_asked(tp) == leader_logs[tp].size_in_bytes  # each byte written once
        # One write per answer that carried records: the fetches that found nothing new wrote nothing.
        assert 3 < disk.writes_of(tp) <= len(leaders[1].calls_for("fetch", tp))
    assert {thread for thread, _, _ in disk.writes} == {threading.current_thread().name}  # the loop's


async def test_a_write_failing_midway_fails_its_partition_and_leaves_its_log_whole(tmp_path, cluster):
    manager, leaders = cluster
    leaders[1], leader_logs = leader_with_backlogs(tmp_path)
    disk = CountingDisk()
    followers = {tp: open_follower_log(tmp_path, disk, tp) for tp in (TP, TP2)}
    failing = followers[TP]
    # The first answer is appended; every later write into TP's log tears and fails.
    failing.append_as_follower(memoryview(bytearray(leader_logs[TP].read(
        0, max_bytes=CONFIG.partition_max_bytes, upper_bound=leader_logs[TP].log_end_offset).slice.read_bytes())))
    appended = failing.log_end_offset
    disk.failing_dir = str(failing.directory)

    manager.add_partitions(follow(leaders[1], failing, 1, TP) | follow(leaders[1], followers[TP2], 1, TP2))
    await wait_until(lambda: TP in manager.failed_partitions, what="the failed append to fail its partition")
    await wait_until(lambda: in_sync(followers[TP2], leader_logs[TP2]), what="the other partition's catch-up")

    assert_identical(followers[TP2], leader_logs[TP2])  # its answers went on in the same rounds
    # All or nothing: the torn half of the failed write was cut off again, and no batch of it counts.
    assert failing.log_end_offset == appended
    assert segment_file_bytes(failing) == failing.size_in_bytes
    assert log_bytes(failing) == log_bytes(leader_logs[TP])[: failing.size_in_bytes]
    # The first answer's write, then the failed one's two calls (half, then ENOSPC): no fetching after that.
    assert disk.writes_of(TP) == 3
