"""The cleaning of one log (Kafka's Cleaner): build the key -> last offset map over the dirty section, then
rewrite the cleanable segments group by group into `.cleaned` segments holding the last record of each key.

Runs in a cleaner thread. It reads only sealed segments, through the file objects the job holds (a segment
deleted meanwhile stays readable), writes only `.cleaned` files, and checks `job.aborted` between batches;
swapping the result into the log is the event loop's business (cleaner_manager.py).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from replog.log.cleaner_rules import CleanableRange, OffsetMap, delete_horizon_ms, retain_record
from replog.log.segment import LogSegment
from replog.log.segment_swap import CLEANED_SUFFIX, discard_cleaned
from replog.protocol.record_compaction import iter_record_keys, rebuild_batch
from replog.protocol.records import BatchHeader, decode_records, parse_header

# The cleaned segment is written in chunks of about this size: one write per chunk, not per batch.
WRITE_CHUNK_BYTES = 1 << 20
# How often the cleaner thread lets the event loop take the GIL (see _check).
GIL_HANDOVER_S = 0.001


class CleaningAborted(Exception):
    """The log was truncated, deleted or went offline, or the cleaner is stopping."""


@dataclass
class CleaningJob:
    """One log's cleaning, planned on the event loop; the thread reads only what this holds."""

    directory: Path
    cleanable: CleanableRange
    # Groups of (segment, offset after it) from cleaner_rules.group_by_size.
    groups: list[list[tuple[LogSegment, int]]]
    # The clean section's last segment (its mtime sets the tombstone horizon), None if there is none.
    last_clean_segment: LogSegment | None
    delete_retention_ms: int
    index_interval_bytes: int
    segment_index_bytes: int
    now_ms: int
    truncations: int
    aborted: threading.Event = field(default_factory=threading.Event)
    gil_handed_over_at: float = 0.0  # perf_counter() of the cleaner thread's last sleep(0)


@dataclass(frozen=True, slots=True)
class CleanedGroup:
    base_offset: int
    sources: list[LogSegment]
    bytes_read: int
    bytes_written: int


@dataclass(frozen=True, slots=True)
class CleaningResult:
    groups: list[CleanedGroup]
    # The dirty section really mapped (the map may fill up before the cleanable end): the next checkpoint.
    map_end: int
    dirty_bytes: int
    records_read: int
    records_kept: int
    seconds: float

    @property
    def bytes_read(self) -> int:
        return sum(group.bytes_read for group in self.groups)

    @property
    def bytes_written(self) -> int:
        return sum(group.bytes_written for group in self.groups)


def _mtime_ms(segment: LogSegment) -> int:
    """From the open file: the path may be unlinked by now."""
    return segment.mtime_ms()


def _check(job: CleaningJob) -> None:
    """Between two batches: stop if aborted, and every GIL_HANDOVER_S hand the GIL over (sleep(0) releases
    it) so that the event loop thread, if it waits for it, runs then rather than after the interpreter's
    5 ms switch interval. Not after every batch: on a loaded machine each sleep(0) also yields the CPU."""
    if job.aborted.is_set():
        raise CleaningAborted(f"cleaning of {job.directory.name} aborted")
    now = time.perf_counter()
    if now - job.gil_handed_over_at >= GIL_HANDOVER_S:
        time.sleep(0)
        job.gil_handed_over_at = now


def build_offset_map(job: CleaningJob, offset_map: OffsetMap) -> tuple[int, int]:
    """Map every key of the dirty section to its last offset, whole segments at a time, stopping before a
    segment that might not fit (Kafka's buildOffsetMap). Returns (offset mapped up to, bytes mapped)."""
    first_dirty = job.cleanable.first_dirty
    mapped_to = first_dirty
    mapped_bytes = 0
    for segment, after in job.cleanable.segments:
        if after <= first_dirty:
            continue
        # A segment holds at most one record an offset: a bound that needs no read.
        if after - segment.base_offset > offset_map.free:
            if mapped_to == first_dirty:
                raise CleaningAborted(f"{job.directory.name}: log.cleaner.dedupe.buffer.size cannot hold the "
                                      f"{after - segment.base_offset} offsets of segment {segment.base_offset}")
            break
        for position, header in segment.batches():
            _check(job)
            for offset, key, _ in iter_record_keys(segment.read_batch(position, header)):
                if key is not None:
                    offset_map.put(key, offset)
        mapped_to = after
        mapped_bytes += segment.size
    return mapped_to, mapped_bytes


class _ChunkWriter:
    """Batches for the cleaned segment, appended a chunk at a time."""

    def __init__(self, out: LogSegment) -> None:
        self._out = out
        self._pending = bytearray()
        self._last: BatchHeader | None = None
        self._max: BatchHeader | None = None

    def add(self, data: bytes | memoryview) -> None:
        header = parse_header(data)
        self._pending += data
        self._last = header
        if self._max is None or header.max_timestamp > self._max.max_timestamp:
            self._max = header
        if len(self._pending) >= WRITE_CHUNK_BYTES:
            self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        self._out.append(self._last.last_offset, memoryview(self._pending), self._max.max_timestamp,
                         self._max.last_offset)
        self._pending = bytearray()
        self._max = None


def clean_group(
    job: CleaningJob, group: list[tuple[LogSegment, int]], offset_map: OffsetMap, horizon_ms: int
) -> tuple[CleanedGroup, int, int]:
    """Write `group` as one `.cleaned` segment at the group's base offset, fsynced, with the newest mtime
    of its sources. Returns it with the records read and kept."""
    base = group[0][0].base_offset
    discard_cleaned(job.directory, base)  # a leftover of an attempt that died
    out = LogSegment(job.directory, base, index_interval_bytes=job.index_interval_bytes,
                     max_index_bytes=job.segment_index_bytes, created_ms=job.now_ms, file_suffix=CLEANED_SUFFIX)
    records_read = records_kept = 0
    closed = False
    try:
        writer = _ChunkWriter(out)
        newest_mtime_ms = 0
        for segment, _ in group:
            mtime_ms = _mtime_ms(segment)
            newest_mtime_ms = max(newest_mtime_ms, mtime_ms)
            retain_tombstones = mtime_ms > horizon_ms
            for position, header in segment.batches():
                _check(job)
                batch = segment.read_batch(position, header)
                # Keys first (cheap); the records are decoded whole only for a batch that loses some.
                keys = list(iter_record_keys(batch))
                kept_offsets = {offset for offset, key, tombstone in keys if retain_record(
                    key=key, value=None if tombstone else b"", offset=offset,
                    latest_offset=offset_map.get(key) if key is not None else None,
                    retain_tombstones=retain_tombstones)}
                records_read += len(keys)
                records_kept += len(kept_offsets)
                if len(kept_offsets) == len(keys):
                    writer.add(batch.buffer)  # untouched: the bytes as they are (control batches too)
                elif kept_offsets:
                    kept = [record for record in decode_records(batch) if record.offset in kept_offsets]
                    writer.add(rebuild_batch(header, kept))
        writer.flush()
        out.seal()
        out.flush()
        size = out.size
        closed = True
        out.close()
        os.utime(out.log_path, ns=(newest_mtime_ms * 1_000_000, newest_mtime_ms * 1_000_000))
    except BaseException:
        if not closed:
            with contextlib.suppress(OSError, ValueError):
                out.close()
        discard_cleaned(job.directory, base)
        raise
    sources = [segment for segment, _ in group]
    return CleanedGroup(base, sources, sum(s.size for s in sources), size), records_read, records_kept


def clean_log(job: CleaningJob, offset_map: OffsetMap) -> CleaningResult:
    """The whole cleaning of one log, in the cleaner thread. On any failure the `.cleaned` files written
    so far are deleted and the error is raised."""
    started = time.perf_counter()
    offset_map.clear()
    map_end, dirty_bytes = build_offset_map(job, offset_map)
    last_clean = job.last_clean_segment
    horizon_ms = delete_horizon_ms(None if last_clean is None else _mtime_ms(last_clean), job.delete_retention_ms)
    cleaned: list[CleanedGroup] = []
    records_read = records_kept = 0
    try:
        for group in job.groups:
            within = [(segment, after) for segment, after in group if after <= map_end]
            if not within:
                break
            result, read, kept = clean_group(job, within, offset_map, horizon_ms)
            cleaned.append(result)
            records_read += read
            records_kept += kept
    except BaseException:
        for group_done in cleaned:
            discard_cleaned(job.directory, group_done.base_offset)
        raise
    return CleaningResult(cleaned, map_end, dirty_bytes, records_read, records_kept, time.perf_counter() - started)
