"""A crash at each step of the cleaner's segment swap (Kafka's .cleaned -> .swap -> final protocol): the
crash is a rename that fails, injected through the segment file ops, after which the process is abandoned
and the log dir reopened as after SIGKILL. Before the log file's `.swap` rename the cleaning is undone;
after it, it is completed. Either way the log is whole: the same latest value per key, a subset of the
records at their original offsets, valid batches and indexes, and no temporary file left."""

import errno

import pytest

from replog.chaos.log_verifier import verify_partition
from replog.log.cleaner import clean_log
from replog.log.cleaner_manager import LogCleanerManager
from replog.log.cleaner_rules import OffsetMap
from replog.log.config import LogConfig
from replog.log.log_manager import LogManager
from replog.log.segment_files import SegmentFileOps
from replog.log.segment_swap import commit_cleaned
from replog.protocol.records import build_batch, decode_records, iter_batches

CONFIG = LogConfig(segment_bytes=700, index_interval_bytes=64, segment_index_bytes=4096,
                   cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)
RENAMES_PER_SWAP = 6  # three files to .swap, three to their real names


class CrashOnRename(SegmentFileOps):
    """Renames succeed `allowed` times; then the process 'dies' (the rename raises, nothing after runs)."""

    def __init__(self, allowed: int) -> None:
        self.allowed = allowed

    def rename(self, source, target) -> None:
        if self.allowed == 0:
            raise OSError(errno.EIO, "simulated crash before this rename")
        self.allowed -= 1
        super().rename(source, target)


def _fill(log_manager: LogManager) -> None:
    log = log_manager.get_or_create_log("t", 0, CONFIG)
    for round_ in range(40):
        records = [(b"k%d" % key, b"v%d-%d" % (key, round_), [], 5000) for key in range(4)]
        log.append_as_leader(memoryview(bytearray(build_batch(records))), leader_epoch=1)
    log.update_high_watermark(log.log_end_offset)


def _contents(log) -> list[tuple[int, bytes, bytes]]:
    records, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, max_bytes=1 << 20, upper_bound=log.log_end_offset).slice.read_bytes()
        for batch in iter_batches(data):
            records += [(r.offset, r.key, r.value) for r in decode_records(batch)]
            offset = batch.next_offset
    return records


def _latest(records):
    return {key: value for _, key, value in records}


def _crash_and_reopen(tmp_path, log_manager: LogManager) -> LogManager:
    log_manager.release_locks()  # the kernel drops a dead process's locks; its files stay as they are
    return LogManager([tmp_path], CONFIG, clock_ms=lambda: 10_000)


def _assert_whole(tmp_path, log, before) -> None:
    after = _contents(log)
    assert set(after) <= set(before)
    assert _latest(after) == _latest(before)
    assert [r[0] for r in after] == sorted({r[0] for r in after})
    assert verify_partition(log.directory, compacted=True).problems == []
    assert not [p.name for p in log.directory.iterdir() if p.suffix in (".cleaned", ".swap")]


@pytest.mark.parametrize("renames_before_crash", range(RENAMES_PER_SWAP + 1))
def test_a_crash_at_each_rename_of_the_swap_recovers_a_whole_log(tmp_path, renames_before_crash):
    log_manager = LogManager([tmp_path], CONFIG, clock_ms=lambda: 10_000,
                             file_ops=CrashOnRename(renames_before_crash))
    _fill(log_manager)
    log = log_manager.get_log("t", 0)
    before = _contents(log)
    cleaner = LogCleanerManager(log_manager, lambda: 10_000)
    grabbed, job = cleaner.grab_filthiest()
    assert len(job.groups) >= 2  # a crash may also fall between two groups' swaps
    result = clean_log(job, OffsetMap(1 << 20))
    cleaner.complete(grabbed, job, result)
    reopened = _crash_and_reopen(tmp_path, log_manager).get_log("t", 0)
    _assert_whole(tmp_path, reopened, before)
    first_group = result.groups[0]
    # Once the log file is renamed to .swap (the third rename) the swap is committed and start-up completes it.
    committed = renames_before_crash >= 3
    expected_size = first_group.bytes_written if committed else first_group.bytes_read
    assert reopened.segments[0].size == expected_size
    if renames_before_crash == RENAMES_PER_SWAP:  # the first group swapped; the crash hit the second one's
        assert reopened.segments[1].size == result.groups[1].bytes_read


def test_a_crash_after_the_commit_with_some_old_segments_deleted_completes_the_swap(tmp_path):
    log_manager = LogManager([tmp_path], CONFIG, clock_ms=lambda: 10_000)
    _fill(log_manager)
    log = log_manager.get_log("t", 0)
    before = _contents(log)
    cleaner = LogCleanerManager(log_manager, lambda: 10_000)
    _, job = cleaner.grab_filthiest()
    job.groups = [job.groups[0] + job.groups[1]]  # one group of several segments
    result = clean_log(job, OffsetMap(1 << 20))
    group = result.groups[0]
    assert len(group.sources) >= 2
    commit_cleaned(log.directory, group.base_offset, SegmentFileOps())
    group.sources[-1].delete()  # step 2 got as far as one old segment
    reopened = _crash_and_reopen(tmp_path, log_manager).get_log("t", 0)
    _assert_whole(tmp_path, reopened, before)
    assert reopened.segments[0].size == group.bytes_written
    assert all(reopened.segments[1].base_offset >= source.base_offset for source in group.sources)


def test_a_stale_cleaned_file_is_deleted_at_start_up(tmp_path):
    log_manager = LogManager([tmp_path], CONFIG, clock_ms=lambda: 10_000)
    _fill(log_manager)
    log = log_manager.get_log("t", 0)
    before = _contents(log)
    cleaner = LogCleanerManager(log_manager, lambda: 10_000)
    _, job = cleaner.grab_filthiest()
    clean_log(job, OffsetMap(1 << 20))  # the process dies before the swap
    assert list(log.directory.glob("*.cleaned"))
    reopened = _crash_and_reopen(tmp_path, log_manager).get_log("t", 0)
    assert _contents(reopened) == before
    _assert_whole(tmp_path, reopened, before)


def test_files_that_only_look_like_swap_files_are_left_alone(tmp_path):
    log_manager = LogManager([tmp_path], CONFIG, clock_ms=lambda: 10_000)
    _fill(log_manager)
    directory = log_manager.get_log("t", 0).directory
    before = _contents(log_manager.get_log("t", 0))
    log_manager.shutdown()
    (directory / "notes.swap").write_text("not a segment")
    reopened = LogManager([tmp_path], CONFIG, clock_ms=lambda: 10_000)
    assert _contents(reopened.get_log("t", 0)) == before
    assert (directory / "notes.swap").exists()
    reopened.shutdown()
