"""ControllerChannel against in-process fake brokers over real sockets: order, resend after a failure,
bounds, and removal."""

import asyncio
import functools

import pytest
from kio.schema.errors import ErrorCode

from replog.controller.channel import ChannelClosed, ChannelConfig, ControllerChannel
from replog.protocol import control
from replog.protocol.apis import ApiKey

from .test_controller_fakes import (
    HOST,
    FakeBroker,
    body_offset,
    connect_as_controller,
    update_metadata_body,
    wait_until,
)

UM = ApiKey.UPDATE_METADATA
UM_VERSION = control.UPDATE_METADATA_VERSION
FAST_RETRIES = ChannelConfig(max_queued_requests=100, retry_backoff_ms=5, retry_backoff_max_ms=20)


def epochs_received(broker: FakeBroker) -> list[int]:
    return [r.controller_epoch for r in broker.requests(UM)]


def error_of(frame: bytearray) -> int:
    return control.decode_update_metadata_response(frame, body_offset(frame, UM, UM_VERSION)).error_code


@pytest.fixture
async def broker():
    fake = await FakeBroker(1).start()
    yield fake
    await fake.stop()


@pytest.fixture
async def channel():
    chan = ControllerChannel(connect_as_controller, FAST_RETRIES)
    yield chan
    await chan.close()


async def test_requests_are_sent_and_answered_in_order(broker, channel):
    channel.add_broker(1, HOST, broker.port)
    futures = [channel.send(1, UM, UM_VERSION, update_metadata_body(epoch)) for epoch in range(1, 21)]
    frames = await asyncio.gather(*futures)
    assert epochs_received(broker) == list(range(1, 21))
    assert all(error_of(frame) == ErrorCode.none for frame in frames)
    assert channel.sender(1).failed_attempts == 0
    assert len(broker.connections) == 1  # one connection carries them all


async def test_a_dropped_connection_resends_the_request_and_keeps_the_order(broker, channel):
    broker.drop_next[UM] = 2  # the first request is lost twice before the broker answers it
    channel.add_broker(1, HOST, broker.port)
    futures = [channel.send(1, UM, UM_VERSION, update_metadata_body(epoch)) for epoch in (1, 2, 3)]
    await asyncio.gather(*futures)
    assert [r.controller_epoch for _, r in broker.dropped] == [1, 1]
    assert epochs_received(broker) == [1, 2, 3]
    assert channel.sender(1).failed_attempts == 2


async def test_a_request_without_answer_times_out_and_is_resent(broker):
    channel = ControllerChannel(functools.partial(connect_as_controller, request_timeout_ms=100), FAST_RETRIES)
    try:
        broker.stall_next[UM] = 1
        channel.add_broker(1, HOST, broker.port)
        first = channel.send(1, UM, UM_VERSION, update_metadata_body(1))
        second = channel.send(1, UM, UM_VERSION, update_metadata_body(2))
        await asyncio.gather(first, second)
        assert epochs_received(broker) == [1, 2]  # the stalled copy was never recorded
        assert channel.sender(1).failed_attempts == 1
    finally:
        await channel.close()


async def test_a_broker_that_is_down_gets_its_requests_once_it_is_up(broker, channel):
    port = broker.port
    await broker.stop()
    channel.add_broker(1, HOST, port)
    futures = [channel.send(1, UM, UM_VERSION, update_metadata_body(epoch)) for epoch in (1, 2)]
    await wait_until(lambda: channel.sender(1).failed_attempts >= 3, "connection attempts to fail")
    assert not any(f.done() for f in futures)
    await broker.start(port)
    await asyncio.gather(*futures)
    assert epochs_received(broker) == [1, 2]


async def test_a_broker_restart_mid_stream_loses_nothing(broker, channel):
    channel.add_broker(1, HOST, broker.port)
    await channel.send(1, UM, UM_VERSION, update_metadata_body(1))
    port = broker.port
    await broker.stop()  # the channel's connection is now dead
    later = [channel.send(1, UM, UM_VERSION, update_metadata_body(epoch)) for epoch in (2, 3)]
    await wait_until(lambda: channel.sender(1).failed_attempts >= 1, "the dead connection to be noticed")
    await broker.start(port)
    await asyncio.gather(*later)
    assert epochs_received(broker) == [1, 2, 3]


async def test_a_caller_that_stops_waiting_does_not_unsend_the_request(broker, channel):
    channel.add_broker(1, HOST, broker.port)
    abandoned = channel.send(1, UM, UM_VERSION, update_metadata_body(1))
    abandoned.cancel()
    await channel.send(1, UM, UM_VERSION, update_metadata_body(2))
    assert epochs_received(broker) == [1, 2]


async def test_the_queue_is_bounded(broker):
    channel = ControllerChannel(connect_as_controller, ChannelConfig(max_queued_requests=2))
    try:
        port = broker.port
        await broker.stop()
        channel.add_broker(1, HOST, port)
        queued = [channel.send(1, UM, UM_VERSION, update_metadata_body()) for _ in range(2)]
        with pytest.raises(asyncio.QueueFull):
            channel.send(1, UM, UM_VERSION, update_metadata_body())
        assert channel.sender(1).queued == 2
        channel.remove_broker(1)
        for future in queued:
            with pytest.raises(ChannelClosed):
                await future
    finally:
        await channel.close()


async def test_removing_a_broker_fails_its_unanswered_requests(broker, channel):
    port = broker.port
    await broker.stop()
    channel.add_broker(1, HOST, port)
    futures = [channel.send(1, UM, UM_VERSION, update_metadata_body()) for _ in range(3)]
    await wait_until(lambda: channel.sender(1).failed_attempts >= 1, "a failed connection attempt")
    channel.remove_broker(1)
    results = await asyncio.gather(*futures, return_exceptions=True)
    assert all(isinstance(r, ChannelClosed) for r in results), results
    assert channel.broker_ids == []
    with pytest.raises(ChannelClosed):
        channel.send(1, UM, UM_VERSION, update_metadata_body())


async def test_removal_closes_the_connection_and_other_brokers_carry_on(broker, channel):
    other = await FakeBroker(2).start()
    try:
        channel.add_broker(1, HOST, broker.port)
        channel.add_broker(2, HOST, other.port)
        await asyncio.gather(channel.send(1, UM, UM_VERSION, update_metadata_body(1)),
                             channel.send(2, UM, UM_VERSION, update_metadata_body(1)))
        channel.remove_broker(1)
        await wait_until(lambda: not broker.connections, "the removed broker's connection to close")
        await channel.send(2, UM, UM_VERSION, update_metadata_body(2))
        assert epochs_received(other) == [1, 2]
        assert channel.broker_ids == [2]
    finally:
        await channel.close()
        await other.stop()
    assert not other.connections


async def test_close_fails_everything_queued_and_closes_connections(broker):
    channel = ControllerChannel(connect_as_controller, FAST_RETRIES)
    channel.add_broker(1, HOST, broker.port)
    await channel.send(1, UM, UM_VERSION, update_metadata_body(1))
    broker.stall_next[UM] = 1
    stalled = channel.send(1, UM, UM_VERSION, update_metadata_body(2))
    await wait_until(lambda: broker.stall_next[UM] == 0, "the request to reach the broker")
    await channel.close()
    with pytest.raises(ChannelClosed):
        await stalled
    await wait_until(lambda: not broker.connections, "the connection to close")


async def test_a_sender_bug_fails_its_requests_instead_of_hanging_them():
    async def broken_connect(host: str, port: int):
        raise RuntimeError("bug in the connect factory")

    channel = ControllerChannel(broken_connect, FAST_RETRIES)
    try:
        channel.add_broker(1, HOST, 9)
        with pytest.raises(ChannelClosed, match="crashed"):
            await channel.send(1, UM, UM_VERSION, update_metadata_body())
        with pytest.raises(ChannelClosed):
            channel.send(1, UM, UM_VERSION, update_metadata_body())
    finally:
        await channel.close()


class ManualCommitGate:
    """A CommitGate whose commits the test makes: each send's barrier is the next offset."""

    def __init__(self) -> None:
        self.end_offset = 0
        self.committed = 0
        self.waited_for: list[int] = []
        self._changed = asyncio.Event()

    def barrier(self) -> int:
        self.end_offset += 1
        return self.end_offset

    async def wait(self, offset: int) -> None:
        self.waited_for.append(offset)
        while self.committed < offset:
            self._changed.clear()
            await self._changed.wait()

    def commit(self, offset: int) -> None:
        self.committed = offset
        self._changed.set()


async def test_a_gated_request_leaves_only_once_its_records_are_committed(broker, channel):
    gate = ManualCommitGate()
    channel.gate = gate
    channel.add_broker(1, HOST, broker.port)
    first = channel.send(1, UM, UM_VERSION, update_metadata_body(1))
    second = channel.send(1, UM, UM_VERSION, update_metadata_body(2))
    await wait_until(lambda: gate.waited_for == [1], "the sender to wait for offset 1 to commit")
    assert epochs_received(broker) == [] and not first.done()  # held at the gate: nothing sent
    gate.commit(1)
    await first
    await wait_until(lambda: gate.waited_for == [1, 2], "the sender to wait for offset 2 to commit")
    assert epochs_received(broker) == [1] and not second.done()
    gate.commit(2)
    await second
    assert epochs_received(broker) == [1, 2]


async def test_removing_a_broker_fails_the_requests_held_at_the_gate(broker, channel):
    gate = ManualCommitGate()
    channel.gate = gate
    channel.add_broker(1, HOST, broker.port)
    held = channel.send(1, UM, UM_VERSION, update_metadata_body(1))
    await wait_until(lambda: gate.waited_for == [1], "the sender to wait at the gate")
    channel.remove_broker(1)  # a deposed controller drops what it decided but never saw committed
    with pytest.raises(ChannelClosed):
        await held
    assert epochs_received(broker) == []
