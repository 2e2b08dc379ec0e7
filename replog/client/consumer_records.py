"""What the consumer hands out: records decoded from a fetch response, and ListOffsets answers."""

from dataclasses import dataclass

from ..protocol.records import decode_records, iter_batches

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


@dataclass(frozen=True, slots=True)
class OffsetAndTimestamp:
    offset: int
    timestamp: int



def decode_fetched(
    topic: str, partition: int, records: memoryview | bytes | None, fetch_offset: int
) -> tuple[list[ConsumerRecord], int]:
    """Records at or past fetch_offset, and the offset to fetch next (past any control or skipped batch)."""
    out: list[ConsumerRecord] = []
    next_offset = fetch_offset
    if not records:
        return out, next_offset
    for batch in iter_batches(records, allow_partial_tail=True):
        if batch.next_offset <= fetch_offset:
            continue  # the log returns the whole batch containing fetch_offset, and maybe earlier ones
        batch.ensure_valid()
        next_offset = batch.next_offset
        if batch.is_control:
            continue
        for r in decode_records(batch):
            if r.offset >= fetch_offset:
                out.append(ConsumerRecord(topic, partition, r.offset, r.timestamp, r.key, r.value, r.headers))
    assert next_offset >= fetch_offset
    assert all(r.offset < next_offset for r in out)
    return out, next_offset
