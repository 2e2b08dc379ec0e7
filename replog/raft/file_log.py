"""FileRaftLog: the RaftLog of a controller, on disk (KRaft's KafkaMetadataLog, in one file and a snapshot).

Layout in the log directory:
- `metadata.log`: a header frame (start offset and the epoch before it), then one frame per entry:
  [length u32][crc32c u32][epoch i32][control u8][value], the CRC over everything after it.
- `<end offset>-<epoch>.checkpoint`: the latest snapshot (KIP-630's name), written atomically.

The entries live in a MemoryRaftLog as well (the metadata log is small: snapshots bound it), which answers every
read and epoch lookup; the file is what survives. `flush` fsyncs, so an entry acknowledged by a Fetch or counted
by the leader is on disk. Opening recovers a torn tail (a crash during an append) by truncating to the last
whole frame; a bad header is refused with a message naming the file. Trimming the log behind a snapshot
rewrites the file atomically.
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

from crc32c import crc32c

from replog.log.checkpoint import fsync_directory, write_atomically
from replog.raft.messages import LogEntry, OffsetAndEpoch
from replog.raft.raft_log import MemoryRaftLog

log = logging.getLogger(__name__)

LOG_FILE = "metadata.log"
SNAPSHOT_SUFFIX = ".checkpoint"
_MAGIC = b"RLOG1"
_HEADER = struct.Struct(">5sqi")  # magic, start offset, start epoch
_FRAME = struct.Struct(">IIiB")  # length (of what follows the CRC), crc32c, epoch, control
MAX_ENTRY_BYTES = 8 << 20  # bounds a length read off the disk before it is allocated


class CorruptRaftLogError(Exception):
    """The metadata log cannot be opened; the message names the file."""


def encode_frame(entry: LogEntry) -> bytes:
    body = struct.pack(">iB", entry.epoch, entry.control) + entry.value
    return struct.pack(">II", len(body), crc32c(body)) + body


def decode_frames(data: bytes | memoryview, position: int) -> tuple[list[LogEntry], list[int], int]:
    """Whole, valid frames from `position`: (entries, each one's position, where the valid part ends)."""
    entries: list[LogEntry] = []
    positions: list[int] = []
    while position + 8 <= len(data):
        length, crc = struct.unpack_from(">II", data, position)
        end = position + 8 + length
        if length < 5 or length > MAX_ENTRY_BYTES or end > len(data):
            break
        body = bytes(data[position + 8:end])
        if crc32c(body) != crc:
            break
        epoch, control = struct.unpack_from(">iB", body)
        if control > 1:
            break
        entries.append(LogEntry(epoch, body[5:], bool(control)))
        positions.append(position)
        position = end
    return entries, positions, position


class FileRaftLog:
    """A RaftLog in `directory`; see the module docstring for the files."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / LOG_FILE
        self._memory = MemoryRaftLog()
        self._positions: list[int] = []  # file position of each entry from start_offset
        self._snapshot: OffsetAndEpoch | None = None
        self._open()

    # ------------------------------------------------------------------ opening

    def _open(self) -> None:
        self._snapshot = self._latest_snapshot_on_disk()
        if not self.path.exists():
            start = self._snapshot or OffsetAndEpoch(0, 0)
            self._rewrite(start, [])
        data = self.path.read_bytes()
        if len(data) < _HEADER.size or data[:5] != _MAGIC:
            raise CorruptRaftLogError(f"{self.path}: not a replog metadata log (bad header); restore it or remove "
                                      f"it to fetch the log from the quorum's leader")
        _, start_offset, start_epoch = _HEADER.unpack_from(data)
        if start_offset < 0 or start_epoch < 0:
            raise CorruptRaftLogError(f"{self.path}: negative start offset {start_offset} or epoch {start_epoch}")
        entries, positions, valid_end = decode_frames(data, _HEADER.size)
        if valid_end < len(data):
            log.warning("%s: torn tail of %d bytes after offset %d truncated", self.path, len(data) - valid_end,
                        start_offset + len(entries))
        with open(self.path, "r+b") as f:
            f.truncate(valid_end)
            # What a crashed process left may be in the page cache only: fsynced, it is as durable as the log
            # takes it to be from here on (vote requests advertise the flushed log).
            os.fsync(f.fileno())
        self._load(OffsetAndEpoch(start_offset, start_epoch), entries, positions, valid_end)
        snapshot = self._snapshot
        if snapshot is not None and snapshot.offset > self._memory.start_offset:
            # A crash between writing a snapshot and trimming the log behind it: finish the job.
            if snapshot.offset <= self.end_offset and self._memory.epoch_at(snapshot.offset - 1) == snapshot.epoch:
                self._trim_to(snapshot)
            else:
                self._reset_to(snapshot)

    def _load(self, start: OffsetAndEpoch, entries: list[LogEntry], positions: list[int], file_end: int) -> None:
        memory = MemoryRaftLog()
        if start.offset > 0:
            memory.install_snapshot(start, b"")  # only sets its start: the snapshot itself is the file's
        memory.append(entries)
        memory.flush()
        self._memory, self._positions, self._file_end = memory, positions, file_end

    def _latest_snapshot_on_disk(self) -> OffsetAndEpoch | None:
        found = []
        for path in self.directory.glob(f"*{SNAPSHOT_SUFFIX}"):
            offset, dash, epoch = path.name.removesuffix(SNAPSHOT_SUFFIX).partition("-")
            if dash and offset.isdigit() and epoch.isdigit():
                found.append(OffsetAndEpoch(int(offset), int(epoch)))
        return max(found, default=None)

    # ------------------------------------------------------------------ RaftLog: reads

    @property
    def start_offset(self) -> int:
        return self._memory.start_offset

    @property
    def end_offset(self) -> int:
        return self._memory.end_offset

    @property
    def flushed_end_offset(self) -> int:
        return self._memory.flushed_end_offset

    def last_offset_and_epoch(self) -> OffsetAndEpoch:
        return self._memory.last_offset_and_epoch()

    def last_flushed_offset_and_epoch(self) -> OffsetAndEpoch:
        return self._memory.last_flushed_offset_and_epoch()

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        return self._memory.end_offset_for_epoch(epoch)

    def read(self, offset: int, max_entries: int) -> tuple[LogEntry, ...]:
        return self._memory.read(offset, max_entries)

    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        return self._snapshot

    def read_snapshot(self, snapshot_id: OffsetAndEpoch) -> bytes:
        assert snapshot_id == self._snapshot, (snapshot_id, self._snapshot)
        return self._snapshot_path(snapshot_id).read_bytes()

    # ------------------------------------------------------------------ RaftLog: writes

    def append(self, entries: tuple[LogEntry, ...] | list[LogEntry]) -> None:
        self._memory.append(entries)
        frames = bytearray()
        for entry in entries:
            self._positions.append(self._file_end + len(frames))
            frames += encode_frame(entry)
        with open(self.path, "ab") as f:
            f.write(frames)
        self._file_end += len(frames)

    def flush(self) -> None:
        """Everything appended is on disk when this returns (an ack or a vote may count on it)."""
        if self._memory.flushed_end_offset == self._memory.end_offset:
            return
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._memory.flush()

    def truncate_to(self, offset: int) -> None:
        keep = offset - self.start_offset
        if keep >= len(self._positions):
            return
        self._memory.truncate_to(offset)
        self._file_end = self._positions[keep]
        del self._positions[keep:]
        with open(self.path, "r+b") as f:
            f.truncate(self._file_end)
            os.fsync(f.fileno())  # a truncation a restart undid could resurrect a diverging tail

    def create_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """The state machine's snapshot at `snapshot_id` (committed, applied): kept, and the log before it
        deleted (KIP-630)."""
        assert self.start_offset <= snapshot_id.offset <= self.end_offset
        self._write_snapshot(snapshot_id, data)
        self._trim_to(snapshot_id)

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """A snapshot fetched from the leader replaces the whole log."""
        self._write_snapshot(snapshot_id, data)
        self._reset_to(snapshot_id)

    # ------------------------------------------------------------------ files

    def _snapshot_path(self, snapshot_id: OffsetAndEpoch) -> Path:
        return self.directory / f"{snapshot_id.offset:020d}-{snapshot_id.epoch:010d}{SNAPSHOT_SUFFIX}"

    def _write_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        self.flush()  # the log up to the snapshot must not be less durable than the snapshot
        write_atomically(self._snapshot_path(snapshot_id), data)
        old, self._snapshot = self._snapshot, snapshot_id
        if old is not None and old != snapshot_id:
            self._snapshot_path(old).unlink(missing_ok=True)

    def _trim_to(self, snapshot_id: OffsetAndEpoch) -> None:
        kept = list(self._memory.read(snapshot_id.offset, self.end_offset - snapshot_id.offset))
        self._rewrite(snapshot_id, kept)

    def _reset_to(self, snapshot_id: OffsetAndEpoch) -> None:
        self._rewrite(snapshot_id, [])

    def _rewrite(self, start: OffsetAndEpoch, entries: list[LogEntry]) -> None:
        header = _HEADER.pack(_MAGIC, start.offset, start.epoch)
        frames = [encode_frame(entry) for entry in entries]
        positions, position = [], len(header)
        for frame in frames:
            positions.append(position)
            position += len(frame)
        write_atomically(self.path, header + b"".join(frames))
        fsync_directory(self.directory)
        self._load(start, entries, positions, position)
