"""The controller's metadata log: durable appends, offsets that are never reused, and a start that survives
a torn or damaged file."""

import json
import logging
from pathlib import Path

import pytest
from crc32c import crc32c

from replog.controller import metadata_log
from replog.controller.metadata_log import (
    LOG_FILE_NAME,
    MAX_RECORD_BYTES,
    SNAPSHOT_FILE_NAME,
    LoggedRecord,
    MetadataLog,
)


def record(n: int) -> dict:
    return {"type": "test", "n": n, "text": "é\n\u2028"}  # a newline in a record must not split its line


def line(offset: int, payload: bytes, checksum: int | None = None) -> bytes:
    """A line as the format defines it, written independently of the module."""
    return b"%08x %d %s\n" % (crc32c(payload) if checksum is None else checksum, offset, payload)


def reopen(directory: Path) -> list[LoggedRecord]:
    log, records = MetadataLog.open(directory)
    log.close()
    return records


def write_records(directory: Path, count: int) -> Path:
    log, _ = MetadataLog.open(directory)
    log.append([record(n) for n in range(count)])
    log.close()
    return directory / LOG_FILE_NAME


def test_empty_log_is_created(tmp_path: Path) -> None:
    directory = tmp_path / "new" / "controller"
    log, records = MetadataLog.open(directory)
    assert records == []
    assert log.next_offset == 0
    assert (directory / LOG_FILE_NAME).read_bytes() == b""
    log.close()
    assert reopen(directory) == []


def test_round_trip(tmp_path: Path) -> None:
    log, _ = MetadataLog.open(tmp_path)
    assert log.append([record(0), record(1)]) == 0
    assert log.append([record(2)]) == 2
    assert log.next_offset == 3
    log.close()
    assert reopen(tmp_path) == [LoggedRecord(n, record(n)) for n in range(3)]


def test_file_format(tmp_path: Path) -> None:
    log, _ = MetadataLog.open(tmp_path)
    log.append([{"type": "x", "a": [1, 2]}, {"type": "y"}])
    log.close()
    assert (tmp_path / LOG_FILE_NAME).read_bytes() == (
        line(0, b'{"type":"x","a":[1,2]}') + line(1, b'{"type":"y"}'))


def test_offsets_continue_across_reopen(tmp_path: Path) -> None:
    write_records(tmp_path, 3)
    log, records = MetadataLog.open(tmp_path)
    assert log.next_offset == 3
    assert log.append([record(9)]) == 3
    log.close()
    assert [r.offset for r in reopen(tmp_path)] == [0, 1, 2, 3]


def test_compaction_keeps_offsets_growing(tmp_path: Path) -> None:
    log, _ = MetadataLog.open(tmp_path)
    log.append([record(n) for n in range(5)])
    assert log.compact([{"type": "snapshot", "n": 1}, {"type": "snapshot", "n": 2}]) == 5
    assert log.next_offset == 7
    assert log.append([record(7)]) == 7  # appends go to the new file
    log.close()
    assert reopen(tmp_path) == [LoggedRecord(5, {"type": "snapshot", "n": 1}),
                                LoggedRecord(6, {"type": "snapshot", "n": 2}), LoggedRecord(7, record(7))]
    assert (tmp_path / LOG_FILE_NAME).read_bytes().startswith(line(5, b'{"type":"snapshot","n":1}'))
    assert not (tmp_path / SNAPSHOT_FILE_NAME).exists()

    log, _ = MetadataLog.open(tmp_path)
    assert log.compact([{"type": "snapshot", "n": 3}]) == 8
    log.close()
    log, records = MetadataLog.open(tmp_path)
    assert records == [LoggedRecord(8, {"type": "snapshot", "n": 3})]
    assert log.next_offset == 9
    log.close()


def test_empty_batches_are_refused(tmp_path: Path) -> None:
    log, _ = MetadataLog.open(tmp_path)
    with pytest.raises(AssertionError):
        log.append([])
    with pytest.raises(AssertionError):
        log.compact([])  # an empty file would lose the next offset
    log.close()


def test_oversize_record_is_rejected_before_anything_is_written(tmp_path: Path) -> None:
    log, _ = MetadataLog.open(tmp_path)
    log.append([record(0)])
    size = (tmp_path / LOG_FILE_NAME).stat().st_size
    with pytest.raises(ValueError, match="exceeds"):
        log.append([record(1), {"type": "big", "blob": "x" * MAX_RECORD_BYTES}])
    assert (tmp_path / LOG_FILE_NAME).stat().st_size == size
    assert log.next_offset == 1
    assert log.append([record(1)]) == 1
    log.close()


@pytest.mark.parametrize("bad", [["not", "an", "object"], {"type": "nan", "x": float("nan")}, {"type": object()}])
def test_records_that_would_not_read_back_are_rejected(tmp_path: Path, bad: object) -> None:
    log, _ = MetadataLog.open(tmp_path)
    with pytest.raises((TypeError, ValueError)):
        log.append([bad])  # type: ignore[list-item]
    assert log.next_offset == 0
    log.close()
    assert (tmp_path / LOG_FILE_NAME).read_bytes() == b""


# Ways the last line can be bad: each is cut away with a warning, and the log goes on from there.
NEXT_PAYLOAD = b'{"type":"test","n":3}'
NEXT_LINE = line(3, NEXT_PAYLOAD)
BAD_LAST_LINES = {
    "torn (half a line)": NEXT_LINE[:12],
    "no newline": NEXT_LINE[:-1],
    "bad checksum": line(3, NEXT_PAYLOAD, checksum=0x12345678),
    "uppercase checksum": NEXT_LINE[:8].upper() + NEXT_LINE[8:],
    "not JSON": line(3, b'{"type":"test"'),
    "JSON but not an object": line(3, b"[1,2]"),
    "offset not next": line(4, NEXT_PAYLOAD),
    "offset with leading zero": NEXT_LINE.replace(b" 3 ", b" 03 "),
    "negative offset": NEXT_LINE.replace(b" 3 ", b" -3 "),
    "missing field": b"%08x %s\n" % (crc32c(b"{}"), b"{}"),
    "empty line": b"\n",
}


def test_uppercase_checksum_case_has_hex_letters() -> None:
    assert BAD_LAST_LINES["uppercase checksum"] != NEXT_LINE


@pytest.mark.parametrize("tail", BAD_LAST_LINES.values(), ids=BAD_LAST_LINES.keys())
def test_bad_last_line_is_truncated_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                   tail: bytes) -> None:
    path = write_records(tmp_path, 3)
    intact = path.read_bytes()
    path.write_bytes(intact + tail)
    with caplog.at_level(logging.WARNING, logger=metadata_log.__name__):
        log, records = MetadataLog.open(tmp_path)
    assert records == [LoggedRecord(n, record(n)) for n in range(3)]
    assert path.read_bytes() == intact
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert f"truncating the {len(tail)} bytes" in caplog.records[0].getMessage()
    assert log.append([record(3)]) == 3
    log.close()
    assert [r.offset for r in reopen(tmp_path)] == [0, 1, 2, 3]


def test_bad_checksum_in_the_middle_truncates_from_there_with_an_error(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write_records(tmp_path, 4)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b'"n":1', b'"n":7')  # a flipped digit: the checksum no longer matches
    path.write_bytes(b"".join(lines))
    with caplog.at_level(logging.WARNING, logger=metadata_log.__name__):
        log, records = MetadataLog.open(tmp_path)
    assert records == [LoggedRecord(0, record(0))]
    assert path.read_bytes() == lines[0]
    assert [r.levelno for r in caplog.records] == [logging.ERROR]
    assert "followed by valid lines" in caplog.records[0].getMessage()
    assert log.append([record(1)]) == 1  # the damaged records are lost, and their offsets with them
    log.close()


def test_gap_in_offsets_truncates_from_the_gap(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write_records(tmp_path, 2)
    path.write_bytes(path.read_bytes() + line(5, b'{"type":"a"}') + line(6, b'{"type":"b"}'))
    with caplog.at_level(logging.WARNING, logger=metadata_log.__name__):
        records = reopen(tmp_path)
    assert [r.offset for r in records] == [0, 1]
    assert [r.levelno for r in caplog.records] == [logging.ERROR]


def test_first_line_may_start_at_any_offset(tmp_path: Path) -> None:
    (tmp_path / LOG_FILE_NAME).write_bytes(line(41, b'{"type":"a"}') + line(42, b'{"type":"b"}'))
    log, records = MetadataLog.open(tmp_path)
    assert [r.offset for r in records] == [41, 42]
    assert log.next_offset == 43
    log.close()


def test_leftover_compaction_file_is_deleted(tmp_path: Path) -> None:
    path = write_records(tmp_path, 3)
    (tmp_path / SNAPSHOT_FILE_NAME).write_bytes(line(3, b'{"type":"snapshot"}')[:10])  # crashed mid-compaction
    log, records = MetadataLog.open(tmp_path)
    assert [r.offset for r in records] == [0, 1, 2]
    assert not (tmp_path / SNAPSHOT_FILE_NAME).exists()
    assert log.compact([{"type": "snapshot"}]) == 3
    log.close()
    assert path.read_bytes() == line(3, b'{"type":"snapshot"}')


def test_failed_sync_closes_the_log_and_reopening_recovers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log, _ = MetadataLog.open(tmp_path)
    log.append([record(0)])

    def failing_fdatasync(fd: int) -> None:
        raise OSError("EIO")

    monkeypatch.setattr(metadata_log.os, "fdatasync", failing_fdatasync)
    with pytest.raises(OSError, match="EIO"):
        log.append([record(1)])
    monkeypatch.undo()
    with pytest.raises(ValueError, match="closed"):
        log.append([record(1)])
    # The write itself reached the file, so the record is there; it was never acknowledged, as after a crash
    # between write and sync.
    log, records = MetadataLog.open(tmp_path)
    assert [r.record for r in records] == [record(0), record(1)]
    log.close()


def test_records_round_trip_as_json(tmp_path: Path) -> None:
    log, _ = MetadataLog.open(tmp_path)
    log.append([{"type": "t", "replicas": (1, 2), "nested": {"k": None, "f": 1.5}}])
    log.close()
    assert reopen(tmp_path)[0].record == json.loads(json.dumps({"type": "t", "replicas": [1, 2],
                                                                "nested": {"k": None, "f": 1.5}}))
