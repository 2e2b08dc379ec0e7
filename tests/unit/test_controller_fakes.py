"""FakeBroker: an in-process stand-in for a broker on the controller's side of the wire, shared by the
controller tests, and the tests of the fake itself.

It runs the servers' own listener machinery (server/: ServerConnection, Dispatcher, the ApiVersions and
SASL handlers) with tiny LeaderAndIsr / UpdateMetadata / StopReplica handlers that record what they accept and
answer with whatever errors a test asks for. It applies no epoch rules: that is the real broker's job.
"""

import asyncio
import itertools

from kio.schema.errors import ErrorCode

from replog.broker.metadata import MetadataImage
from replog.client.connection import Connection
from replog.protocol import control
from replog.protocol.apis import ApiKey, response_header_version
from replog.protocol.headers import decode_response_header
from replog.server import api_versions
from replog.server.connection import ConnectionHolder, ServerConnection
from replog.server.dispatch import CloseConnection, Dispatcher
from replog.server.handlers import shared_handlers
from replog.server.inter_broker import open_inter_broker_connection
from replog.server.listener import listen, listening_port

from ..conditions import wait_until

SECRET = "s3cret-for-tests"
HOST = "127.0.0.1"
MAX_CONNECTIONS = 1_000
FAKE_BROKER_APIS = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE,
                              ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA})


async def connect_as_controller(host: str, port: int, *, request_timeout_ms: int = 5_000) -> Connection:
    return await open_inter_broker_connection(host, port, client_id="test-controller", username="controller",
                                              secret=SECRET, request_timeout_ms=request_timeout_ms)


class FakeBroker:
    def __init__(self, broker_id: int, *, secret: str = SECRET) -> None:
        self.broker_id = broker_id
        self.secret = secret
        self.holder = ConnectionHolder(MAX_CONNECTIONS)
        self.received: list[tuple[ApiKey, object]] = []  # accepted requests, decoded, in arrival order
        self.dropped: list[tuple[ApiKey, object]] = []  # requests answered by closing the connection
        self.drop_next: dict[ApiKey, int] = {}  # close the connection instead of answering the next n
        self.stall_next: dict[ApiKey, int] = {}  # never answer the next n (the sender's timeout must fire)
        self.stalled: list[tuple[ApiKey, object]] = []  # requests left unanswered by stall_next
        self.request_error: dict[ApiKey, ErrorCode] = {}  # a whole-request error to answer with
        self.refuse_next: dict[ApiKey, int] = {}  # answer the next n with STALE_CONTROLLER_EPOCH
        self.partition_error: dict[tuple[str, int], ErrorCode] = {}  # LeaderAndIsr/StopReplica per partition
        self.unauthorized = 0  # requests refused with CLUSTER_AUTHORIZATION_FAILED
        # The metadata as a real broker has it after the UpdateMetadata requests it accepted: a full snapshot,
        # then the changes (controller/metadata_push.py).
        self.image = MetadataImage("cluster", 3000)
        self._server: asyncio.AbstractServer | None = None
        self.port = 0

    async def start(self, port: int = 0) -> "FakeBroker":
        assert self._server is None
        handlers = {
            **shared_handlers(FAKE_BROKER_APIS, self.secret),
            ApiKey.LEADER_AND_ISR: self._leader_and_isr,
            ApiKey.UPDATE_METADATA: self._update_metadata,
            ApiKey.STOP_REPLICA: self._stop_replica,
        }
        dispatcher = Dispatcher(handlers, lambda: api_versions.unsupported_version_body(FAKE_BROKER_APIS))
        self.holder = ConnectionHolder(MAX_CONNECTIONS)
        self._server = await listen(HOST, port, self.holder, dispatcher, max_frame_bytes=1 << 20, max_inflight=8,
                                    use_sendfile=False)
        self.port = listening_port(self._server)
        return self

    async def stop(self) -> None:
        """Close the listener and every connection, as a crashed broker would. Idempotent."""
        if self._server is None:
            return
        self._server.close()
        self.holder.close_all()
        await self._server.wait_closed()
        self._server = None
        await wait_until(lambda: not self.connections, f"broker {self.broker_id}'s connections to close")

    @property
    def connections(self) -> set[ServerConnection]:
        return self.holder.connections

    def requests(self, api_key: ApiKey) -> list:
        return [request for key, request in self.received if key == api_key]

    # handlers

    def _accept(self, ctx, api_key: ApiKey, request) -> ErrorCode | None:
        """None if the request is answered normally; else the whole-request error. May close or stall."""
        if self.drop_next.get(api_key, 0) > 0:
            self.drop_next[api_key] -= 1
            self.dropped.append((api_key, request))
            raise CloseConnection(f"test drops this {api_key.name}")
        if not ctx.session.cluster_action:
            self.unauthorized += 1
            return ErrorCode.cluster_authorization_failed
        self.received.append((api_key, request))
        if self.refuse_next.get(api_key, 0) > 0:
            self.refuse_next[api_key] -= 1
            return ErrorCode.stale_controller_epoch
        return self.request_error.get(api_key)

    def _stalls(self, api_key: ApiKey, request) -> bool:
        if self.stall_next.get(api_key, 0) > 0:
            self.stall_next[api_key] -= 1
            self.stalled.append((api_key, request))
            return True
        return False

    def close_connections(self) -> None:
        """Close every connection (a stalled request's answer is never sent); the listener stays open."""
        for connection in list(self.connections):
            connection.close()

    def _leader_and_isr(self, ctx):
        request = control.decode_leader_and_isr_request(ctx.frame, ctx.body_offset)
        if self._stalls(ApiKey.LEADER_AND_ISR, request):
            return asyncio.get_running_loop().create_future()  # cancelled when the connection closes
        error = self._accept(ctx, ApiKey.LEADER_AND_ISR, request)
        topics = [control.LeaderAndIsrTopicError(t.topic_id, [] if error else [
            control.LeaderAndIsrPartitionError(
                p.partition_index, self.partition_error.get((t.topic_name, p.partition_index), ErrorCode.none))
            for p in t.partition_states]) for t in request.topic_states]
        response = control.LeaderAndIsrResponse(error or ErrorCode.none, topics)
        return [control.encode_leader_and_isr_response(response)]

    def _update_metadata(self, ctx):
        request = control.decode_update_metadata_request(ctx.frame, ctx.body_offset)
        if self._stalls(ApiKey.UPDATE_METADATA, request):
            return asyncio.get_running_loop().create_future()
        error = self._accept(ctx, ApiKey.UPDATE_METADATA, request)
        if error is None:
            self.image.apply_update_metadata(request)
        return [control.encode_update_metadata_response(control.UpdateMetadataResponse(error or ErrorCode.none))]

    def _stop_replica(self, ctx):
        request = control.decode_stop_replica_request(ctx.frame, ctx.body_offset)
        error = self._accept(ctx, ApiKey.STOP_REPLICA, request)
        errors = [] if error else [
            control.StopReplicaPartitionError(t.topic_name, p.partition_index,
                                              self.partition_error.get((t.topic_name, p.partition_index),
                                                                       ErrorCode.none))
            for t in request.topic_states for p in t.partition_states]
        response = control.StopReplicaResponse(error or ErrorCode.none, errors)
        return [control.encode_stop_replica_response(response)]


class FakeClock:
    """A monotonic millisecond clock (ClusterController's clock_ms) that moves only when a test advances it."""

    def __init__(self, now_ms: int = 1_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        assert ms >= 0, "a monotonic clock never goes back"
        self.now_ms += ms


_epochs = itertools.count(1)


def body_offset(frame: bytearray, api_key: ApiKey, version: int) -> int:
    return decode_response_header(frame, response_header_version(api_key, version))[1]


def update_metadata_body(controller_epoch: int | None = None) -> bytes:
    """An UpdateMetadata whose controller epoch numbers it, so tests can read the order of arrival."""
    epoch = next(_epochs) if controller_epoch is None else controller_epoch
    return control.encode_update_metadata_request(control.UpdateMetadataRequest(3000, epoch, -1, [], []))


# ---------------------------------------------------------------------------------- tests of the fake


async def test_fake_broker_records_authenticated_requests_and_answers_errors():
    broker = await FakeBroker(1).start()
    try:
        connection = await connect_as_controller(HOST, broker.port)
        broker.request_error[ApiKey.UPDATE_METADATA] = ErrorCode.stale_controller_epoch
        frame = await connection.request(ApiKey.UPDATE_METADATA, control.UPDATE_METADATA_VERSION,
                                         [update_metadata_body(7)])
        offset = body_offset(frame, ApiKey.UPDATE_METADATA, control.UPDATE_METADATA_VERSION)
        response = control.decode_update_metadata_response(frame, offset)
        assert response.error_code == ErrorCode.stale_controller_epoch
        assert [r.controller_epoch for r in broker.requests(ApiKey.UPDATE_METADATA)] == [7]
        connection.close()
    finally:
        await broker.stop()


async def test_fake_broker_refuses_unauthenticated_cluster_actions():
    broker = await FakeBroker(1).start()
    try:
        connection = Connection(HOST, broker.port)
        await connection.connect()
        frame = await connection.request(ApiKey.UPDATE_METADATA, control.UPDATE_METADATA_VERSION,
                                         [update_metadata_body(1)])
        offset = body_offset(frame, ApiKey.UPDATE_METADATA, control.UPDATE_METADATA_VERSION)
        response = control.decode_update_metadata_response(frame, offset)
        assert response.error_code == ErrorCode.cluster_authorization_failed
        assert broker.unauthorized == 1 and broker.received == []
        connection.close()
    finally:
        await broker.stop()
