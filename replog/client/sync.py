"""Blocking wrappers: each runs its async client on a private event loop in a daemon thread.

Every call hands a coroutine to that loop and waits for it with a timeout, so a hung broker cannot hang
the caller forever.
"""

import asyncio
import concurrent.futures
import threading
from collections.abc import Iterable, Sequence

from .admin import Admin, NewTopic, TopicDescription
from .consumer import Consumer, ConsumerRecord, OffsetAndTimestamp, TopicPartition
from .producer import Producer, RecordMetadata

DEFAULT_CALL_TIMEOUT_S = 300.0


class _LoopThread:
    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coro, timeout: float | None = DEFAULT_CALL_TIMEOUT_S):
        assert threading.current_thread() is not self._thread, (
            "would deadlock: called from the client's own loop"
        )
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def submit(self, coro) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self.loop.close()


class SyncProducer:
    def __init__(self, bootstrap: str | Sequence[str], **config) -> None:
        self._runner = _LoopThread("replog-producer")
        self._producer: Producer = self._runner.run(_construct(Producer, bootstrap, config))

    def send(self, topic: str, value: bytes | None, **kwargs) -> concurrent.futures.Future:
        """Queue a record; the returned future resolves to RecordMetadata when acknowledged."""
        return self._runner.submit(self._send_and_wait(topic, value, kwargs))

    async def _send_and_wait(self, topic: str, value: bytes | None, kwargs: dict) -> RecordMetadata:
        delivery = await self._producer.send(topic, value, **kwargs)
        return await delivery

    def flush(self, timeout: float | None = None) -> None:
        self._runner.run(self._producer.flush(), timeout)

    def close(self) -> None:
        try:
            self._runner.run(self._producer.close())
        finally:
            self._runner.stop()

    def __enter__(self) -> "SyncProducer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class SyncConsumer:
    def __init__(self, bootstrap: str | Sequence[str], **config) -> None:
        self._runner = _LoopThread("replog-consumer")
        self._consumer: Consumer = self._runner.run(_construct(Consumer, bootstrap, config))

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._consumer.assign(list(partitions))

    def assignment(self) -> set[TopicPartition]:
        return self._consumer.assignment()

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._consumer.seek(tp, offset)

    def seek_to_beginning(self, *tps: TopicPartition) -> None:
        self._consumer.seek_to_beginning(*tps)

    def seek_to_end(self, *tps: TopicPartition) -> None:
        self._consumer.seek_to_end(*tps)

    def position(self, tp: TopicPartition) -> int:
        return self._runner.run(self._consumer.position(tp))

    def getmany(
        self, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        return self._runner.run(self._consumer.getmany(timeout_ms, max_records))

    def beginning_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._runner.run(self._consumer.beginning_offsets(list(tps)))

    def end_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._runner.run(self._consumer.end_offsets(list(tps)))

    def offsets_for_times(
        self, timestamps: dict[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return self._runner.run(self._consumer.offsets_for_times(dict(timestamps)))

    def close(self) -> None:
        try:
            self._runner.run(self._consumer.close())
        finally:
            self._runner.stop()

    def __enter__(self) -> "SyncConsumer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class SyncAdmin:
    def __init__(self, bootstrap: str | Sequence[str], **config) -> None:
        self._runner = _LoopThread("replog-admin")
        self._admin: Admin = self._runner.run(_construct(Admin, bootstrap, config))

    def create_topics(
        self, topics: Sequence[NewTopic], timeout_ms: int = 30_000, validate_only: bool = False
    ) -> None:
        self._runner.run(self._admin.create_topics(list(topics), timeout_ms, validate_only))

    def delete_topics(self, names: Sequence[str], timeout_ms: int = 30_000) -> None:
        self._runner.run(self._admin.delete_topics(list(names), timeout_ms))

    def list_topics(self, *, include_internal: bool = False) -> list[str]:
        return self._runner.run(self._admin.list_topics(include_internal=include_internal))

    def describe_topics(self, names: Iterable[str] | None = None) -> dict[str, TopicDescription]:
        return self._runner.run(self._admin.describe_topics(None if names is None else list(names)))

    def close(self) -> None:
        try:
            self._runner.run(self._admin.close())
        finally:
            self._runner.stop()

    def __enter__(self) -> "SyncAdmin":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


async def _construct(cls, bootstrap, config: dict):
    # Built on the client's loop so its asyncio primitives belong to that loop.
    return cls(bootstrap, **config)
