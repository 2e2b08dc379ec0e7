"""Atomic text checkpoint files in Kafka's format: version, count, one entry a line.

A write goes to `<file>.tmp`, is fsynced, renamed over the file, and then the
directory is fsynced so the rename itself survives a crash.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence
from pathlib import Path

from replog.log.errors import CorruptCheckpointError

CHECKPOINT_VERSION = 0
# A checkpoint lists partitions or epochs; this bounds what we agree to parse.
MAX_CHECKPOINT_ENTRIES = 1_000_000


def write_atomically(path: Path, data: bytes, mode: int | None = None, *, durable: bool = True) -> None:
    """Readers see the old file or the new one, never a torn one, also after a crash. With a mode, the file
    never exists with a wider one (for secrets); without, it is created as open() would. `durable=False`
    skips the fsyncs: the caller syncs the whole file system later (sync_filesystem), once for many files."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb", opener=lambda name, flags: os.open(name, flags, 0o666 if mode is None else mode)) as f:
        if mode is not None:
            os.fchmod(f.fileno(), mode)  # a leftover tmp file keeps its old mode through O_CREAT
        f.write(data)
        f.flush()
        if durable:
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if durable:
        fsync_directory(path.parent)


_syncfs = getattr(ctypes.CDLL(None, use_errno=True), "syncfs", None)


def sync_filesystem(directory: Path) -> None:
    """Commit everything written to the file system holding `directory` (Linux syncfs): one journal commit
    where fsyncing thousands of new small files and their directories would take one each. Where syncfs
    is missing, sync() does the same for every file system."""
    if _syncfs is None:
        os.sync()
        return
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if _syncfs(fd) != 0:
            error = ctypes.get_errno()
            raise OSError(error, os.strerror(error), str(directory))
    finally:
        os.close(fd)


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _parse_int(path: Path, raw: str, what: str) -> int:
    try:
        return int(raw)
    except ValueError as exc:
        raise CorruptCheckpointError(f"{path}: {what} {raw!r} is not an integer") from exc


class CheckpointFile:
    """Version-0 checkpoint whose entries are `fields_per_entry` space-separated fields."""

    def __init__(self, path: Path, fields_per_entry: int) -> None:
        assert fields_per_entry > 0
        self.path = Path(path)
        self.fields_per_entry = fields_per_entry

    def encode_entries(self, entries: Sequence[Sequence[object]]) -> bytes:
        """The file's bytes: for a writer that writes them elsewhere (checkpoint_writer.py)."""
        assert len(entries) <= MAX_CHECKPOINT_ENTRIES
        lines = [str(CHECKPOINT_VERSION), str(len(entries))]
        for entry in entries:
            assert len(entry) == self.fields_per_entry
            lines.append(" ".join(str(field) for field in entry))
        return ("\n".join(lines) + "\n").encode()

    def write_entries(self, entries: Sequence[Sequence[object]], *, durable: bool = True) -> None:
        write_atomically(self.path, self.encode_entries(entries), durable=durable)

    def read_entries(self) -> list[list[str]]:
        """Entries as lists of strings; [] if the file does not exist."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return []
        lines = text.splitlines()
        if len(lines) < 2:
            raise CorruptCheckpointError(f"{self.path}: missing version or count line")
        if lines[0].strip() != str(CHECKPOINT_VERSION):
            raise CorruptCheckpointError(f"{self.path}: unsupported version {lines[0]!r}")
        count = _parse_int(self.path, lines[1], "count")
        if count < 0 or count > MAX_CHECKPOINT_ENTRIES or count != len(lines) - 2:
            raise CorruptCheckpointError(f"{self.path}: count {count} but {len(lines) - 2} entry lines")
        entries = [line.split() for line in lines[2:]]
        for entry in entries:
            if len(entry) != self.fields_per_entry:
                raise CorruptCheckpointError(f"{self.path}: malformed entry {' '.join(entry)!r}")
        return entries


class OffsetCheckpointFile:
    """`topic partition offset` entries: HW, recovery point and log start checkpoints."""

    def __init__(self, path: Path) -> None:
        self._file = CheckpointFile(path, 3)

    @property
    def path(self) -> Path:
        return self._file.path

    def encode(self, offsets: dict[tuple[str, int], int]) -> bytes:
        entries = []
        for (topic, partition), offset in sorted(offsets.items()):
            assert " " not in topic
            assert partition >= 0
            assert offset >= 0
            entries.append((topic, partition, offset))
        return self._file.encode_entries(entries)

    def write(self, offsets: dict[tuple[str, int], int]) -> None:
        write_atomically(self.path, self.encode(offsets))

    def read(self) -> dict[tuple[str, int], int]:
        offsets = {}
        for topic, partition, offset in self._file.read_entries():
            key = (topic, _parse_int(self.path, partition, "partition"))
            offsets[key] = _parse_int(self.path, offset, "offset")
        return offsets


class LeaderEpochCheckpointFile:
    """`epoch start_offset` entries of one partition's leader-epoch-checkpoint."""

    def __init__(self, path: Path) -> None:
        self._file = CheckpointFile(path, 2)

    @property
    def path(self) -> Path:
        return self._file.path

    def encode(self, entries: Sequence[tuple[int, int]]) -> bytes:
        return self._file.encode_entries(entries)

    def write(self, entries: Sequence[tuple[int, int]], *, durable: bool = True) -> None:
        self._file.write_entries(entries, durable=durable)

    def read(self) -> list[tuple[int, int]]:
        return [
            (_parse_int(self.path, epoch, "epoch"), _parse_int(self.path, offset, "start offset"))
            for epoch, offset in self._file.read_entries()
        ]
