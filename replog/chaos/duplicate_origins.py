"""Where each copy of a duplicated value came from, read from a kept cluster directory, so that a crash loop
that finds a duplicate explains it: every copy's batch (offset, producer id, producer epoch, base sequence),
the partition leader epoch it was written in and the broker that led that epoch (from the brokers' own
"leader in epoch" log lines), and the round whose kill followed its write.

Two copies under one producer id with the epoch bumped and the second at sequence 0 are an idempotent
producer's epoch bump (KIP-360) renumbering a batch that was written but never acknowledged; the writers'
librdkafka EOS logs (`writer-<name>.log` in the same directory) say what made it bump.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..protocol.records import CorruptRecordError, decode_records, iter_batches

LEADER_LINE = re.compile(r"(?P<topic>[\w.-]+)-(?P<partition>\d+): leader in epoch (?P<epoch>\d+)")


@dataclass(frozen=True)
class Copy:
    partition: int
    offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    leader_epoch: int
    timestamp_ms: int


def leaders_by_epoch(root: Path, topic: str) -> dict[tuple[int, int], int]:
    """(partition, leader epoch) -> the broker that said it led it, from `broker-<id>.out`."""
    leaders = {}
    for out in sorted(root.glob("broker-*.out")):
        broker = int(out.stem.split("-", 1)[1])
        for match in LEADER_LINE.finditer(out.read_text(errors="replace")):
            if match["topic"] == topic:
                leaders[int(match["partition"]), int(match["epoch"])] = broker
    return leaders


def find_copies(log_dir: Path, topic: str, wanted: Mapping[str, set[tuple[int, int]]],
                decode: Callable[[bytes], str]) -> dict[str, list[Copy]]:
    """The batch of each (partition, offset) where a wanted value was read, from one replica's log dir."""
    found: dict[str, list[Copy]] = {value: [] for value in wanted}
    where = {(partition, offset): value for value, places in wanted.items() for partition, offset in places}
    for partition in sorted({partition for partition, _ in where}):
        for segment in sorted((log_dir / f"{topic}-{partition}").glob("*.log")):
            try:
                for batch in iter_batches(segment.read_bytes(), allow_partial_tail=True):
                    header = batch.header
                    if not any((partition, o) in where for o in range(header.base_offset, header.last_offset + 1)):
                        continue
                    for record in decode_records(batch):
                        value = where.get((partition, record.offset))
                        if value is not None and record.value is not None and decode(record.value) == value:
                            found[value].append(Copy(partition, record.offset, header.producer_id,
                                                     header.producer_epoch, header.base_sequence,
                                                     header.partition_leader_epoch, header.max_timestamp))
            except CorruptRecordError:
                continue  # the verifier reports the damage; the copies before it are still listed
    return found


def round_after(timestamp_ms: int, kill_times_ms: Sequence[tuple[int, int]]) -> int | None:
    """The number of the first round killed after `timestamp_ms`: the round the write happened in."""
    for number, killed_ms in kill_times_ms:
        if killed_ms >= timestamp_ms:
            return number
    return None


def explain(copies: Mapping[str, list[Copy]], leaders: Mapping[tuple[int, int], int],
            kill_times_ms: Sequence[tuple[int, int]]) -> list[str]:
    lines = []
    for value, found in copies.items():
        parts = []
        for copy in sorted(found, key=lambda c: (c.partition, c.offset)):
            leader = leaders.get((copy.partition, copy.leader_epoch))
            parts.append(f"{copy.partition}/{copy.offset}: producer {copy.producer_id} epoch {copy.producer_epoch} "
                         f"base sequence {copy.base_sequence}, leader epoch {copy.leader_epoch} "
                         f"(broker {'?' if leader is None else leader})")
        # Every copy carries the producer's timestamp of the record, so this places the first send only.
        round_number = round_after(min((c.timestamp_ms for c in found), default=0), kill_times_ms)
        produced = "after the last kill" if round_number is None else f"before the kill of round #{round_number}"
        lines.append(f"{value!r} (produced {produced}): " + "; ".join(parts) + _verdict(found))
    return lines


def _verdict(found: list[Copy]) -> str:
    epochs = {(c.producer_id, c.producer_epoch) for c in found}
    if len({pid for pid, _ in epochs}) == 1 and len(epochs) == len(found) and any(
            c.base_sequence == 0 and c.producer_epoch > min(e for _, e in epochs) for c in found):
        return " -> re-sent at sequence 0 after a producer epoch bump (KIP-360): see the writer's EOS log"
    return ""


def duplicated_values(read: Mapping[int, Iterable[tuple[int, str]]], limit: int) -> dict[str, set[tuple[int, int]]]:
    """Up to `limit` values read at more than one (partition, offset)."""
    places: dict[str, set[tuple[int, int]]] = {}
    for partition, records in read.items():
        for offset, value in records:
            places.setdefault(value, set()).add((partition, offset))
    duplicated = {value: where for value, where in sorted(places.items()) if len(where) > 1}
    return dict(list(duplicated.items())[:limit])
