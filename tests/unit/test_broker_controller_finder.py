"""A broker with several controllers in controller.quorum.bootstrap.servers finds the one that answers as the
active controller (ControllerFinder): past one that is down and one that answers NOT_CONTROLLER, and on to a
new one when the active controller goes away, heartbeating there with the same broker epoch."""

import socket

import pytest
from kio.schema.errors import ErrorCode

from replog.broker.controller_client import ControllerFinder
from replog.broker.lifecycle import BrokerIdentity, BrokerLifecycleManager
from replog.controller.channel import ChannelConfig
from replog.controller.server import ClusterController, ControllerConfig
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.server.api_versions import unsupported_version_body
from replog.server.connection import ConnectionHolder
from replog.server.dispatch import Dispatcher
from replog.server.handlers import shared_handlers
from replog.server.inter_broker import open_inter_broker_connection
from replog.server.listener import listen, listening_port

from ..conditions import wait_until
from .test_controller_fakes import HOST, SECRET, FakeBroker

STANDBY_APIS = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE,
                          ApiKey.BROKER_REGISTRATION, ApiKey.BROKER_HEARTBEAT})


async def _open(host: str, port: int, client_id: str):
    return await open_inter_broker_connection(host, port, client_id=client_id, username="broker", secret=SECRET,
                                              request_timeout_ms=2_000)


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


@pytest.fixture
async def standby():
    """A controller that is not the active one: it answers every broker request NOT_CONTROLLER."""
    asked = []

    def not_controller(ctx):
        decode_request(ctx.header.api_key, ctx.api_version, ctx.frame, ctx.body_offset)
        asked.append(ctx.header.api_key)
        body = {"throttle_time": 0, "error_code": ErrorCode.not_controller, "broker_epoch": -1,
                "is_caught_up": False, "is_fenced": True, "should_shut_down": False}
        return [encode_response(ctx.header.api_key, ctx.api_version, body)]

    handlers = {**shared_handlers(STANDBY_APIS, SECRET), ApiKey.BROKER_REGISTRATION: not_controller,
                ApiKey.BROKER_HEARTBEAT: not_controller}
    holder = ConnectionHolder(10)
    server = await listen(HOST, 0, holder, Dispatcher(handlers, lambda: unsupported_version_body(STANDBY_APIS)),
                          max_frame_bytes=1 << 20, max_inflight=4, use_sendfile=False)
    server.asked = asked
    yield server
    server.close()
    holder.close_all()
    await server.wait_closed()


async def _controller(metadata_dir, port: int = 0) -> ClusterController:
    controller = ClusterController(ControllerConfig(
        inter_broker_secret=SECRET, metadata_log_dir=metadata_dir, port=port,
        channel=ChannelConfig(retry_backoff_ms=5, retry_backoff_max_ms=20)))
    await controller.start()
    return controller


def _lifecycle(fake: FakeBroker, finder: ControllerFinder) -> BrokerLifecycleManager:
    lifecycle = BrokerLifecycleManager(
        BrokerIdentity(fake.broker_id, "replog-cluster", HOST, fake.port), finder.connector("lifecycle"),
        heartbeat_interval_ms=20,
        has_metadata=lambda epoch: any(r.broker_epoch == epoch for r in fake.requests(ApiKey.UPDATE_METADATA)))
    lifecycle.on_controller_lost = finder.lost
    return lifecycle


async def test_the_broker_registers_with_the_active_controller_past_a_dead_one_and_a_standby(tmp_path, standby):
    fake = await FakeBroker(1).start()
    controller = await _controller(tmp_path / "metadata")
    finder = ControllerFinder([(HOST, _unused_port()), (HOST, listening_port(standby)), (HOST, controller.port)],
                              _open)
    lifecycle = _lifecycle(fake, finder)
    lifecycle.start()
    try:
        await wait_until(lambda: not lifecycle.is_fenced, "registered and unfenced by the active controller")
        assert standby.asked == [ApiKey.BROKER_REGISTRATION]
        assert finder.current == (HOST, controller.port)
        assert controller.metadata.brokers[1].epoch == lifecycle.broker_epoch
    finally:
        await lifecycle.stop()
        await controller.stop()
        await fake.stop()


async def test_after_the_active_controller_goes_the_broker_heartbeats_the_next_with_its_epoch(tmp_path, standby):
    fake = await FakeBroker(1).start()
    first = await _controller(tmp_path / "metadata")
    next_port = _unused_port()
    finder = ControllerFinder([(HOST, first.port), (HOST, listening_port(standby)), (HOST, next_port)], _open)
    lifecycle = _lifecycle(fake, finder)
    lifecycle.start()
    second = None
    try:
        await wait_until(lambda: not lifecycle.is_fenced, "unfenced by the first controller")
        epoch = lifecycle.broker_epoch
        await first.stop()
        # The next active controller has the same metadata (here: the same log, as a standby would replay it).
        second = await _controller(tmp_path / "metadata", port=next_port)
        heard = []
        answer = second.broker_heartbeat
        second.broker_heartbeat = lambda broker_id, broker_epoch, **kw: (
            heard.append((broker_id, broker_epoch)), answer(broker_id, broker_epoch, **kw))[1]
        await wait_until(lambda: (1, epoch) in heard, "the broker's heartbeats reaching the new controller")
        assert finder.current == (HOST, next_port)
        assert ApiKey.BROKER_HEARTBEAT in standby.asked  # asked on the way, and answered NOT_CONTROLLER
        assert lifecycle.broker_epoch == epoch and not lifecycle.is_fenced  # no new registration
        assert ApiKey.BROKER_REGISTRATION not in standby.asked
    finally:
        await lifecycle.stop()
        if second is not None:
            await second.stop()
        await fake.stop()


class _FakeConnection:
    """Stands in for a Connection: the finder only keys it (weakly) by identity."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.address = address


async def test_a_connection_stops_leading_to_the_current_controller_once_another_finds_it_lost():
    async def open_fake(host: str, port: int, client_id: str):
        return _FakeConnection((host, port))

    finder = ControllerFinder([(HOST, 1), (HOST, 2)], open_fake)
    forwarding = await finder.connector("forwarding")()
    session = await finder.connector("lifecycle")()
    assert finder.leads_to_current(forwarding) and forwarding.address == (HOST, 1)
    finder.lost(session)  # the session's heartbeat was answered NOT_CONTROLLER: the finder moves on
    assert not finder.leads_to_current(forwarding)  # so forwarding reconnects rather than keep asking a standby
    assert finder.leads_to_current(await finder.connector("forwarding")())
