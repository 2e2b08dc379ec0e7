"""Idempotence bookkeeping of one partition: base sequences handed to batches when first drained, the batches
in flight and those waiting to be retried, in sequence order (KIP-98)."""

import bisect
import itertools
from dataclasses import dataclass, field

from ..protocol.records import increment_sequence
from .accumulator import ProducerBatch


@dataclass(slots=True)
class PartitionState:
    """Sequence numbers and in-flight/retry queues of one partition (sans-IO)."""

    next_sequence: int = 0
    in_flight: list[ProducerBatch] = field(default_factory=list)
    retries: list[ProducerBatch] = field(default_factory=list)  # kept sorted by order_key
    backoff_until: float = 0.0

    def can_send(self, now: float, max_in_flight: int) -> bool:
        if self.retries:
            # Retry strictly one batch at a time, in order, once everything sent earlier has been answered.
            return not self.in_flight and now >= self.backoff_until
        return len(self.in_flight) < max_in_flight

    def assign_sequence(self, batch: ProducerBatch) -> None:
        assert batch.base_sequence == -1
        batch.base_sequence = self.next_sequence
        self.next_sequence = increment_sequence(self.next_sequence, len(batch.records))

    def schedule_retry(self, batch: ProducerBatch, backoff_until: float) -> None:
        assert batch not in self.retries
        bisect.insort(self.retries, batch, key=ProducerBatch.order_key)
        self.backoff_until = max(self.backoff_until, backoff_until)

    def earlier_batch_pending(self, batch: ProducerBatch) -> bool:
        """Is some batch created before this one still unacknowledged (so an out-of-order error is expected)?"""
        return any(b.batch_id < batch.batch_id for b in itertools.chain(self.in_flight, self.retries))

    def rewind_after(self, failed: ProducerBatch) -> None:
        """The broker never wrote `failed`: close the gap by moving later batches' sequences down."""
        count = len(failed.records)
        for b in itertools.chain(self.in_flight, self.retries):
            if b.batch_id > failed.batch_id and b.base_sequence >= 0:
                b.base_sequence = _decrement_sequence(b.base_sequence, count)
                b.resequenced = True
                b.payload = None  # the sequence is under the CRC: rebuild before resending
        self.next_sequence = _decrement_sequence(self.next_sequence, count)


def _decrement_sequence(sequence: int, count: int) -> int:
    assert sequence >= 0
    assert count > 0
    return (sequence - count) % (2**31)

