"""The controller's metadata log: every state change as a record in one append-only local file.

A restarted controller replays the log and resumes with the same state and epochs, like KRaft's
__cluster_metadata log (a single local file here, no quorum). The module is schema-agnostic: a record is any
JSON object (the caller gives it a "type"); it comes back as json.loads returns it.

One record per line: `<crc32c of the JSON bytes, 8 lowercase hex digits> <offset> <compact JSON>\\n`.
Offsets start at 0 and grow by 1 per record over the log's whole life, also across compaction, so an offset
(KRaft's broker epoch is one) is never handed out twice.

An append is durable (fdatasync) before it returns: the controller answers nothing it might forget. A crash
mid-append leaves at worst a torn last line, which open cuts away: it must never stop the controller from
starting.
"""

import json
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from io import FileIO
from pathlib import Path
from typing import Any

from crc32c import crc32c

from replog.log.checkpoint import fsync_directory
from replog.log.dir_lock import DirectoryLock

logger = logging.getLogger(__name__)

LOG_FILE_NAME = "metadata.log"
SNAPSHOT_FILE_NAME = LOG_FILE_NAME + ".tmp"  # a compaction in progress; renamed over the log when complete
MAX_RECORD_BYTES = 1 << 20  # far above any real record; a bug must not write (and later read) a giant line

_CRC_HEX = re.compile(rb"[0-9a-f]{8}")
_MAX_OFFSET_DIGITS = 19  # offsets are signed 64-bit, as in Kafka


@dataclass(frozen=True, slots=True)
class LoggedRecord:
    offset: int
    record: dict[str, Any]


class _CorruptLine(Exception):
    pass


class MetadataLog:
    """The open log; create it with MetadataLog.open. Any I/O error in append or compact closes it."""

    def __init__(self, directory: Path, file: FileIO, next_offset: int, lock: DirectoryLock) -> None:
        self._directory = directory
        self._file: FileIO | None = file
        self._next_offset = next_offset
        self._lock = lock

    @classmethod
    def open(cls, directory: Path) -> tuple["MetadataLog", list[LoggedRecord]]:
        """Open (creating it if missing) the log in `directory`, and every record it holds, oldest first.

        Everything from the first line that is torn, corrupt or out of sequence on is truncated away: a
        torn tail is what a crash mid-append leaves (a warning); valid lines after a bad one mean the file
        was damaged, and records after a gap cannot be trusted either (an error).
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        lock = DirectoryLock.acquire(directory)  # two controllers on one dir would interleave their appends
        try:
            log, records = cls._open_locked(directory, lock)
        except BaseException:
            lock.release()
            raise
        return log, records

    @classmethod
    def _open_locked(cls, directory: Path, lock: DirectoryLock) -> tuple["MetadataLog", list[LoggedRecord]]:
        snapshot = directory / SNAPSHOT_FILE_NAME
        if snapshot.exists():
            # The rename that completes a compaction never happened: the log itself is still whole.
            logger.warning("%s: deleting an unfinished compaction", snapshot)
            snapshot.unlink()
        path = directory / LOG_FILE_NAME
        created = not path.exists()
        data = b"" if created else path.read_bytes()
        records, valid_bytes = _read_records(path, data)
        file = open(path, "ab", buffering=0)  # kept open until close
        try:
            if created:
                fsync_directory(directory)  # so the new file's name survives a crash too
            if valid_bytes < len(data):
                os.truncate(file.fileno(), valid_bytes)
                os.fsync(file.fileno())
        except BaseException:
            file.close()
            raise
        next_offset = records[-1].offset + 1 if records else 0
        return cls(directory, file, next_offset, lock), records

    @property
    def next_offset(self) -> int:
        return self._next_offset

    def append(self, records: Sequence[dict[str, Any]]) -> int:
        """Write the records durably, in one write and one fdatasync; returns the offset of the first."""
        assert records, "an empty batch"
        file = self._open_file()
        first = self._next_offset
        data = _encode_lines(first, records)  # raises before anything is written
        try:
            _write_all(file, data)
            os.fdatasync(file.fileno())
        except BaseException:
            # What reached the disk is unknown (a partial line; after a failed fsync, pages the kernel may
            # have dropped): only reopening, which reads the file and cuts a torn tail, can tell.
            self.close()
            raise
        self._next_offset += len(records)
        return first

    def compact(self, records: Sequence[dict[str, Any]]) -> int:
        """Replace the whole log by `records`, a snapshot of the state; returns the snapshot's first offset.

        The snapshot is written to a temporary file, fsynced and renamed over the log, so a crash leaves
        either the old log or the new one. Its offsets continue from next_offset.
        """
        # Empty, the file would not say where offsets continue, and a reopened log would reuse them.
        assert records, "an empty snapshot"
        old_file = self._open_file()
        first = self._next_offset
        data = _encode_lines(first, records)
        path = self._directory / LOG_FILE_NAME
        snapshot = self._directory / SNAPSHOT_FILE_NAME
        try:
            with open(snapshot, "wb", buffering=0) as snapshot_file:
                _write_all(snapshot_file, data)
                os.fsync(snapshot_file.fileno())
            os.replace(snapshot, path)
            fsync_directory(self._directory)
            new_file = open(path, "ab", buffering=0)  # kept open until close
        except BaseException:
            self.close()
            raise
        old_file.close()  # it still points at the replaced file
        self._file = new_file
        self._next_offset += len(records)
        return first

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._lock.release()

    def _open_file(self) -> FileIO:
        if self._file is None:
            raise ValueError(f"{self._directory / LOG_FILE_NAME} is closed")
        return self._file


def _encode_lines(first_offset: int, records: Sequence[dict[str, Any]]) -> bytes:
    return b"".join(_encode_line(first_offset + index, record) for index, record in enumerate(records))


def _encode_line(offset: int, record: dict[str, Any]) -> bytes:
    # Anything but an object would be written fine and then rejected by open, truncating the log there.
    if not isinstance(record, dict):
        raise TypeError(f"a metadata record is a dict, not {type(record).__name__}")
    # ensure_ascii escapes every control character, so a record can never contain the line separator.
    payload = json.dumps(record, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()
    if len(payload) > MAX_RECORD_BYTES:
        raise ValueError(f"a {record.get('type')!r} record of {len(payload)} bytes exceeds "
                         f"{MAX_RECORD_BYTES}")
    return b"%08x %d %s\n" % (crc32c(payload), offset, payload)


def _read_records(path: Path, data: bytes) -> tuple[list[LoggedRecord], int]:
    """The valid records at the start of `data`, and how many bytes they take; logs what follows them."""
    records: list[LoggedRecord] = []
    position = 0
    problem = None
    while position < len(data):
        end = data.find(b"\n", position)
        if end < 0:
            problem = "a line without its newline (a torn write)"
            break
        try:
            logged = _decode_line(data[position:end])
        except _CorruptLine as corrupt:
            problem = str(corrupt)
            break
        if records and logged.offset != records[-1].offset + 1:
            problem = f"offset {logged.offset} after offset {records[-1].offset}"
            break
        records.append(logged)
        position = end + 1
    if problem is None:
        return records, position
    damaged = end >= 0 and _has_valid_line(data[end + 1:])
    logger.log(logging.ERROR if damaged else logging.WARNING,
               "%s: %s at byte %d%s; truncating the %d bytes from there on, the log continues at offset %d",
               path, problem, position, ", followed by valid lines" if damaged else "", len(data) - position,
               records[-1].offset + 1 if records else 0)
    return records, position


def _decode_line(line: bytes) -> LoggedRecord:
    fields = line.split(b" ", 2)
    if len(fields) != 3:
        raise _CorruptLine("a line without checksum, offset and record")
    checksum, offset, payload = fields
    if not _CRC_HEX.fullmatch(checksum):
        raise _CorruptLine(f"checksum {checksum[:16]!r} is not 8 hex digits")
    if int(checksum, 16) != crc32c(payload):
        raise _CorruptLine("a checksum mismatch")
    # Only the form we write. The checksum does not cover the offset: the +1 rule after the first line does.
    if (not offset.isdigit() or len(offset) > _MAX_OFFSET_DIGITS
            or (len(offset) > 1 and offset.startswith(b"0"))):
        raise _CorruptLine(f"offset {offset[:24]!r} is not a decimal number")
    try:
        record = json.loads(payload)
    except ValueError as error:  # JSONDecodeError and UnicodeDecodeError
        raise _CorruptLine(f"a record that is not JSON ({error})") from None
    if not isinstance(record, dict):
        raise _CorruptLine(f"a record that is a JSON {type(record).__name__}, not an object")
    return LoggedRecord(int(offset), record)


def _has_valid_line(data: bytes) -> bool:
    """Does a complete, intact line (whatever its offset) follow? Then more than a tail was damaged."""
    for line in data.split(b"\n")[:-1]:  # the last piece is a torn line or empty
        try:
            _decode_line(line)
        except _CorruptLine:
            continue
        return True
    return False


def _write_all(file: FileIO, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(file.fileno(), view):]
