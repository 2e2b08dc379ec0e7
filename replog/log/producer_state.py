"""Idempotent producer state (Kafka's ProducerStateManager, without transactions).

Per producer id we keep its epoch and the metadata of its last 5 batches, the
window a producer may have in flight (max.in.flight.requests.per.connection).
A retried batch found in that window is answered with its original offsets.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from dataclasses import dataclass

from replog.log.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from replog.protocol.records import NO_PRODUCER_ID, BatchHeader, increment_sequence

RETAINED_BATCHES = 5
# Kafka's producer.id.expiration.ms default: idle producers are forgotten after a day.
PRODUCER_ID_EXPIRATION_MS = 24 * 3600 * 1000


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class ProducerEntry:
    """One producer's epoch and its last RETAINED_BATCHES batches, oldest first."""

    __slots__ = ("producer_id", "epoch", "batches")

    def __init__(self, producer_id: int, epoch: int) -> None:
        self.producer_id = producer_id
        self.epoch = epoch
        self.batches: collections.deque[BatchMetadata] = collections.deque(maxlen=RETAINED_BATCHES)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq

    @property
    def last_timestamp(self) -> int:
        return self.batches[-1].timestamp

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.epoch:
            return None
        for meta in self.batches:
            if meta.first_seq == header.base_sequence and meta.last_seq == header.last_sequence:
                return meta
        return None


def _check_sequence(entry: ProducerEntry | None, header: BatchHeader) -> None:
    """Raise unless `header` may follow `entry` (leader-side validation)."""
    if entry is None:
        # A producer this log has no state for (its batches were deleted by retention or DeleteRecords, or
        # are older than the segments state is rebuilt from) may go on at any sequence, as in Kafka since
        # KIP-360 (ProducerAppendInfo.checkSequence): refusing it would be fatal to an idempotent producer.
        return
    if header.producer_epoch < entry.epoch:
        raise InvalidProducerEpochError(
            f"producer {header.producer_id} epoch {header.producer_epoch} is older than {entry.epoch}"
        )
    if header.producer_epoch > entry.epoch or not entry.batches:
        if header.base_sequence != 0:
            raise OutOfOrderSequenceError(
                f"producer {header.producer_id} new epoch {header.producer_epoch} must start at sequence 0"
            )
        return
    expected = increment_sequence(entry.last_seq, 1)
    if header.base_sequence != expected:
        raise OutOfOrderSequenceError(
            f"producer {header.producer_id} epoch {header.producer_epoch}: sequence {header.base_sequence}, "
            f"expected {expected}"
        )


class ProducerStateManager:
    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}

    def __len__(self) -> int:
        return len(self._producers)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    def check_append(self, headers: Iterable[BatchHeader]) -> BatchMetadata | None:
        """Validate one request's batches in order; nothing is recorded here.

        Returns the original metadata if a batch is a retry of a retained one;
        like Kafka, the whole request is then answered as that duplicate.
        """
        pending: dict[int, ProducerEntry] = {}
        for header in headers:
            if header.producer_id == NO_PRODUCER_ID:
                continue
            entry = pending.get(header.producer_id)
            if entry is None:
                entry = self._producers.get(header.producer_id)
                duplicate = entry.find_duplicate(header) if entry is not None else None
                if duplicate is not None:
                    return duplicate
            _check_sequence(entry, header)
            # Later batches of the same request must follow this one.
            scratch = ProducerEntry(header.producer_id, header.producer_epoch)
            scratch.batches.append(BatchMetadata(header.base_sequence, header.last_sequence, -1, -1, -1))
            pending[header.producer_id] = scratch
        return None

    def record(self, header: BatchHeader) -> None:
        """Remember an appended batch (already stamped with its offsets); never rejects."""
        if header.producer_id == NO_PRODUCER_ID:
            return
        entry = self._producers.get(header.producer_id)
        if entry is None or header.producer_epoch > entry.epoch:
            entry = ProducerEntry(header.producer_id, header.producer_epoch)
            self._producers[header.producer_id] = entry
        assert header.producer_epoch >= entry.epoch
        assert header.base_offset >= 0
        entry.batches.append(
            BatchMetadata(
                header.base_sequence, header.last_sequence, header.base_offset, header.last_offset,
                header.max_timestamp,
            )
        )  # fmt: skip

    def remove_expired(self, now_ms: int, expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> int:
        """Bound the map: drop producers idle for longer than `expiration_ms`."""
        expired = [pid for pid, e in self._producers.items() if now_ms - e.last_timestamp > expiration_ms]
        for producer_id in expired:
            del self._producers[producer_id]
        return len(expired)

    def clear(self) -> None:
        self._producers.clear()
