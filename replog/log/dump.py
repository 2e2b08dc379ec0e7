"""kafka-dump-log style dump of segment files, tolerant of torn or corrupt data."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from replog.log.segment_files import LOG_SUFFIX
from replog.protocol.records import RECORD_BATCH_OVERHEAD, CorruptRecordError, RecordBatch, parse_header

# A batch header claiming more than this is treated as garbage, not read.
MAX_DUMP_BATCH_BYTES = 256 * 1024 * 1024


def dump_log_file(path: Path) -> Iterator[dict]:
    """One dict per batch of a `.log` file (or of each `.log` in a directory,
    in offset order); a problem at the tail ends the walk with an entry whose
    "error" key says what is wrong."""
    path = Path(path)
    if path.is_dir():
        for log_file in sorted(path.glob("*" + LOG_SUFFIX)):
            yield from _dump_one(log_file)
        return
    yield from _dump_one(path)


def _dump_one(path: Path) -> Iterator[dict]:
    with open(path, "rb", buffering=0) as f:
        file_size = os.fstat(f.fileno()).st_size
        position = 0
        while position < file_size:
            entry = _dump_batch(f.fileno(), path, position, file_size)
            yield entry
            if "error" in entry:
                return
            position += entry["size"]
        assert position == file_size


def _dump_batch(fd: int, path: Path, position: int, file_size: int) -> dict:
    problem = {"file": str(path), "position": position, "remaining_bytes": file_size - position}
    raw = os.pread(fd, RECORD_BATCH_OVERHEAD, position)
    if len(raw) < RECORD_BATCH_OVERHEAD:
        return {**problem, "error": f"torn batch header ({len(raw)} of {RECORD_BATCH_OVERHEAD} bytes)"}
    try:
        header = parse_header(raw)
    except CorruptRecordError as exc:
        return {**problem, "error": f"corrupt batch header: {exc}"}
    size = header.size_in_bytes
    if size > MAX_DUMP_BATCH_BYTES or position + size > file_size:
        return {**problem, "error": f"torn batch: header says {size} bytes"}
    batch = RecordBatch(memoryview(os.pread(fd, size, position)))
    return {
        "file": str(path),
        "base_offset": header.base_offset,
        "last_offset": header.last_offset,
        "partition_leader_epoch": header.partition_leader_epoch,
        "count": header.records_count,
        "crc": header.crc,
        "crc_valid": batch.is_crc_valid(),
        "size": size,
        "position": position,
        "producer_id": header.producer_id,
        "producer_epoch": header.producer_epoch,
        "base_sequence": header.base_sequence,
        "compression": header.compression.name.lower(),
        "max_timestamp": header.max_timestamp,
        "is_transactional": header.is_transactional,
        "is_control": header.is_control,
    }


def _bool(value: bool) -> str:
    return "true" if value else "false"


def format_dump(entries: Iterable[dict]) -> str:
    lines = []
    current_file = None
    for entry in entries:
        if entry["file"] != current_file:
            current_file = entry["file"]
            lines.append(f"Dumping {current_file}")
        if "error" in entry:
            lines.append(
                f"Found invalid data at position: {entry['position']} "
                f"({entry['remaining_bytes']} bytes left): {entry['error']}"
            )
            continue
        lines.append(
            f"baseOffset: {entry['base_offset']} lastOffset: {entry['last_offset']} count: {entry['count']} "
            f"baseSequence: {entry['base_sequence']} producerId: {entry['producer_id']} "
            f"producerEpoch: {entry['producer_epoch']} partitionLeaderEpoch: {entry['partition_leader_epoch']} "
            f"isTransactional: {_bool(entry['is_transactional'])} isControl: {_bool(entry['is_control'])} "
            f"position: {entry['position']} CreateTime: {entry['max_timestamp']} size: {entry['size']} "
            f"magic: 2 compresscodec: {entry['compression']} crc: {entry['crc']} "
            f"isvalid: {_bool(entry['crc_valid'])}"
        )
    return "\n".join(lines) + ("\n" if lines else "")
