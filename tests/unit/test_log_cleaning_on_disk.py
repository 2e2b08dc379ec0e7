"""Cleaning real segments on disk: the cleaner's output, swapped into a PartitionLog, keeps the last record
of each key at its original offset (gaps between), valid CRCs and indexes (checked by the independent log
verifier), and reads, reopens and later appends work across the gaps."""

import os
import threading

import pytest

from replog.chaos.log_verifier import verify_partition
from replog.log.cleaner import CleaningAborted, clean_log
from replog.log.cleaner_manager import LogCleanerManager, write_cleaner_checkpoint
from replog.log.cleaner_rules import OffsetMap
from replog.log.config import LogConfig
from replog.log.log_manager import LogManager
from replog.log.partition_log import PartitionLog
from replog.protocol.records import Compression, InvalidRecordError, build_batch, decode_records, iter_batches

COMPACT = LogConfig(segment_bytes=1024, index_interval_bytes=64, segment_index_bytes=4096,
                    cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)
NOW_MS = 10_000_000
MAP = OffsetMap(1 << 20)


class Clock:
    def __init__(self) -> None:
        self.now = NOW_MS

    def __call__(self) -> int:
        return self.now


def _produce(log: PartitionLog, items, *, compression=Compression.NONE, producer_id=-1, ts=NOW_MS - 1000):
    """Append (key, value) pairs two records a batch."""
    for start in range(0, len(items), 2):
        records = [(key, value, [], ts) for key, value in items[start:start + 2]]
        batch = bytearray(build_batch(records, compression=compression, producer_id=producer_id,
                                      producer_epoch=0 if producer_id >= 0 else -1,
                                      base_sequence=start if producer_id >= 0 else -1))
        log.append_as_leader(memoryview(batch), leader_epoch=3)
    log.update_high_watermark(log.log_end_offset)


def _records(log: PartitionLog):
    found = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, max_bytes=1 << 20, upper_bound=log.log_end_offset)
        assert result.slice is not None
        for batch in iter_batches(result.slice.read_bytes()):
            assert batch.is_crc_valid()
            found.extend(decode_records(batch))
            offset = batch.next_offset
    return [(r.offset, r.key, r.value) for r in found]


def _manager(tmp_path, clock, config=COMPACT):
    log_manager = LogManager([tmp_path], config, clock_ms=clock)
    log = log_manager.get_or_create_log("t", 0, config)
    return log_manager, LogCleanerManager(log_manager, clock), log


def _clean_once(cleaner: LogCleanerManager) -> bool:
    grabbed = cleaner.grab_filthiest()
    if grabbed is None:
        return False
    log, job = grabbed
    if not cleaner.complete(log, job, clean_log(job, MAP)):
        return False
    write_cleaner_checkpoint(log.log_dir, cleaner.checkpoint_entries(log.log_dir))  # as LogCleaner does
    return True


def _updates(rounds: int, keys: int):
    return [(f"k{key}".encode(), f"v{key}-{round_}".encode()) for round_ in range(rounds) for key in range(keys)]


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.GZIP, Compression.LZ4, Compression.ZSTD])
def test_cleaning_keeps_the_latest_value_of_each_key_at_its_offset(tmp_path, compression):
    clock = Clock()
    log_manager, cleaner, log = _manager(tmp_path, clock)
    _produce(log, _updates(20, 7), compression=compression, producer_id=42)
    before = _records(log)
    active_base = log.active_segment.base_offset
    size_before = log.size_in_bytes
    assert _clean_once(cleaner)
    after = _records(log)
    cleaned = [r for r in after if r[0] < active_base]
    latest = {key: (offset, value) for offset, key, value in before if offset < active_base}
    assert sorted((offset, key, value) for key, (offset, value) in latest.items()) == cleaned
    assert [r for r in after if r[0] >= active_base] == [r for r in before if r[0] >= active_base]
    assert log.size_in_bytes < size_before
    offsets = [r[0] for r in after]
    assert offsets == sorted(set(offsets))
    report = verify_partition(log.directory, compacted=True)
    assert report.problems == []
    # Batches keep producer id, epoch, base sequence and leader epoch (KIP-98 state stays consistent).
    for segment in log.segments:
        for position, header in segment.batches():
            assert (header.producer_id, header.producer_epoch, header.partition_leader_epoch) == (42, 0, 3)
            assert segment.read_batch(position, header).compression == compression
    log_manager.shutdown()


def test_a_cleaned_log_reopens_reads_in_gaps_and_appends(tmp_path):
    clock = Clock()
    log_manager, cleaner, log = _manager(tmp_path, clock)
    _produce(log, _updates(10, 3))
    assert _clean_once(cleaner)
    kept = _records(log)
    # A read at an offset compacted away returns the next batch, as Kafka's.
    gap = next(offset for offset in range(log.log_end_offset) if offset not in {r[0] for r in kept})
    result = log.read(gap, max_bytes=1 << 20, upper_bound=log.log_end_offset)
    assert next(iter_batches(result.slice.read_bytes())).last_offset >= gap
    leo = log.log_end_offset
    log_manager.shutdown()
    log_manager = LogManager([tmp_path], COMPACT, clock_ms=clock)
    log = log_manager.get_log("t", 0)
    assert log.log_end_offset == leo
    assert _records(log) == kept
    _produce(log, [(b"k0", b"new")])
    assert _records(log)[-1] == (leo, b"k0", b"new")
    assert verify_partition(log.directory, compacted=True).problems == []
    log_manager.shutdown()


def test_nothing_is_cleaned_twice_and_the_checkpoint_survives_a_restart(tmp_path):
    clock = Clock()
    log_manager, cleaner, log = _manager(tmp_path, clock)
    _produce(log, _updates(10, 3))
    assert _clean_once(cleaner)
    assert not _clean_once(cleaner)  # no new dirty bytes
    log_manager.shutdown()
    log_manager = LogManager([tmp_path], COMPACT, clock_ms=clock)
    cleaner = LogCleanerManager(log_manager, clock)
    assert cleaner.grab_filthiest() is None
    log_manager.shutdown()


def _set_mtime(segment, seconds: float) -> None:
    os.utime(segment.log_path, (seconds, seconds))


def test_tombstones_stay_until_delete_retention_after_cleaning(tmp_path):
    """Kafka's rule: a segment's tombstones go once it is delete.retention.ms older than the newest segment
    of the clean section (the cleaned segments keep their sources' newest mtime)."""
    clock = Clock()
    config = LogConfig(**{**COMPACT.__dict__, "delete_retention_ms": 60_000})
    log_manager, cleaner, log = _manager(tmp_path, clock, config)
    _produce(log, [(b"a", b"1"), (b"b", b"1"), (b"a", None), (b"b", b"2")] + _updates(20, 5))
    assert _clean_once(cleaner)  # no clean section yet: every tombstone stays
    assert (b"a", None) in [(k, v) for _, k, v in _records(log)]
    clean_section = log.segments[:-1]
    for segment in clean_section[:-1]:
        _set_mtime(segment, 1_000)
    _set_mtime(clean_section[-1], 1_000 + 30)  # newer, but by less than delete.retention.ms
    _produce(log, _updates(20, 5))
    assert _clean_once(cleaner)
    assert (b"a", None) in [(k, v) for _, k, v in _records(log)]
    for segment in log.segments[:-1]:
        _set_mtime(segment, 1_000)
    _set_mtime(log.segments[-2], 1_000 + 120)  # the clean section's newest is now past the horizon
    _produce(log, _updates(20, 5))
    assert _clean_once(cleaner)
    records = [(k, v) for _, k, v in _records(log)]
    assert (b"a", None) not in records
    assert (b"b", b"2") in records
    log_manager.shutdown()


def test_cleaning_is_abandoned_when_the_log_is_truncated_meanwhile(tmp_path):
    clock = Clock()
    log_manager, cleaner, log = _manager(tmp_path, clock)
    _produce(log, _updates(10, 3))
    grabbed_log, job = cleaner.grab_filthiest()
    result = clean_log(job, MAP)
    log.truncate_to(log.log_end_offset - 2)
    before = _records(log)
    assert not cleaner.complete(grabbed_log, job, result)
    assert _records(log) == before
    assert not list(tmp_path.glob("t-0/*.cleaned"))
    log_manager.shutdown()


def test_an_aborted_cleaning_deletes_its_files(tmp_path):
    clock = Clock()
    log_manager, cleaner, log = _manager(tmp_path, clock)
    _produce(log, _updates(10, 3))
    _, job = cleaner.grab_filthiest()
    job.aborted = threading.Event()
    job.aborted.set()
    with pytest.raises(CleaningAborted):
        clean_log(job, MAP)
    assert not list(tmp_path.glob("t-0/*.cleaned"))
    log_manager.shutdown()


def test_the_high_watermark_and_the_compaction_lag_bound_the_cleaning(tmp_path):
    clock = Clock()
    log_manager, cleaner, log = _manager(tmp_path, clock)
    _produce(log, _updates(10, 3))
    log.update_high_watermark(0)
    assert cleaner.grab_filthiest() is None
    log.update_high_watermark(log.log_end_offset)
    log.update_config(LogConfig(**{**COMPACT.__dict__, "min_compaction_lag_ms": 60_000}))
    assert cleaner.grab_filthiest() is None
    clock.now += 60_000
    assert cleaner.grab_filthiest() is not None
    log_manager.shutdown()


def test_a_follower_copies_a_compacted_log_with_its_gaps(tmp_path):
    clock = Clock()
    log_manager, cleaner, leader = _manager(tmp_path / "leader", clock)
    _produce(leader, _updates(10, 3))
    assert _clean_once(cleaner)
    follower = PartitionLog.open(tmp_path / "follower" / "t-0", COMPACT, clock_ms=clock, clean_shutdown=True)
    for _ in range(100):  # one segment per fetch, as a replica fetcher reads
        if follower.log_end_offset == leader.log_end_offset:
            break
        fetched = leader.read(follower.log_end_offset, max_bytes=1 << 20, upper_bound=leader.log_end_offset)
        follower.append_as_follower(memoryview(bytearray(fetched.slice.read_bytes())))
    follower.update_high_watermark(follower.log_end_offset)
    assert _records(follower) == _records(leader)
    assert verify_partition(follower.directory, compacted=True).problems == []
    follower.close()
    log_manager.shutdown()


def test_a_compacted_topic_refuses_a_record_without_a_key(tmp_path):
    log_manager, _, log = _manager(tmp_path, Clock())
    keyless = bytearray(build_batch([(b"k", b"v", [], 1), (None, b"v", [], 1)]))
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(memoryview(keyless), leader_epoch=0)
    assert log.log_end_offset == 0
    log_manager.shutdown()


def test_a_high_watermark_position_in_a_cleaned_segment_is_looked_up_again(tmp_path):
    clock = Clock()
    log_manager, cleaner, log = _manager(tmp_path, clock)
    _produce(log, _updates(10, 3))
    log.roll()  # the HW keeps the position it had at the end of the segment that is now sealed
    stale = log.high_watermark_metadata
    assert stale.segment_base_offset < log.active_segment.base_offset
    assert _clean_once(cleaner)
    assert log.high_watermark_metadata.message_offset_only
    log.read(log.high_watermark, max_bytes=100, upper_bound=log.high_watermark)
    assert log.high_watermark_metadata == log.offset_metadata_of(log.high_watermark)
    log_manager.shutdown()
