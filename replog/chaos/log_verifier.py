"""An independent verifier of a broker's on-disk log, written against the file formats only.

It shares no parsing code with replog/log (the code under test): record batch v2 headers are unpacked here
with struct and CRC-32C is computed here, index files are read as the documented big-endian entries, and
checkpoints as Kafka's text format (version line, count line, one entry a line). For one partition directory
it checks that

- every batch of every segment has magic 2, a sane length and a valid CRC-32C (over attributes..end);
- offsets are dense and increasing across segments: each segment starts where the one before ended, each
  batch where the one before it ended, and only the last segment may be empty;
- partition leader epochs never decrease along the log;
- every offset-index entry points at the start of the batch holding its offset; entries strictly increase;
- time-index entries are monotonic, within their segment, and no batch up to an entry's offset carries a
  later timestamp than the entry;
- the leader-epoch checkpoint is strictly monotonic in epoch and start offset, and each entry below the log
  end starts at a batch stamped with that epoch (with `exact_epochs`, for a cleanly stopped log: none is past
  the log end, and every batch's epoch is the one the checkpoint gives for its offset);

and for a log dir, that each partition's high-watermark and recovery-point checkpoints are at most its LEO.

`torn_tail` says what a crash may legitimately leave: SIGKILL can cut the last write short (the kernel
abandons a multi-page write on a fatal signal), so the last segment may end in an incomplete batch; a
complete batch with a bad CRC is never legitimate. The same tolerance covers a live broker, whose last batch
may be mid-append when it is read.
"""

from __future__ import annotations

import bisect
import itertools
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from crc32c import crc32c

# Record batch v2 (KIP-98): baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8,
# crc uint32, attributes int16, lastOffsetDelta int32, baseTimestamp int64, maxTimestamp int64,
# producerId int64, producerEpoch int16, baseSequence int32, recordsCount int32.
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
BATCH_OVERHEAD = BATCH_HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: batchLength counts the bytes after them
CRC_COVERS_FROM = 21  # the CRC-32C covers attributes to the end of the batch
MAGIC_V2 = 2
OFFSET_INDEX_ENTRY = struct.Struct(">ii")  # relative offset, file position
TIME_INDEX_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
SEGMENT_NAME_DIGITS = 20
# Anything longer is garbage, not a batch (Kafka's default message.max.bytes is about 1 MiB).
MAX_BATCH_BYTES = 64 * 1024 * 1024
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


@dataclass(frozen=True, slots=True)
class Batch:
    """One batch as found on disk."""

    segment: int  # base offset of its segment
    position: int
    size: int
    base_offset: int
    last_offset: int
    leader_epoch: int
    crc: int
    max_timestamp: int
    producer_id: int
    base_sequence: int


@dataclass
class PartitionReport:
    directory: Path
    batches: list[Batch] = field(default_factory=list)
    log_start: int = 0  # base offset of the first segment
    log_end: int = 0  # the offset after the last whole batch
    torn_tail_bytes: int = 0  # bytes after the last whole batch of the last segment
    problems: list[str] = field(default_factory=list)

    def problem(self, text: str) -> None:
        self.problems.append(f"{self.directory.name}: {text}")


def _segment_bases(directory: Path) -> list[int]:
    return sorted(int(p.stem) for p in directory.glob("*.log")
                  if p.stem.isdigit() and len(p.stem) == SEGMENT_NAME_DIGITS)


def _segment_path(directory: Path, base: int, suffix: str) -> Path:
    return directory / f"{base:0{SEGMENT_NAME_DIGITS}d}{suffix}"


def _read_entries(path: Path, entry: struct.Struct, report: PartitionReport) -> list[tuple[int, int]] | None:
    """The valid entries of an index file: up to its last nonzero byte (the active segment's index is
    preallocated with zeros), rounded up to whole entries. None if the file is absent."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    if len(data) % entry.size:
        report.problem(f"{path.name}: size {len(data)} is not a multiple of {entry.size}")
    used = -(-len(data.rstrip(b"\0")) // entry.size) * entry.size
    return [entry.unpack_from(data, at) for at in range(0, min(used, len(data) - len(data) % entry.size),
                                                          entry.size)]


def _walk_batches(data: bytes, segment: int) -> Iterator[Batch | str]:
    """The batches of one segment file, then (if the data does not end with a whole batch) one string
    saying what is wrong where; "torn:" starts the string when the data merely ends too early."""
    position = 0
    while position < len(data):
        if len(data) - position < BATCH_OVERHEAD:
            yield f"torn: {len(data) - position} bytes at {position}, less than a batch header"
            return
        (base_offset, batch_length, leader_epoch, magic, crc, _attributes, last_offset_delta, _base_timestamp,
         max_timestamp, producer_id, _producer_epoch, base_sequence, _records) = BATCH_HEADER.unpack_from(
            data, position)
        size = batch_length + LOG_OVERHEAD
        if magic != MAGIC_V2 or size < BATCH_OVERHEAD or size > MAX_BATCH_BYTES or last_offset_delta < 0:
            yield (f"not a batch at {position}: magic {magic}, length {batch_length}, "
                   f"lastOffsetDelta {last_offset_delta}")
            return
        if position + size > len(data):
            yield f"torn: batch at {position} claims {size} bytes, {len(data) - position} left"
            return
        computed = crc32c(data[position + CRC_COVERS_FROM:position + size])
        if computed != crc:
            yield f"bad CRC-32C in batch at {position} (offset {base_offset}): stored {crc}, computed {computed}"
            return
        yield Batch(segment, position, size, base_offset, base_offset + last_offset_delta, leader_epoch, crc,
                    max_timestamp, producer_id, base_sequence)
        position += size


def verify_partition(directory: Path, *, torn_tail: bool = False, exact_epochs: bool = False,
                     compacted: bool = False) -> PartitionReport:
    """Check one `<topic>-<partition>` directory; see the module docstring. A `compacted` log (cleaned by
    the log cleaner) may have gaps between batches and segments, and empty segments, but its offsets
    still strictly increase."""
    directory = Path(directory)
    report = PartitionReport(directory)
    # Indexes and the epoch checkpoint are read before the data, so on a live broker they describe no more
    # than the data read after them.
    epochs = _read_epoch_checkpoint(directory, report)
    bases = _segment_bases(directory)
    indexes = {base: (_read_entries(_segment_path(directory, base, ".index"), OFFSET_INDEX_ENTRY, report),
                      _read_entries(_segment_path(directory, base, ".timeindex"), TIME_INDEX_ENTRY, report))
               for base in bases}
    if not bases:
        report.problem("no segment")
        return report
    report.log_start = expected = bases[0]
    for number, base in enumerate(bases):
        last = number == len(bases) - 1
        data = _segment_path(directory, base, ".log").read_bytes()
        if base < expected or (base > expected and not compacted):
            report.problem(f"segment {base} starts after a gap or overlap: expected base {expected}")
        expected = max(expected, base)
        if not data and not last and not compacted:
            report.problem(f"segment {base} is empty but not the last")
        segment_batches = []
        for found in _walk_batches(data, base):
            if isinstance(found, str):
                tail = sum(b.size for b in segment_batches)
                if last and torn_tail and found.startswith("torn:"):
                    report.torn_tail_bytes = len(data) - tail
                else:
                    report.problem(f"segment {base}: {found}")
                break
            if found.base_offset < expected or (found.base_offset > expected and not compacted):
                report.problem(f"segment {base}: batch at {found.position} starts at offset {found.base_offset}, "
                               f"expected {expected}")
            if report.batches and found.leader_epoch < report.batches[-1].leader_epoch:
                report.problem(f"segment {base}: leader epoch {found.leader_epoch} at offset {found.base_offset} "
                               f"after epoch {report.batches[-1].leader_epoch}")
            expected = found.last_offset + 1
            segment_batches.append(found)
            report.batches.append(found)
        offset_index, time_index = indexes[base]
        if offset_index is None or time_index is None:
            if data and not torn_tail:
                report.problem(f"segment {base}: an index file is missing")
        else:
            _check_offset_index(report, base, offset_index, segment_batches)
            _check_time_index(report, base, time_index, segment_batches)
    report.log_end = expected
    _check_epochs(report, epochs, exact_epochs, compacted)
    return report


def _check_offset_index(report: PartitionReport, base: int, entries: list[tuple[int, int]],
                        batches: list[Batch]) -> None:
    by_position = {b.position: b for b in batches}
    previous = None
    for relative, position in entries:
        if previous is not None and (relative <= previous[0] or position <= previous[1]):
            report.problem(f"segment {base}: offset index entry {(relative, position)} after {previous}")
        previous = (relative, position)
        batch = by_position.get(position)
        if batch is None:
            report.problem(f"segment {base}: offset index entry for offset {base + relative} points at "
                           f"{position}, where no batch starts")
        elif not batch.base_offset <= base + relative <= batch.last_offset:
            report.problem(f"segment {base}: offset index entry for offset {base + relative} points at the "
                           f"batch holding {batch.base_offset}..{batch.last_offset}")


def _check_time_index(report: PartitionReport, base: int, entries: list[tuple[int, int]],
                      batches: list[Batch]) -> None:
    previous = None
    end = batches[-1].last_offset if batches else base - 1
    starts = [b.base_offset for b in batches]
    newest = list(itertools.accumulate(batches, lambda a, b: b if b.max_timestamp > a.max_timestamp else a))
    for timestamp, relative in entries:
        if previous is not None and (timestamp < previous[0] or relative < previous[1]):
            report.problem(f"segment {base}: time index entry {(timestamp, relative)} after {previous}")
        previous = (timestamp, relative)
        if not 0 <= relative <= end - base:
            report.problem(f"segment {base}: time index entry {(timestamp, relative)} outside the segment")
            continue
        upto = bisect.bisect_right(starts, base + relative)
        if upto and newest[upto - 1].max_timestamp > timestamp:
            report.problem(f"segment {base}: time index entry {(timestamp, base + relative)} but offset "
                           f"{newest[upto - 1].base_offset} has timestamp {newest[upto - 1].max_timestamp}")


def _check_epochs(report: PartitionReport, epochs: list[tuple[int, int]], exact: bool, compacted: bool) -> None:
    for (epoch, start), (next_epoch, next_start) in zip(epochs, epochs[1:], strict=False):
        if not (epoch < next_epoch and start < next_start):
            report.problem(f"leader-epoch checkpoint not monotonic: {(epoch, start)} then {(next_epoch, next_start)}")
    starts = {b.base_offset: b for b in report.batches}
    for epoch, start in epochs:
        if report.log_start <= start < report.log_end:
            batch = starts.get(start)
            if batch is None and compacted:
                # The epoch's first batch may be compacted away: the next one left carries the epoch or later.
                later = [b for b in report.batches if b.base_offset >= start]
                if later and later[0].leader_epoch < epoch:
                    report.problem(f"leader-epoch checkpoint says epoch {epoch} starts at {start}, but offset "
                                   f"{later[0].base_offset} after it has epoch {later[0].leader_epoch}")
                continue
            if batch is None or batch.leader_epoch != epoch:
                report.problem(f"leader-epoch checkpoint says epoch {epoch} starts at {start}, but the log has "
                               + ("no batch starting there" if batch is None else f"epoch {batch.leader_epoch}"))
        elif start > report.log_end and exact:
            # An entry at the log end is a leader that has appended nothing yet. Past it is legitimate only
            # in a crashed log (killed between truncating the data and the checkpoint) or a live one (the
            # data read may predate the checkpoint); a cleanly stopped log has neither excuse.
            report.problem(f"leader-epoch checkpoint entry {(epoch, start)} past the log end {report.log_end}")
    if exact:
        covering = iter(epochs)
        current, upcoming = None, next(covering, None)
        for batch in report.batches:
            while upcoming is not None and upcoming[1] <= batch.base_offset:
                current, upcoming = upcoming, next(covering, None)
            if current is None or current[0] != batch.leader_epoch:
                report.problem(f"batch at offset {batch.base_offset} has epoch {batch.leader_epoch}, the "
                               f"checkpoint says {None if current is None else current[0]}")
                return


def _read_checkpoint_lines(path: Path, fields: int, problems: list[str]) -> list[list[str]]:
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    if len(lines) < 2 or lines[0] != "0" or not lines[1].isdigit() or int(lines[1]) != len(lines) - 2:
        problems.append(f"{path}: malformed checkpoint header or count")
        return []
    entries = [line.split() for line in lines[2:]]
    if any(len(entry) != fields or not all(f.lstrip("-").isdigit() for f in entry[-2:]) for entry in entries):
        problems.append(f"{path}: malformed checkpoint entry")
        return []
    return entries


def _read_epoch_checkpoint(directory: Path, report: PartitionReport) -> list[tuple[int, int]]:
    problems: list[str] = []
    entries = _read_checkpoint_lines(directory / LEADER_EPOCH_CHECKPOINT, 2, problems)
    for text in problems:
        report.problem(text)
    return [(int(epoch), int(start)) for epoch, start in entries]


def read_offset_checkpoint(path: Path, problems: list[str]) -> dict[str, int]:
    """`topic partition offset` entries keyed by the partition directory name `<topic>-<partition>`."""
    return {f"{topic}-{partition}": int(offset)
            for topic, partition, offset in _read_checkpoint_lines(path, 3, problems)}


@dataclass
class LogDirReport:
    log_dir: Path
    partitions: dict[str, PartitionReport] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def all_problems(self) -> list[str]:
        return self.problems + [p for r in self.partitions.values() for p in r.problems]


def verify_log_dir(log_dir: Path, topic: str, *, torn_tail: bool = False, exact_epochs: bool = False,
                   checkpoints: bool = True) -> LogDirReport:
    """Verify every partition directory of `topic` in a broker's log dir, and (with `checkpoints`) that
    the HW and recovery-point checkpoints are within each partition's log."""
    log_dir = Path(log_dir)
    report = LogDirReport(log_dir)
    offsets = {}
    if checkpoints:
        # Read before the logs: on a live broker they then describe no more than the data read after them.
        offsets = {name: read_offset_checkpoint(log_dir / name, report.problems)
                   for name in (HIGH_WATERMARK_CHECKPOINT, RECOVERY_POINT_CHECKPOINT)}
    for directory in sorted(log_dir.glob(f"{topic}-*")):
        if directory.is_dir() and directory.name.rpartition("-")[2].isdigit():
            report.partitions[directory.name] = verify_partition(directory, torn_tail=torn_tail,
                                                                 exact_epochs=exact_epochs)
    for name, by_partition in offsets.items():
        for partition, offset in by_partition.items():
            verified = report.partitions.get(partition)
            if verified is not None and offset > verified.log_end:
                report.problems.append(f"{log_dir.name}/{name}: {partition} at {offset}, past its log end "
                                       f"{verified.log_end}")
    return report
