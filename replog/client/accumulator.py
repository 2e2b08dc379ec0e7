"""The producer's record accumulator: records appended to the open batch of their partition, batches closed by
size (batch_size) or age (linger_ms) and drained one at a time per partition by the sender."""

import asyncio
import itertools
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..protocol.records import RECORD_BATCH_OVERHEAD

TopicPartition = tuple[str, int]
RecordTuple = tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]], int]

RECORD_OVERHEAD_BYTES = 21  # varint lengths, deltas and attributes of one record, upper bound for small ones


def record_size(record: RecordTuple) -> int:
    key, value, headers, _ = record
    size = RECORD_OVERHEAD_BYTES + (len(key) if key else 0) + (len(value) if value else 0)
    for name, header_value in headers:
        size += len(name) + (len(header_value) if header_value else 0) + 4
    return size


_batch_ids = itertools.count()


@dataclass(slots=True, eq=False)
class ProducerBatch:
    topic: str
    partition: int
    created: float
    deadline: float  # delivery timeout: the batch fails if not acknowledged by then
    records: list[RecordTuple] = field(default_factory=list)
    futures: list[asyncio.Future] = field(default_factory=list)
    size: int = RECORD_BATCH_OVERHEAD
    batch_id: int = field(default_factory=lambda: next(_batch_ids))
    base_sequence: int = -1
    attempts: int = 0
    resequenced: bool = False  # its sequence moved down after an earlier batch failed for good
    payload: bytes | None = None
    done: asyncio.Future | None = None  # created by flush() for the batches it waits on
    finished: bool = False

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    def order_key(self) -> int:
        # Retries go out in sequence order (idempotent) or in creation order (which is the same thing).
        return self.batch_id


class RecordAccumulator:
    """Per-partition queues of batches; pure bookkeeping driven by the caller's clock."""

    def __init__(self, batch_size: int, linger_ms: float, delivery_timeout_ms: float) -> None:
        assert batch_size > 0
        assert linger_ms >= 0
        self.batch_size = batch_size
        self.linger = linger_ms / 1000
        self.delivery_timeout = delivery_timeout_ms / 1000
        self.buffered_bytes = 0  # bytes of batches not yet acknowledged (released by release())
        self._queues: dict[TopicPartition, deque[ProducerBatch]] = {}

    def append(
        self, tp: TopicPartition, record: RecordTuple, future: asyncio.Future, now: float
    ) -> ProducerBatch:
        """Add a record to the open batch of tp, starting a new batch when it would overflow."""
        queue = self._queues.setdefault(tp, deque())
        size = record_size(record)
        batch = queue[-1] if queue else None
        if batch is None or (batch.records and batch.size + size > self.batch_size):
            batch = ProducerBatch(tp[0], tp[1], created=now, deadline=now + self.delivery_timeout)
            queue.append(batch)
        batch.records.append(record)
        batch.futures.append(future)
        batch.size += size
        self.buffered_bytes += size
        assert len(batch.records) == len(batch.futures)
        return batch

    def ready(self, now: float, *, flush: bool) -> tuple[list[TopicPartition], float | None]:
        """Partitions whose head batch may be sent now, and when the next lingering batch becomes sendable."""
        ready: list[TopicPartition] = []
        next_time: float | None = None
        for tp, queue in self._queues.items():
            if not queue:
                continue
            head = queue[0]
            send_at = head.created + self.linger
            if flush or len(queue) > 1 or head.size >= self.batch_size or now >= send_at:
                ready.append(tp)
            else:
                next_time = send_at if next_time is None else min(next_time, send_at)
        return ready, next_time

    def drain(self, tp: TopicPartition) -> ProducerBatch:
        queue = self._queues[tp]
        batch = queue.popleft()
        if not queue:
            del self._queues[tp]
        assert batch.records
        return batch

    def expired(self, now: float) -> list[ProducerBatch]:
        """Remove and return batches whose delivery timeout passed while still waiting to be sent."""
        out: list[ProducerBatch] = []
        for tp in list(self._queues):
            queue = self._queues[tp]
            while queue and queue[0].deadline <= now:
                out.append(queue.popleft())
            if not queue:
                del self._queues[tp]
        return out

    def release(self, batch: ProducerBatch) -> None:
        self.buffered_bytes -= batch.size - RECORD_BATCH_OVERHEAD
        assert self.buffered_bytes >= 0

    def pending(self) -> list[ProducerBatch]:
        return [b for queue in self._queues.values() for b in queue]

    def __len__(self) -> int:
        return sum(len(q) for q in self._queues.values())

