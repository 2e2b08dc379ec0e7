"""The broker's file budget (log.open.files.max): least-recently-used segments give their descriptors back and
reopen them on their next use, and nothing a log does (append, read, truncation, retention, flush, recovery,
the cleaner's swap) answers differently because a segment's files were closed in between."""

import os
import random
import uuid

import pytest

from replog.log.cleaner import clean_log
from replog.log.cleaner_manager import LogCleanerManager
from replog.log.cleaner_rules import OffsetMap
from replog.log.config import LogConfig
from replog.log.file_budget import MIN_OPEN_FILES, FileBudget
from replog.log.log_manager import LogManager
from replog.log.partition_log import PartitionLog
from replog.protocol.records import build_batch, decode_records, iter_batches

SMALL = LogConfig(segment_bytes=600, index_interval_bytes=100, segment_index_bytes=4096)
NOW_MS = 10_000_000


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _batch(index: int, key: bytes | None = None) -> memoryview:
    records = [(key, b"value-%d-%d" % (index, i), [], NOW_MS - 10_000 + index) for i in range(2)]
    return memoryview(bytearray(build_batch(records)))


def _read_all(log: PartitionLog) -> list[tuple[int, bytes | None, bytes]]:
    found = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, max_bytes=1 << 20, upper_bound=log.log_end_offset)
        assert result.slice is not None
        for batch in iter_batches(result.slice.read_bytes()):
            found += [(r.offset, r.key, r.value) for r in decode_records(batch) if r.offset >= offset]
            offset = batch.next_offset
    return found


class Holder:
    def __init__(self, name: str, released: list[str]) -> None:
        self.name = name
        self._released = released

    def release_file_handles(self) -> None:
        self._released.append(self.name)


def test_the_least_recently_used_holders_are_evicted_until_the_budget_is_met():
    released: list[str] = []
    budget = FileBudget(MIN_OPEN_FILES)
    a, b, c = (Holder(name, released) for name in "abc")
    budget.opened(a, 30)
    budget.opened(b, 30)
    budget.used(a)  # b is now the least recently used
    budget.opened(c, 10)
    assert (released, budget.open_files, budget.holders) == (["b"], 40, 2)
    budget.opened(c, 30)  # 70 > 64: a goes, c (the opener) is never its own victim
    assert (released, budget.open_files) == (["b", "a"], 40)
    budget.opened(c, 100)  # alone above the budget: kept, its caller is about to use what it opened
    assert (released, budget.open_files, budget.evictions) == (["b", "a"], 140, 2)
    budget.closed(c)
    budget.closed(c)
    assert (budget.open_files, budget.holders) == (0, 0)


def test_a_budget_below_the_minimum_is_refused():
    with pytest.raises(ValueError, match="log.open.files.max"):
        FileBudget(MIN_OPEN_FILES - 1)


def test_a_log_answers_the_same_with_its_files_closed_between_every_operation(tmp_path):
    """Differential: one log keeps its files open, its twin releases every descriptor before each step."""
    rng = random.Random(18)
    clock = lambda: NOW_MS  # noqa: E731
    kept = PartitionLog.open(tmp_path / "kept" / "t-0", SMALL, clock_ms=clock, clean_shutdown=True)
    evicted = PartitionLog.open(tmp_path / "evicted" / "t-0", SMALL, clock_ms=clock, clean_shutdown=True)
    logs = (kept, evicted)
    for step in range(300):
        evicted.release_file_handles()
        assert all(segment.open_files == 0 for segment in evicted.segments)
        action = rng.random()
        if action < 0.6:
            infos = [log.append_as_leader(_batch(step), leader_epoch=step // 50) for log in logs]
            assert infos[0].first_offset == infos[1].first_offset
        elif action < 0.7 and kept.log_end_offset > kept.log_start_offset:
            offset = rng.randrange(max(kept.high_watermark, kept.log_start_offset), kept.log_end_offset + 1)
            assert [log.truncate_to(offset) for log in logs][0] is not None
        elif action < 0.8:
            offset = rng.randrange(kept.log_start_offset, kept.log_end_offset + 1)
            assert len({log.update_high_watermark(offset) for log in logs}) == 1
        elif action < 0.85:
            assert len({log.delete_retention_segments() for log in logs}) == 1
        elif action < 0.9:
            for log in logs:
                log.flush()
        else:
            timestamp = NOW_MS - 10_000 + rng.randrange(step + 1)
            assert kept.offset_for_timestamp(timestamp) == evicted.offset_for_timestamp(timestamp)
        evicted.release_file_handles()
        assert _read_all(kept) == _read_all(evicted)
        assert kept.log_end_offset == evicted.log_end_offset
    assert len(evicted.segments) > 3
    for log in logs:
        log.close()
    reopened = [PartitionLog.open(log.directory, SMALL, clock_ms=clock, clean_shutdown=True) for log in logs]
    assert _read_all(reopened[0]) == _read_all(reopened[1])
    # Crash-style recovery (no clean shutdown) rebuilds the indexes through reopened files as well.
    reopened[1].release_file_handles()
    recovered = PartitionLog.open(evicted.directory, SMALL, clock_ms=clock, clean_shutdown=False)
    assert _read_all(recovered) == _read_all(reopened[0])


def test_many_logs_under_a_small_budget_stay_within_it_and_read_back_after_a_restart(tmp_path):
    budget = FileBudget(MIN_OPEN_FILES)
    manager = LogManager([tmp_path], SMALL, clock_ms=lambda: NOW_MS, file_budget=budget)
    before = _open_fds()
    logs = [manager.get_or_create_log("t", p, SMALL, uuid.uuid4()) for p in range(60)]  # 300 fds if all open
    for round_ in range(8):
        for p, log in enumerate(logs):
            log.append_as_leader(_batch(round_ * 100 + p), leader_epoch=0)
            log.update_high_watermark(log.log_end_offset)
        assert budget.open_files <= MIN_OPEN_FILES
        assert _open_fds() - before <= MIN_OPEN_FILES
    expected = {p: _read_all(log) for p, log in enumerate(logs)}
    assert all(len(records) == 16 for records in expected.values())
    assert _open_fds() - before <= MIN_OPEN_FILES
    assert budget.evictions > 0
    manager.shutdown()

    budget = FileBudget(MIN_OPEN_FILES)
    restarted = LogManager([tmp_path], SMALL, clock_ms=lambda: NOW_MS, file_budget=budget)
    assert budget.open_files == 0  # loaded logs hold nothing until used
    assert {p: _read_all(restarted.get_log("t", p)) for p in range(60)} == expected
    assert budget.open_files <= MIN_OPEN_FILES
    restarted.shutdown()


def test_a_slice_being_sent_keeps_its_file_open_through_eviction(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", SMALL, clock_ms=lambda: NOW_MS, clean_shutdown=True)
    log.append_as_leader(_batch(1), leader_epoch=0)
    file_slice = log.read(0, max_bytes=1 << 20, upper_bound=log.log_end_offset).slice
    assert file_slice is not None
    fd = file_slice.file.fileno()
    log.release_file_handles()
    assert [r.value for batch in iter_batches(file_slice.read_bytes()) for r in decode_records(batch)] == [
        b"value-1-0", b"value-1-1"]
    os.fstat(fd)  # still open: the slice pins it
    del file_slice
    with pytest.raises(OSError):
        os.fstat(fd)  # the last holder let go: closed (no other file reused the number in between)
    log.close()


def test_the_cleaner_compacts_segments_whose_files_were_evicted(tmp_path):
    config = LogConfig(segment_bytes=600, index_interval_bytes=64, segment_index_bytes=4096,
                       cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)
    budget = FileBudget(MIN_OPEN_FILES)
    manager = LogManager([tmp_path], config, clock_ms=lambda: NOW_MS, file_budget=budget)
    log = manager.get_or_create_log("t", 0, config)
    for index in range(120):
        log.append_as_leader(_batch(index, key=b"k%d" % (index % 5)), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    log.roll()
    assert len(log.segments) > MIN_OPEN_FILES // 5
    log.release_file_handles()
    cleaner = LogCleanerManager(manager, lambda: NOW_MS)
    grabbed = cleaner.grab_filthiest()
    assert grabbed is not None
    assert cleaner.complete(grabbed[0], grabbed[1], clean_log(grabbed[1], OffsetMap(1 << 20)))
    records = _read_all(log)
    assert {key: value for _, key, value in records} == {b"k%d" % k: b"value-%d-1" % (115 + k) for k in range(5)}
    assert len(records) == 5
    assert budget.open_files <= MIN_OPEN_FILES
    manager.shutdown()
