"""The follower's FetchRequest v12 body, kept encoded from one round to the next and patched in place.

In an incremental fetch session (KIP-227) a follower that keeps up sends, round after round, a request naming
the same partitions (those its last append moved) and forgetting none: the bytes differ only in numbers at
fixed places, the session id and epoch and each partition's fetch offset, last fetched epoch and log start
offset. So the body is encoded once for a layout (the partitions named, in order, and those forgotten) and
each later request with that layout overwrites those fields with struct.pack_into on the kept bytearray
instead of building request objects and encoding them again. A full fetch (a session reset) or a change of
layout encodes afresh. The bytes are kio's either way (tests/unit/test_fetch_request_cache.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from replog.fetcher.fetch_session import SessionRequest
from replog.log.partition_log import TopicPartition
from replog.protocol.fetch_request import (
    HEAD_FIELDS,
    PARTITION_FIELDS,
    FetchRequestData,
    FetchRequestPartitionData,
    encode_fetch_request,
)

NO_LAST_FETCHED_EPOCH = -1


@dataclass(frozen=True, slots=True)
class FetchRequestPartition:
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int | None
    log_start_offset: int  # ours: the leader records it for the follower (Fetch v5)
    max_bytes: int


class EncodedFetchRequest:
    """The last request body encoded, and where in it each partition's fields are."""

    def __init__(self, replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
                 isolation_level: int) -> None:  # fmt: skip
        self._head = (replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level)
        self._body = bytearray()
        self._names: list[TopicPartition] = []  # the partitions named, in the order the dict gave them
        self._forgotten: list[TopicPartition] = []
        self._written: list[tuple[int, TopicPartition]] = []  # (position, partition) in the body's order
        self.encodings = 0  # bodies encoded from scratch; the other requests were patched

    def body(self, request: SessionRequest[FetchRequestPartition]) -> bytes:
        """The request's body: kio's encoding of it, byte for byte. A copy: the transport may still hold
        the bytes of a request abandoned on a closed connection while the next one is patched."""
        partitions = request.partitions
        if list(partitions) != self._names or request.forgotten != self._forgotten or not self._body:
            self._encode(request)
            return bytes(self._body)
        body = self._body
        HEAD_FIELDS.pack_into(body, 0, *self._head, request.session_id, request.epoch)
        for position, tp in self._written:
            p = partitions[tp]
            last_fetched_epoch = NO_LAST_FETCHED_EPOCH if p.last_fetched_epoch is None else p.last_fetched_epoch
            PARTITION_FIELDS.pack_into(
                body, position, tp.partition, p.current_leader_epoch, p.fetch_offset, last_fetched_epoch,
                p.log_start_offset, p.max_bytes,
            )  # fmt: skip
        return bytes(body)

    def _encode(self, request: SessionRequest[FetchRequestPartition]) -> None:
        topics: dict[str, list[FetchRequestPartitionData]] = {}
        order: dict[str, list[TopicPartition]] = {}
        for tp, p in request.partitions.items():
            last_fetched_epoch = NO_LAST_FETCHED_EPOCH if p.last_fetched_epoch is None else p.last_fetched_epoch
            topics.setdefault(tp.topic, []).append(
                FetchRequestPartitionData(
                    tp.partition, p.current_leader_epoch, p.fetch_offset, last_fetched_epoch,
                    p.log_start_offset, p.max_bytes,
                )  # fmt: skip
            )
            order.setdefault(tp.topic, []).append(tp)
        forgotten: dict[str, list[int]] = {}
        for tp in request.forgotten:
            forgotten.setdefault(tp.topic, []).append(tp.partition)
        positions: list[int] = []
        encoded = encode_fetch_request(
            FetchRequestData(*self._head, request.session_id, request.epoch, topics, forgotten), positions
        )
        self._body = bytearray(encoded)
        self._names = list(request.partitions)
        self._forgotten = list(request.forgotten)
        # The encoder writes a topic's partitions together, topics in the order first seen: as `order` has them.
        self._written = list(zip(positions, [tp for tps in order.values() for tp in tps], strict=True))
        self.encodings += 1
