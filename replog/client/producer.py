"""Asynchronous producer: the Producer API and its sender loop.

Records are appended to the open batch of their partition (accumulator.py); a batch is closed by size
(batch_size) or age (linger_ms), then encoded once with build_batch and sent to the partition leader, one batch
per partition per ProduceRequest, all partitions of a leader in one request. With idempotence each batch gets
its producer id, epoch and base sequence when it is first drained and keeps them across retries
(sequences.py); up to five batches per partition may be in flight, and a partition that has a batch to retry
sends nothing else until the retry queue is empty, so the broker always sees sequences in order.
"""

import asyncio
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from ..protocol.apis import ApiKey
from ..protocol.produce import (
    ProducePartitionData,
    ProduceRequestData,
    ProduceTopicData,
    encode_produce_request,
)
from ..protocol.records import Compression, build_batch
from .accumulator import ProducerBatch, RecordAccumulator, TopicPartition
from .cluster import Cluster
from .connection import decode_response_frame
from .errors import REQUEST_TIMED_OUT, STALE_METADATA_CODES, KafkaError, is_retriable
from .partitioner import partition_for_key
from .security import ClientSecurity
from .sequences import PartitionState

DUPLICATE_SEQUENCE = ErrorCode.duplicate_sequence_number.value
OUT_OF_ORDER_SEQUENCE = ErrorCode.out_of_order_sequence_number.value
# Outcomes that leave it unknown whether the broker wrote the batch; sequences cannot be rewound after them.
_UNKNOWN_OUTCOME = frozenset({REQUEST_TIMED_OUT, ErrorCode.network_exception.value})
MAX_IN_FLIGHT_IDEMPOTENT = 5  # the broker remembers the last 5 batches per producer for deduplication
MAX_SENDER_SLEEP_S = 1.0
_COMPRESSION_NAMES = {c.name.lower(): c for c in Compression}


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    topic: str
    partition: int
    offset: int  # -1 with acks=0
    timestamp: int


def parse_compression(name: str | Compression) -> Compression:
    if isinstance(name, Compression):
        return name
    try:
        return _COMPRESSION_NAMES[name.lower()]
    except KeyError:
        raise ValueError(
            f"unknown compression {name!r}; expected one of {sorted(_COMPRESSION_NAMES)}"
        ) from None


def parse_acks(acks: int | str) -> int:
    value = -1 if acks in ("all", "-1") else int(acks)
    if value not in (-1, 0, 1):
        raise ValueError(f"acks must be all, -1, 0 or 1, not {acks!r}")
    return value


class Producer:
    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        acks: int | str = -1,
        linger_ms: float = 5,
        batch_size: int = 16384,
        compression: str | Compression = "none",
        enable_idempotence: bool | None = None,
        retries: int = 2**31 - 1,
        delivery_timeout_ms: int = 120_000,
        request_timeout_ms: int = 30_000,
        max_in_flight: int = 5,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        buffer_memory: int = 32 * 1024 * 1024,
        max_block_ms: int = 60_000,
        client_id: str = "replog-producer",
        security: ClientSecurity | None = None,
    ) -> None:
        """security: TLS and SASL for every connection (None: PLAINTEXT)."""
        self.acks = parse_acks(acks)
        # Like Kafka: idempotence is on by default, but only when acks=all makes it possible.
        if enable_idempotence is None:
            enable_idempotence = self.acks == -1
        if enable_idempotence and self.acks != -1:
            raise ValueError("enable_idempotence requires acks=all")
        if enable_idempotence and max_in_flight > MAX_IN_FLIGHT_IDEMPOTENT:
            raise ValueError(f"enable_idempotence allows at most {MAX_IN_FLIGHT_IDEMPOTENT} in flight")
        assert retries >= 0
        assert delivery_timeout_ms >= request_timeout_ms > 0
        self.idempotent = enable_idempotence
        self.compression = parse_compression(compression)
        self.retries = retries
        self.request_timeout_ms = request_timeout_ms
        self.max_in_flight = max_in_flight
        self.retry_backoff = retry_backoff_ms / 1000
        self.retry_backoff_max = retry_backoff_max_ms / 1000
        self.buffer_memory = buffer_memory
        self.max_block = max_block_ms / 1000
        self.cluster = Cluster(
            bootstrap,
            client_id=client_id,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            security=security,
        )
        self.producer_id = -1
        self.producer_epoch = -1
        self._accumulator = RecordAccumulator(batch_size, linger_ms, delivery_timeout_ms)
        self._partitions: dict[TopicPartition, PartitionState] = {}
        self._sticky: dict[str, int] = {}
        self._sender: asyncio.Task | None = None
        self._wake_requested = False
        self._wake_future: asyncio.Future | None = None  # what the idle sender awaits
        self._space = asyncio.Event()  # set whenever buffered bytes drop, to wake blocked senders
        self._flushes = 0
        self._closing = False
        self._refresh: asyncio.Task | None = None
        self._requests: set[asyncio.Task] = set()

    async def __aenter__(self) -> "Producer":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect, and with idempotence obtain a producer id; send() calls this on first use."""
        if self._sender is not None:
            return
        self._sender = asyncio.ensure_future(self._run())
        if self.idempotent and self.producer_id < 0:
            await self._init_producer_id()

    async def _init_producer_id(self) -> None:
        conn = await self.cluster.any_connection()
        response = await conn.send(
            ApiKey.INIT_PRODUCER_ID,
            {
                "transactional_id": None,
                "transaction_timeout": 60_000,
                "producer_id": -1,
                "producer_epoch": -1,
            },
        )
        if response.error_code != 0:
            raise KafkaError(response.error_code, "InitProducerId failed")
        self.producer_id = int(response.producer_id)
        self.producer_epoch = int(response.producer_epoch)
        assert self.producer_id >= 0
        assert self.producer_epoch >= 0

    async def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        timestamp_ms: int | None = None,
    ) -> asyncio.Future:
        """Queue one record; the returned future resolves to its RecordMetadata once acknowledged."""
        if self._closing:
            raise RuntimeError("producer is closed")
        assert value is None or isinstance(value, (bytes, bytearray, memoryview)), "value must be bytes"
        assert key is None or isinstance(key, (bytes, bytearray, memoryview)), "key must be bytes"
        await self.start()
        partitions = await self.cluster.partitions_for(topic)
        if partition is None:
            partition = self._choose_partition(topic, key, partitions)
        elif partition not in partitions:
            raise KafkaError(
                ErrorCode.unknown_topic_or_partition.value, f"{topic} has no partition {partition}"
            )
        await self._wait_for_space()
        if timestamp_ms is None:
            timestamp_ms = time.time_ns() // 1_000_000
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        batch = self._accumulator.append(
            (topic, partition), (key, value, headers or (), timestamp_ms), future, loop.time()
        )
        if batch.size >= self._accumulator.batch_size:
            if key is None:
                self._sticky.pop(topic, None)  # a full batch moves keyless records to another partition
            self._wake()
        elif len(batch.records) == 1:
            self._wake()  # the sender must learn about the new batch's linger deadline
        return future

    def _choose_partition(self, topic: str, key: bytes | None, partitions: list[int]) -> int:
        if key is not None:
            return partitions[partition_for_key(bytes(key), len(partitions))]
        sticky = self._sticky.get(topic)
        if sticky is None or sticky not in partitions:
            sticky = random.choice(partitions)
            self._sticky[topic] = sticky
        return sticky

    async def _wait_for_space(self) -> None:
        """Backpressure: block (up to max_block_ms) while unacknowledged data exceeds buffer_memory."""
        deadline = asyncio.get_running_loop().time() + self.max_block
        while self._accumulator.buffered_bytes >= self.buffer_memory:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise KafkaError(
                    REQUEST_TIMED_OUT, f"buffer full ({self.buffer_memory} bytes) for {self.max_block}s"
                )
            self._space.clear()
            try:
                await asyncio.wait_for(self._space.wait(), remaining)
            except TimeoutError:
                continue

    async def flush(self, timeout_ms: int | None = None) -> None:
        """Send everything queued now and wait until each batch is acknowledged or failed."""
        if self._sender is None:
            return
        self._flushes += 1
        try:
            self._wake()
            pending = self._pending_batches()
            loop = asyncio.get_running_loop()
            for batch in pending:
                if batch.done is None:
                    batch.done = loop.create_future()
            waits = [asyncio.shield(b.done) for b in pending]
            if waits:
                await asyncio.wait_for(
                    asyncio.gather(*waits), None if timeout_ms is None else timeout_ms / 1000
                )
        finally:
            self._flushes -= 1

    def _pending_batches(self) -> list[ProducerBatch]:
        out = self._accumulator.pending()
        for state in self._partitions.values():
            out.extend(state.in_flight)
            out.extend(state.retries)
        return out

    async def close(self, timeout_ms: int | None = None) -> None:
        """Flush, stop the sender and close connections; records still unsent after the timeout fail."""
        if self._closing:
            return
        try:
            await self.flush(timeout_ms)
        finally:
            self._closing = True
            self._fail_all(KafkaError(ErrorCode.network_exception.value, "producer closed"))
            tasks = [t for t in (self._sender, self._refresh, *self._requests) if t is not None]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)  # let them unwind before the loop may stop
            await self.cluster.close()

    def _fail_all(self, error: KafkaError) -> None:
        for batch in self._accumulator.pending():
            self._finish(batch, error=error)
        for state in self._partitions.values():
            for batch in state.in_flight + state.retries:
                self._finish(batch, error=error)
            state.in_flight.clear()
            state.retries.clear()

    # The sender: plain functions decide what to send; only _run and _send_to await.

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._wake_requested = False
            now = loop.time()
            self._expire(now)
            by_leader, wake_at = self._collect(now)
            for node, batches in by_leader.items():
                task = asyncio.ensure_future(self._send_to(node, batches))
                self._requests.add(task)
                task.add_done_callback(self._requests.discard)
            await self._sleep(min(MAX_SENDER_SLEEP_S, max(0.0, wake_at - now)))

    async def _sleep(self, timeout: float) -> None:
        """Idle until _wake() or the timeout; a wake requested during the round is not lost."""
        if self._wake_requested or timeout <= 0:
            await asyncio.sleep(0)
            return
        loop = asyncio.get_running_loop()
        self._wake_future = loop.create_future()
        timer = loop.call_later(timeout, self._wake)
        try:
            await self._wake_future
        finally:
            timer.cancel()
            self._wake_future = None

    def _wake(self) -> None:
        self._wake_requested = True
        if self._wake_future is not None and not self._wake_future.done():
            self._wake_future.set_result(None)

    def _collect(self, now: float) -> tuple[dict[int, list[ProducerBatch]], float]:
        """Pick at most one batch per sendable partition, grouped by leader; also when to look again."""
        ready, linger_at = self._accumulator.ready(now, flush=self._flushes > 0)
        wake_at = now + MAX_SENDER_SLEEP_S if linger_at is None else linger_at
        candidates = dict.fromkeys(ready)
        candidates.update(dict.fromkeys(tp for tp, state in self._partitions.items() if state.retries))
        by_leader: dict[int, list[ProducerBatch]] = {}
        for tp in candidates:
            state = self._partitions.setdefault(tp, PartitionState())
            if state.retries and not state.in_flight:
                wake_at = min(wake_at, state.backoff_until)
            if not state.can_send(now, self.max_in_flight):
                continue
            try:
                leader = self.cluster.leader(*tp).leader
            except KafkaError:
                self._refresh_metadata()
                continue
            if state.retries:
                batch = state.retries.pop(0)
            else:
                batch = self._accumulator.drain(tp)
                if self.idempotent:
                    state.assign_sequence(batch)
            batch.attempts += 1
            state.in_flight.append(batch)
            by_leader.setdefault(leader, []).append(batch)
        return by_leader, wake_at

    def _expire(self, now: float) -> None:
        for batch in self._accumulator.expired(now):
            self._finish(
                batch, error=KafkaError(REQUEST_TIMED_OUT, "delivery timeout expired before sending")
            )
        for state in self._partitions.values():
            for batch in [b for b in state.retries if b.deadline <= now]:
                state.retries.remove(batch)
                self._finish(
                    batch, error=KafkaError(REQUEST_TIMED_OUT, "delivery timeout expired while retrying")
                )

    def _encode(self, batch: ProducerBatch) -> bytes:
        """Build the wire batch once; it is rebuilt only if its sequence had to move."""
        if batch.payload is None:
            batch.payload = build_batch(
                batch.records,
                compression=self.compression,
                producer_id=self.producer_id if self.idempotent else -1,
                producer_epoch=self.producer_epoch if self.idempotent else -1,
                base_sequence=batch.base_sequence,
            )
            batch.resequenced = False
        return batch.payload

    async def _send_to(self, node: int, batches: list[ProducerBatch]) -> None:
        try:
            results = await self._produce(node, batches)
        except KafkaError as e:
            now = asyncio.get_running_loop().time()
            for batch in batches:
                self._on_error(batch, e.code, str(e), now)
        else:
            now = asyncio.get_running_loop().time()
            for batch in batches:
                code, base_offset, timestamp, message = results.get(
                    batch.tp,
                    (ErrorCode.unknown_server_error.value, -1, -1, "partition missing from response"),
                )
                if batch.finished:
                    continue  # failed by close() while the request was out
                if code in (0, DUPLICATE_SEQUENCE):
                    self._partitions[batch.tp].in_flight.remove(batch)
                    self._finish(batch, base_offset=base_offset, timestamp=timestamp)
                else:
                    self._on_error(batch, code, message, now)
        finally:
            self._wake()

    async def _produce(
        self, node: int, batches: list[ProducerBatch]
    ) -> dict[TopicPartition, tuple[int, int, int, str]]:
        """One ProduceRequest to one leader: {tp: (error_code, base_offset, log_append_time, message)}."""
        conn = await self.cluster.connection(node)
        version = conn.pick_version(ApiKey.PRODUCE)
        topics: dict[str, ProduceTopicData] = {}
        for batch in batches:
            data = ProducePartitionData(batch.partition, memoryview(self._encode(batch)))
            topics.setdefault(batch.topic, ProduceTopicData(batch.topic)).partitions.append(data)
        request = ProduceRequestData(None, self.acks, self.request_timeout_ms, list(topics.values()))
        parts = encode_produce_request(version, request)
        frame = await conn.request(ApiKey.PRODUCE, version, parts, expect_response=self.acks != 0)
        if frame is None:  # acks=0: the broker sends no response, so there is no offset to report
            return {batch.tp: (0, -1, -1, "") for batch in batches}
        response = decode_response_frame(ApiKey.PRODUCE, version, frame)
        results = {}
        for topic in response.responses:
            for p in topic.partition_responses:
                append_time = getattr(p, "log_append_time", None)
                timestamp = -1 if append_time is None else round(append_time.timestamp() * 1000)
                message = getattr(p, "error_message", None) or ""
                results[(topic.name, int(p.index))] = (
                    int(p.error_code),
                    int(p.base_offset),
                    timestamp,
                    message,
                )
        return results

    def _on_error(self, batch: ProducerBatch, code: int, message: str, now: float) -> None:
        state = self._partitions[batch.tp]
        if batch.finished:
            return  # already failed by close()
        state.in_flight.remove(batch)
        if self._should_retry(batch, state, code, now):
            backoff = min(self.retry_backoff_max, self.retry_backoff * 2 ** (batch.attempts - 1))
            state.schedule_retry(batch, now + backoff)
            if code in STALE_METADATA_CODES:
                self._refresh_metadata()
            return
        if self.idempotent and batch.base_sequence >= 0 and code not in _UNKNOWN_OUTCOME:
            state.rewind_after(batch)
        self._finish(batch, error=KafkaError(code, f"{batch.topic}-{batch.partition}: {message}"))

    def _should_retry(self, batch: ProducerBatch, state: PartitionState, code: int, now: float) -> bool:
        if self._closing or batch.attempts > self.retries or now >= batch.deadline:
            return False
        if code == OUT_OF_ORDER_SEQUENCE:
            # Expected when an earlier batch of the partition failed or its sequence moved: resend in order.
            return batch.resequenced or state.earlier_batch_pending(batch)
        return is_retriable(code)

    def _finish(
        self,
        batch: ProducerBatch,
        *,
        base_offset: int = -1,
        timestamp: int = -1,
        error: KafkaError | None = None,
    ) -> None:
        if batch.finished:
            return
        batch.finished = True
        self._accumulator.release(batch)
        if error is not None:
            for future in batch.futures:
                if not future.done():
                    future.set_exception(error)
        else:
            topic, partition = batch.tp
            for i, (future, record) in enumerate(zip(batch.futures, batch.records, strict=True)):
                if not future.done():
                    offset = base_offset + i if base_offset >= 0 else -1
                    future.set_result(
                        RecordMetadata(topic, partition, offset, timestamp if timestamp >= 0 else record[3])
                    )
        if batch.done is not None and not batch.done.done():
            batch.done.set_result(None)
        self._space.set()

    def _refresh_metadata(self) -> None:
        if self._refresh is None or self._refresh.done():
            self._refresh = asyncio.ensure_future(self._refresh_then_wake())

    async def _refresh_then_wake(self) -> None:
        try:
            await self.cluster.refresh()
        except KafkaError:
            pass  # the sender will ask again; refreshes are spaced by retry_backoff_ms
        finally:
            self._wake()
