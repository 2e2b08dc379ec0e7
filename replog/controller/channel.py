"""The controller's channel to the brokers: Kafka's ControllerChannelManager and its RequestSendThreads.

One sender task per broker owns one authenticated connection and a bounded queue of requests, and sends
them strictly in order, one at a time, as RequestSendThread does: a broker must apply a LeaderAndIsr before
the UpdateMetadata queued after it, and a newer LeaderAndIsr after an older one. A request leaves the queue
only once answered. When the connection fails (refused, reset, timed out) the sender reconnects with
exponential back-off and sends the same request again, for as long as the broker is registered: losing a
LeaderAndIsr would leave a broker following a leader that no longer leads. Answers are raw response frames;
what an error inside one means is the caller's business.
"""

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from replog.client.connection import Connection
from replog.client.errors import KafkaError
from replog.protocol.apis import ApiKey
from replog.protocol.primitives import DecodeError

log = logging.getLogger(__name__)

ConnectFactory = Callable[[str, int], Awaitable[Connection]]


class ChannelClosed(Exception):
    """The broker was removed (or the channel closed) before the request was answered."""


class CommitGate(Protocol):
    """Holds a request until the metadata records it reflects are committed by the controller quorum: with
    several voters, a LeaderAndIsr sent before its records commit could be contradicted, with the same leader
    epoch, by the next controller, which never saw them (KIP-631: the active controller acts on committed
    records only)."""

    def barrier(self) -> int:
        """The log offset everything decided so far ends at."""
        ...

    async def wait(self, offset: int) -> None:
        """Until everything before `offset` is committed."""
        ...


@dataclass(frozen=True, slots=True)
class ChannelConfig:
    max_queued_requests: int = 1_000  # per broker
    retry_backoff_ms: int = 100  # RequestSendThread's fixed back-off; here the first of a doubling series
    retry_backoff_max_ms: int = 1_000  # reconnect.backoff.max.ms

    def __post_init__(self) -> None:
        assert self.max_queued_requests > 0
        assert 0 < self.retry_backoff_ms <= self.retry_backoff_max_ms


@dataclass(slots=True)
class _Request:
    api_key: int
    version: int
    body: bytes
    future: asyncio.Future
    barrier: int  # sent once the metadata log is committed up to here (see CommitGate)


class BrokerSender:
    """Sends one broker its requests in order over one connection (Kafka's RequestSendThread)."""

    def __init__(self, broker_id: int, host: str, port: int, connect: ConnectFactory, config: ChannelConfig,
                 gate: CommitGate | None = None) -> None:
        self.broker_id = broker_id
        self._gate = gate
        self.host = host
        self.port = port
        self._connect = connect
        self._config = config
        self._queue: collections.deque[_Request] = collections.deque()
        self._has_work = asyncio.Event()
        self._connection: Connection | None = None
        self._closed = False
        self.failed_attempts = 0  # sends or connects that failed and were retried
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"controller-sender-{broker_id}")

    @property
    def queued(self) -> int:
        return len(self._queue)

    def send(self, api_key: int, version: int, body: bytes) -> asyncio.Future:
        """Queue a request; the future gets the whole response frame. Raises asyncio.QueueFull at the bound."""
        if self._closed:
            raise ChannelClosed(f"broker {self.broker_id} has been removed")
        if len(self._queue) >= self._config.max_queued_requests:
            raise asyncio.QueueFull(f"{len(self._queue)} requests already queued for broker {self.broker_id}")
        barrier = self._gate.barrier() if self._gate is not None else 0
        request = _Request(api_key, version, body, asyncio.get_running_loop().create_future(), barrier)
        self._queue.append(request)
        self._has_work.set()
        return request.future

    def close(self) -> asyncio.Task:
        """Stop sending; every request not yet answered fails with ChannelClosed now. Returns the sender task,
        which closes the connection as it ends."""
        self._task.cancel()
        self._fail_queued(ChannelClosed(f"broker {self.broker_id} removed before answering"))
        return self._task

    def _fail_queued(self, error: Exception) -> None:
        self._closed = True
        while self._queue:
            request = self._queue.popleft()
            if not request.future.done():
                request.future.set_exception(error)
        assert not self._queue

    async def _run(self) -> None:
        try:
            await self._send_queued()
        except Exception as e:
            # A bug, not a network failure (those are retried): fail loudly rather than leave callers hanging.
            log.exception("sender to broker %d crashed", self.broker_id)
            self._fail_queued(ChannelClosed(f"sender to broker {self.broker_id} crashed: {e!r}"))
        finally:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    async def _send_queued(self) -> None:
        while True:
            if not self._queue:
                self._has_work.clear()
                await self._has_work.wait()
                continue
            request = self._queue[0]  # stays at the head until answered, so a failure resends it
            if self._gate is not None:
                await self._gate.wait(request.barrier)
                self._raise_if_closed()
            frame = await self._deliver(request)
            self._raise_if_closed()
            assert self._queue[0] is request  # only close() empties the queue, and it cancels us first
            self._queue.popleft()
            if not request.future.done():  # a caller that stopped waiting cancelled it; it was still sent
                request.future.set_result(frame)

    async def _deliver(self, request: _Request) -> bytearray:
        backoff_ms = self._config.retry_backoff_ms
        # Unbounded by design, like RequestSendThread: it ends when the broker answers or is removed.
        while True:
            self._raise_if_closed()
            try:
                if self._connection is None or self._connection.closed:
                    self._connection = None
                    self._connection = await self._connect(self.host, self.port)
                frame = await self._connection.request(request.api_key, request.version, [request.body])
                assert frame is not None
                return frame
            except (KafkaError, OSError, DecodeError) as e:  # DecodeError: a garbled SASL or ApiVersions answer
                self.failed_attempts += 1
                log.warning("%s to broker %d at %s:%d failed, retrying in %d ms: %s",
                            ApiKey(request.api_key).name, self.broker_id, self.host, self.port, backoff_ms, e)
                if self._connection is not None:
                    self._connection.close()
                    self._connection = None
            await asyncio.sleep(backoff_ms / 1000)
            backoff_ms = min(2 * backoff_ms, self._config.retry_backoff_max_ms)

    def _raise_if_closed(self) -> None:
        # close() cancels this task, but Python 3.11's asyncio.wait_for (under Connection.connect and
        # request) returns the inner result or error instead when it completes as the cancel arrives, and the
        # retry loop would then go on forever, to a broker that was removed, and close() would never return.
        if self._closed:
            raise asyncio.CancelledError


class ControllerChannel:
    """The senders of all registered brokers (Kafka's ControllerChannelManager)."""

    def __init__(self, connect: ConnectFactory, config: ChannelConfig | None = None) -> None:
        self._connect = connect
        self.gate: CommitGate | None = None  # set by a controller of a quorum of several voters
        self._config = config or ChannelConfig()
        self._senders: dict[int, BrokerSender] = {}
        self._stopping: set[asyncio.Task] = set()  # tasks of removed senders, until they have closed

    @property
    def broker_ids(self) -> list[int]:
        return sorted(self._senders)

    def sender(self, broker_id: int) -> BrokerSender:
        return self._senders[broker_id]

    def add_broker(self, broker_id: int, host: str, port: int) -> None:
        assert broker_id not in self._senders, broker_id
        self._senders[broker_id] = BrokerSender(broker_id, host, port, self._connect, self._config,
                                                self.gate)

    def remove_broker(self, broker_id: int) -> None:
        """Forget the broker: its unanswered requests fail with ChannelClosed."""
        task = self._senders.pop(broker_id).close()
        if not task.done():
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)

    def send(self, broker_id: int, api_key: int, version: int, body: bytes) -> asyncio.Future:
        sender = self._senders.get(broker_id)
        if sender is None:
            raise ChannelClosed(f"broker {broker_id} is not in the channel")
        return sender.send(api_key, version, body)

    async def close(self) -> None:
        """Remove every broker and wait until their connections are closed."""
        for broker_id in list(self._senders):
            self.remove_broker(broker_id)
        await asyncio.gather(*self._stopping, return_exceptions=True)
        assert not self._senders
