"""One log segment: `<20-digit base offset>.log` plus its offset and time indexes.

The segment knows only its own files. Batches arrive already validated and
stamped; the segment appends them, keeps its sparse indexes, answers reads
with file slices (never copying data), and rebuilds itself after a crash.

Its descriptors may be given back for the broker's file budget (file_budget.py): the log file and the index
maps reopen on the next use, and all the state a segment answers from without I/O (size, next offset, max
timestamp) stays in memory.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from replog.log.append_reservation import AppendReservation
from replog.log.config import LogConfig
from replog.log.errors import CorruptIndexError, StorageError
from replog.log.file_budget import FileBudget, SharedFile
from replog.log.index import INT32_MAX, NO_TIMESTAMP, OffsetIndex, TimeIndex
from replog.log.segment_files import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    OS_FILE_OPS,
    TIME_INDEX_SUFFIX,
    FileSlice,
    SegmentFileOps,
    segment_file_name,
)
from replog.log.writeback import SegmentWriteback
from replog.protocol.records import (
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    CorruptRecordError,
    RecordBatch,
    parse_header,
)


class BatchLocation(NamedTuple):
    base_offset: int
    last_offset: int
    position: int
    size: int


class LogSegment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_bytes: int,
        created_ms: int,
        writeback_interval_bytes: int = 0,
        file_ops: SegmentFileOps = OS_FILE_OPS,
        file_suffix: str = "",
    ) -> None:
        """`file_suffix` names a segment that is not (yet) part of the log: the cleaner writes
        `<base>.log.cleaned` and its indexes, which become `.swap` and then the real names."""
        assert base_offset >= 0
        assert index_interval_bytes >= 0
        self.directory = Path(directory)
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        self._ops = file_ops
        self.file_suffix = file_suffix
        self.log_path = self.directory / segment_file_name(base_offset, LOG_SUFFIX + file_suffix)
        fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self._file: io.FileIO | None = SharedFile(fd, "r+")
        self._size = os.fstat(fd).st_size
        self._reservation = AppendReservation(self._size)
        self._writeback = SegmentWriteback(writeback_interval_bytes, self._size)
        self._budget: FileBudget | None = None
        # True when an index was missing or corrupt: the caller must recover().
        self.needs_recovery = False
        self.offset_index = self._open_index(OffsetIndex, INDEX_SUFFIX, max_index_bytes)
        self.time_index = self._open_index(TimeIndex, TIME_INDEX_SUFFIX, max_index_bytes)
        if self.offset_index.last_entry[1] >= max(self._size, 1):
            self.needs_recovery = True
        self._next_offset = base_offset
        self._max_timestamp = NO_TIMESTAMP
        self._offset_of_max_timestamp = base_offset
        self._bytes_since_index = 0
        # The last batch this segment appended: a follower (and a consumer at the end) fetches from the offset
        # where the latest append began, so each read would otherwise look it up in the index and pread its
        # header back from the file (docs/profiles/rf3-linger0.md, fifth pass).
        self._tail_batch: BatchLocation | None = None
        if not self.needs_recovery:
            self._load_tail_state()
        self.offset_index.on_open = self._files_opened
        self.time_index.on_open = self._files_opened

    # ------------------------------------------------------------ descriptors

    def attach_file_budget(self, budget: FileBudget) -> None:
        """Charge this segment's descriptors to `budget` from now on; called on the event loop thread."""
        self._budget = budget
        budget.opened(self, self.open_files)

    @property
    def open_files(self) -> int:
        return (self._file is not None) + self.offset_index.open_files + self.time_index.open_files

    def release_file_handles(self) -> None:
        """Give back every descriptor (the file budget evicts this segment); the next use reopens them. A
        response still sending from the log file keeps it open through its FileSlice."""
        if self._budget is not None:
            self._budget.closed(self)
        self._file = None
        self.offset_index.release()
        self.time_index.release()

    def _files_opened(self, count: int) -> None:
        if self._budget is not None:
            self._budget.opened(self, count)

    def _log_file(self) -> io.FileIO:
        """The log file, reopened if it was released; this segment becomes the budget's most recently used."""
        file = self._file
        if file is None:
            file = self._file = SharedFile(os.open(self.log_path, os.O_RDWR | os.O_APPEND), "r+")
            self._files_opened(1)
        elif self._budget is not None:
            self._budget.used(self)
        return file

    def _file_for_reading(self) -> io.FileIO:
        """The log file for the log cleaner's thread, which must not touch the budget: the open one, else a
        private descriptor closed when the caller drops it."""
        file = self._file
        return file if file is not None else SharedFile(os.open(self.log_path, os.O_RDONLY), "r")

    def _open_index(self, kind: type[OffsetIndex] | type[TimeIndex], suffix: str, max_bytes: int):
        path = self.directory / segment_file_name(self.base_offset, suffix + self.file_suffix)
        if not path.exists() and self._size > 0:
            self.needs_recovery = True
        # A new, empty segment of the log creates its index files on first use (the first append reserves
        # index space before writing): a data file never lacks its indexes. The cleaner's output is exempt,
        # as the swap renames its files.
        lazily = self._size == 0 and not self.file_suffix
        try:
            return kind(path, self.base_offset, max_bytes, create_lazily=lazily)
        except CorruptIndexError:
            self.needs_recovery = True
            path.unlink()
            return kind(path, self.base_offset, max_bytes)

    def _load_tail_state(self) -> None:
        """Next offset and max timestamp: last index entries, then scan the tail.

        The tail after the last offset index entry is about index_interval_bytes,
        so this reads a bounded number of headers.
        """
        self._max_timestamp, self._offset_of_max_timestamp = self.time_index.last_entry
        last_indexed, position = self.offset_index.last_entry
        self._next_offset = last_indexed + 1 if self.offset_index.entries else self.base_offset
        for _, header in self._scan_headers(position, self._size, tolerant=True):
            self._next_offset = header.next_offset
            if header.max_timestamp > self._max_timestamp:
                self._max_timestamp = header.max_timestamp
                self._offset_of_max_timestamp = header.last_offset

    @property
    def size(self) -> int:
        return self._size

    @property
    def next_offset(self) -> int:
        return self._next_offset

    @property
    def largest_offset(self) -> int:
        return self._next_offset - 1

    @property
    def max_timestamp_so_far(self) -> int:
        return self._max_timestamp

    @property
    def offset_of_max_timestamp(self) -> int:
        return self._offset_of_max_timestamp

    @property
    def file(self) -> io.FileIO:
        return self._log_file()

    def mtime_ms(self) -> int:
        """When the log file was last written (the log cleaner's thread may ask)."""
        file = self._file_for_reading()
        return os.fstat(file.fileno()).st_mtime_ns // 1_000_000

    def _scan_headers(
        self, start: int, end: int, *, tolerant: bool = False, file: io.FileIO | None = None
    ) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch in [start, end), reading headers only."""
        if file is None:
            file = self._log_file()
        fd = file.fileno()
        position = start
        while position + RECORD_BATCH_OVERHEAD <= end:
            raw = self._ops.pread(fd, RECORD_BATCH_OVERHEAD, position)
            try:
                header = parse_header(raw) if len(raw) == RECORD_BATCH_OVERHEAD else None
            except CorruptRecordError:
                if not tolerant:
                    raise
                header = None
            if header is None or position + header.size_in_bytes > end:
                return
            yield position, header
            position += header.size_in_bytes

    def _index_batch(self, header: BatchHeader, position: int) -> None:
        """Per-batch bookkeeping shared by append and recover."""
        assert header.base_offset >= self._next_offset
        if header.max_timestamp > self._max_timestamp:
            self._max_timestamp = header.max_timestamp
            self._offset_of_max_timestamp = header.last_offset
        if self._bytes_since_index > self.index_interval_bytes and not self.offset_index.is_full:
            self.offset_index.append(header.last_offset, position)
            self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += header.size_in_bytes
        self._next_offset = header.next_offset

    def append(
        self, largest_offset: int, batches: memoryview, max_timestamp: int, offset_of_max_timestamp: int
    ) -> None:
        """Append whole, validated, stamped batches with one write (no fsync)."""
        assert len(batches) > 0
        assert largest_offset - self.base_offset <= INT32_MAX
        start = self._size
        headers = []
        position = 0
        while position < len(batches):
            header = parse_header(batches, position)
            headers.append((start + position, header))
            position += header.size_in_bytes
        assert position == len(batches)
        # Index space first: a full disk fails the append before any byte is written, never between the log
        # write and its index entries. Only for the entries this append will write (a batch gets one in
        # each index once index_interval_bytes have passed), so that small appends to a new segment do not
        # create its lazily created index files before they hold anything.
        entries = self._index_entries_for(headers)
        if entries:
            self.offset_index.reserve(entries)
            self.time_index.reserve(entries)
        self._write_all(batches)
        for header_position, header in headers:
            self._index_batch(header, header_position)
        last_position, last = headers[-1]
        self._tail_batch = BatchLocation(last.base_offset, last.last_offset, last_position, last.size_in_bytes)
        assert self._next_offset == largest_offset + 1
        assert self._max_timestamp >= max_timestamp
        assert offset_of_max_timestamp <= largest_offset

    def _index_entries_for(self, headers: list[tuple[int, BatchHeader]]) -> int:
        """How many entries _index_batch will add to each index for these batches."""
        since_index = self._bytes_since_index
        entries = 0
        for _, header in headers:
            if since_index > self.index_interval_bytes:
                entries += 1
                since_index = 0
            since_index += header.size_in_bytes
        return entries

    def _write_all(self, data: memoryview) -> None:
        """Write all of `data` or none of it: a failed write (a full disk takes part of it, then ENOSPC)
        is cut off again, so no torn batch is left for a later append to follow or a read to serve."""
        start = self._size
        written = 0
        file = self._log_file()
        fd = file.fileno()
        self._reservation.before_append(self._ops, fd, start, len(data))
        try:
            # A regular file takes a whole write unless the disk fails; the loop
            # still handles a short write, bounded by the data length.
            while written < len(data):
                count = self._ops.write(fd, data[written:])
                assert count > 0
                written += count
        except OSError as exc:
            if written:
                try:
                    os.ftruncate(fd, start)
                    self._reservation.truncated(start)
                except OSError:
                    pass  # the dir goes offline; recovery at the next start truncates the torn batch
            raise StorageError(exc.errno, f"append to {self.log_path} failed: {exc.strerror}") from exc
        self._size = start + written
        self._writeback.after_append(self._ops, fd, start, self._size)

    def translate_offset(self, offset: int, start_position: int = 0) -> BatchLocation | None:
        """The first batch whose last offset is >= `offset`, or None."""
        tail = self._tail_batch
        if (tail is not None and tail.base_offset <= offset <= tail.last_offset and tail.position >= start_position
                and tail.position + tail.size == self._size):
            return tail
        _, indexed_position = self.offset_index.lookup(offset)
        for position, header in self._scan_headers(max(start_position, indexed_position), self._size):
            if header.last_offset >= offset:
                return BatchLocation(header.base_offset, header.last_offset, position, header.size_in_bytes)
        return None

    def scan_headers_from(self, offset: int) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of the batch holding `offset` and every later one."""
        location = self.translate_offset(offset)
        if location is None:
            return iter(())
        return self._scan_headers(location.position, self._size)

    def batches(self) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of every batch, without the offset index: the log cleaner reads sealed
        segments from its thread this way, touching only the log file it holds."""
        return self._scan_headers(0, self._size, file=self._file_for_reading())

    def read_batch(self, position: int, header: BatchHeader) -> RecordBatch:
        """Load one whole batch (a copy) whose header was found at `position` (the cleaner's thread too)."""
        file = self._file_for_reading()  # held while read: a private one closes when dropped
        data = self._ops.pread(file.fileno(), header.size_in_bytes, position)
        if len(data) != header.size_in_bytes:
            raise StorageError(f"{self.log_path}: batch at {position} is cut short")
        batch = RecordBatch(memoryview(data))
        assert batch.header == header
        return batch

    def read(
        self, start_offset: int, max_size: int, max_position: int | None = None, min_one_batch: bool = True
    ) -> FileSlice | None:
        """Whole batches from the one holding `start_offset`, up to max_size bytes
        (or one batch if min_one_batch) and ending at or before max_position."""
        assert max_size >= 0
        location = self.translate_offset(start_offset)
        limit = self._size if max_position is None else min(max_position, self._size)
        if location is None or location.position + location.size > limit:
            return None
        if location.size > max_size and not min_one_batch:
            return None
        # The first batch's header is already known: the scan reads only the ones after it (none at the tail).
        end = location.position + location.size
        for position, header in self._scan_headers(end, limit):
            batch_end = position + header.size_in_bytes
            if batch_end - location.position > max_size:
                break
            end = batch_end
        return FileSlice(self._log_file(), location.position, end - location.position)

    def recover(self, max_message_bytes: int, on_batch: Callable[[BatchHeader], None]) -> int:
        """Rebuild the indexes from the data, validating every batch's CRC.

        Stops at the first torn, oversized, corrupt or out-of-order batch and
        truncates the file there. Each valid batch's header goes to `on_batch`
        (epoch cache, producer state). Returns the number of bytes truncated.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self._tail_batch = None
        self._next_offset = self.base_offset
        self._max_timestamp = NO_TIMESTAMP
        self._offset_of_max_timestamp = self.base_offset
        self._bytes_since_index = 0
        file = self._log_file()
        fd = file.fileno()
        file_size = os.fstat(fd).st_size
        valid_end = 0
        for position, header in self._scan_headers(0, file_size, tolerant=True):
            if header.size_in_bytes > max_message_bytes or header.base_offset < self._next_offset:
                break
            data = self._ops.pread(fd, header.size_in_bytes, position)
            if len(data) != header.size_in_bytes or not RecordBatch(memoryview(data)).is_crc_valid():
                break
            self._index_batch(header, position)
            on_batch(header)
            valid_end = position + header.size_in_bytes
        truncated = file_size - valid_end
        if truncated:
            os.ftruncate(fd, valid_end)
            self._reservation.truncated(valid_end)
        self._size = valid_end
        self.needs_recovery = False
        assert self._size <= file_size
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove the batch holding `offset` and everything after; bytes removed."""
        location = self.translate_offset(offset)
        if location is None:
            return 0
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        removed = self._size - location.position
        file = self._log_file()
        os.ftruncate(file.fileno(), location.position)
        self._reservation.truncated(location.position)
        self._size = location.position
        self._tail_batch = None
        self._bytes_since_index = 0
        self._load_tail_state()
        assert self._next_offset == location.base_offset or self._size == 0
        return removed

    def should_roll(self, incoming_size: int, now_ms: int, config: LogConfig, *, max_offset: int) -> bool:
        if self._size == 0:
            return False
        return (
            self._size > config.segment_bytes - incoming_size
            or now_ms - self.created_ms > config.segment_ms
            or self.offset_index.is_full
            # One slot stays free for the final entry written by seal().
            or self.time_index.entries >= self.time_index.max_entries - 1
            or max_offset - self.base_offset > INT32_MAX
        )

    def seal(self) -> None:
        """The segment stops being active: record its max timestamp, trim indexes, give back the blocks
        allocated past its end for appends."""
        if self._size > 0:
            self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        if self._reservation.reserved_end > self._size:
            self._reservation.release(self._ops, self._log_file().fileno(), self._size)

    def resize_indexes(self, max_bytes: int) -> None:
        """Make room to append again (the active segment after a reopen)."""
        self.offset_index.resize(max_bytes)
        self.time_index.resize(max_bytes)

    def flush(self) -> None:
        file = self._log_file()
        self._ops.fsync(file.fileno())
        self.offset_index.flush()
        self.time_index.flush()

    def close(self) -> None:
        if self._budget is not None:
            self._budget.closed(self)
            self._budget = None
        self.seal()
        self.offset_index.close()
        self.time_index.close()
        if self._file is not None:
            self._file.close()
            self._file = None

    def delete(self) -> None:
        """Unlink the files. The log file object is deliberately left open (see FileSlice)."""
        if self._budget is not None:
            self._budget.closed(self)
            self._budget = None
        self.offset_index.delete()
        self.time_index.delete()
        self.log_path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, next={self._next_offset}, size={self._size})"
