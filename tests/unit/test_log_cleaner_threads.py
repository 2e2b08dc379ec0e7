"""The log cleaner's workers: the cleaning runs in a cleaner thread while the event loop keeps appending
and reading the same log; the swap happens on the loop; a log deleted or truncated mid-cleaning is left
alone; stop() waits for the threads."""

import asyncio
import threading

from replog.log.config import CleanerConfig, LogConfig
from replog.log.log_cleaner import LogCleaner
from replog.log.log_manager import LogManager
from replog.log.partition_log import PartitionLog
from replog.log.segment_files import SegmentFileOps
from replog.protocol.records import build_batch, decode_records, iter_batches

CONFIG = LogConfig(segment_bytes=1024, index_interval_bytes=64, segment_index_bytes=4096,
                   cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)
CLEANER = CleanerConfig(threads=2, dedupe_buffer_size=4 << 20, backoff_ms=60_000)


class CleanerThreadGate(SegmentFileOps):
    """Reads from a cleaner thread wait for `opened`; reads on the event loop go straight through."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.cleaner_waiting = threading.Event()

    def pread(self, fd, size, position):
        if threading.current_thread().name.startswith("log-cleaner"):
            self.cleaner_waiting.set()
            assert self.opened.wait(30), "the test never opened the gate"
        return super().pread(fd, size, position)


def _append(log, round_: int) -> None:
    records = [(b"k%d" % key, b"v%d" % round_, [], 1000) for key in range(3)]
    log.append_as_leader(memoryview(bytearray(build_batch(records))), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)


def _values(log) -> list[tuple[int, bytes, bytes]]:
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, max_bytes=1 << 20, upper_bound=log.log_end_offset).slice.read_bytes()
        for batch in iter_batches(data):
            out += [(r.offset, r.key, r.value) for r in decode_records(batch)]
            offset = batch.next_offset
    return out


def _compacted_log_and_gated_cleaner(tmp_path) -> tuple[CleanerThreadGate, LogManager, PartitionLog, LogCleaner]:
    """A log of 40 rounds over the same three keys, and a cleaner whose threads' reads wait for the gate."""
    gate = CleanerThreadGate()
    log_manager = LogManager([tmp_path], CONFIG, clock_ms=lambda: 10_000, file_ops=gate)
    log = log_manager.get_or_create_log("t", 0, CONFIG)
    for round_ in range(40):
        _append(log, round_)
    return gate, log_manager, log, LogCleaner(log_manager, CLEANER, clock_ms=lambda: 10_000)


async def _wait_for(event: threading.Event) -> None:
    for _ in range(3000):
        if event.is_set():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("timed out")


async def test_the_loop_appends_and_reads_while_a_cleaner_thread_works(tmp_path):
    gate, log_manager, log, cleaner = _compacted_log_and_gated_cleaner(tmp_path)
    cleaning = asyncio.create_task(cleaner.clean_filthiest())
    await _wait_for(gate.cleaner_waiting)
    # The cleaner thread is stuck in a read: the loop still appends and serves reads of the same log.
    _append(log, 99)
    assert _values(log)[-1] == (log.log_end_offset - 1, b"k2", b"v99")
    size_before = log.size_in_bytes
    gate.opened.set()
    assert await cleaning
    assert log.size_in_bytes < size_before
    assert _values(log)[-3:] == [(log.log_end_offset - 3 + i, b"k%d" % i, b"v99") for i in range(3)]
    await cleaner.stop()
    log_manager.shutdown()


async def test_a_log_deleted_while_it_is_cleaned_is_left_alone(tmp_path):
    gate, log_manager, log, cleaner = _compacted_log_and_gated_cleaner(tmp_path)
    cleaning = asyncio.create_task(cleaner.clean_filthiest())
    await _wait_for(gate.cleaner_waiting)
    log_manager.delete_log("t", 0)
    gate.opened.set()
    assert await cleaning  # a cleaning was attempted, and given up
    assert cleaner.completed == []
    assert cleaner.manager.in_progress == frozenset()
    assert not (tmp_path / "t-0").exists() or not list((tmp_path / "t-0").glob("*.cleaned"))
    await cleaner.stop()
    log_manager.shutdown()


async def test_a_truncation_during_cleaning_abandons_it(tmp_path):
    gate, log_manager, log, cleaner = _compacted_log_and_gated_cleaner(tmp_path)
    cleaning = asyncio.create_task(cleaner.clean_filthiest())
    await _wait_for(gate.cleaner_waiting)
    log.truncate_to(log.log_end_offset - 3)
    before = _values(log)
    gate.opened.set()
    assert await cleaning
    assert cleaner.completed == []
    assert _values(log) == before
    assert not list(log.directory.glob("*.cleaned"))
    # The next pass cleans the truncated log afresh.
    assert await cleaner.clean_filthiest()
    assert len(cleaner.completed) == 1
    await cleaner.stop()
    log_manager.shutdown()


async def test_stop_aborts_a_running_cleaning_and_waits_for_its_thread(tmp_path):
    gate, log_manager, log, cleaner = _compacted_log_and_gated_cleaner(tmp_path)
    cleaner.start()
    await _wait_for(gate.cleaner_waiting)
    stopping = asyncio.create_task(cleaner.stop())
    await asyncio.sleep(0)
    gate.opened.set()
    await stopping
    assert not list(log.directory.glob("*.cleaned"))
    log_manager.shutdown()
