"""QuorumShell: runs a RaftNode on real time, files and sockets (KafkaRaftClient's I/O half).

- Time: the node is ticked by `loop.call_at` at its own `next_deadline_ms` (no polling loop); the clock is the
  event loop's monotonic one.
- Files: the metadata log is a FileRaftLog and the election state the `quorum-state` file, both in the node's
  directory; the node writes the file (fsynced, renamed) before it acts on a vote or an epoch, and flushes the
  log before a Fetch acknowledges it. A corrupt quorum-state file or voter-set mismatch stops `start` with an
  error naming the file.
- Network in: `handlers()` answers Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot and
  DescribeQuorum on the server's listener (Kafka's wire, replog/raft/codec.py). Only the inter-broker principal
  may send the first five (CLUSTER_ACTION, as Kafka's ControllerApis); anyone may describe the quorum.
- Network out: one authenticated connection per voter, one request in flight to it (the node's rule); a
  failed exchange drops the connection and the node resends after controller.quorum.request.timeout.ms.

The state machine above it reads `take_committed()` when `on_commit` fires, and a leader appends with `append`,
which returns once the entries are committed.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path

from kio.schema.errors import ErrorCode

from replog.client.connection import Connection
from replog.client.errors import KafkaError
from replog.protocol.apis import ApiKey, response_header_version
from replog.protocol.headers import decode_response_header
from replog.protocol.primitives import DecodeError
from replog.server.dispatch import Handler, RequestContext

from . import codec
from . import messages as m
from .commits import Committed, LoadSnapshot
from .config import QuorumConfig
from .file_log import FileRaftLog
from .messages import Envelope
from .node import NotLeaderError, RaftNode
from .quorum_state_file import QuorumStateFile, VoterSetMismatchError
from .states import Leader

log = logging.getLogger(__name__)

QUORUM_STATE_FILE = "quorum-state"
QUORUM_APIS = frozenset({ApiKey.VOTE, ApiKey.BEGIN_QUORUM_EPOCH, ApiKey.END_QUORUM_EPOCH, ApiKey.FETCH,
                         ApiKey.FETCH_SNAPSHOT, ApiKey.DESCRIBE_QUORUM})
NEVER = 1 << 62  # RaftNode.next_deadline_ms when nothing is due

ConnectFactory = Callable[[str, int], Awaitable[Connection]]


@dataclass(slots=True)
class _PendingAnswer:
    future: asyncio.Future
    api_key: int
    version: int
    fetch_offset: int


@dataclass(slots=True)
class _Append:
    offset: int  # of the last entry appended
    epoch: int
    future: asyncio.Future


class QuorumShell:
    def __init__(self, node_id: int, config: QuorumConfig, directory: Path, connect: ConnectFactory, *,
                 cluster_id: str, on_commit: Callable[[], None] = lambda: None,
                 rng: random.Random | None = None) -> None:
        """connect(host, port) opens an authenticated connection to another voter."""
        self.node_id = node_id
        self.config = config
        self.directory = Path(directory)
        self._connect = connect
        self._cluster_id = cluster_id
        self.on_commit = on_commit  # called after every step; the state machine takes what committed
        self._rng = rng or random.Random()
        self.node: RaftNode | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due_ms: int | None = None
        self._connections: dict[int, Connection] = {}
        self._exchanges: set[asyncio.Task] = set()
        self._answers: dict[int, _PendingAnswer] = {}  # by the correlation id given to an incoming request
        self._next_incoming_id = 1
        self._appends: list[_Append] = []
        self._commit_waiters: list[tuple[int, asyncio.Future]] = []
        self._stopped = False

    # ------------------------------------------------------------------ life

    def start(self) -> None:
        """Open the log and the quorum-state file and start the node (raises on a corrupt file or a voter-set
        mismatch, naming the file)."""
        self._loop = asyncio.get_running_loop()
        self.directory.mkdir(parents=True, exist_ok=True)
        raft_log = FileRaftLog(self.directory)
        store = QuorumStateFile(self.directory / QUORUM_STATE_FILE)
        try:
            self.node = RaftNode(self.node_id, self.config, raft_log, store, self._rng, self.now_ms(),
                                 cluster_id=self._cluster_id)
        except VoterSetMismatchError as e:
            raise VoterSetMismatchError(f"{store.path}: {e}") from e
        log.info("quorum node %d started in epoch %d as %s, log [%d, %d)", self.node_id, self.node.epoch,
                 self.node.role.value, raft_log.start_offset, raft_log.end_offset)
        self._after_step([])

    async def resign(self) -> None:
        """A leader's clean shutdown (KIP-595 graceful resignation): EndQuorumEpoch tells the other voters, the
        most caught up first (PreferredSuccessors), so they elect a new leader at once instead of waiting out
        controller.quorum.fetch.timeout.ms. Returns once those requests are answered, or failed, or after
        controller.quorum.request.timeout.ms; a node that does not lead has nothing to hand over."""
        if self._stopped or not self.is_leader:
            return
        assert self.node is not None
        log.info("quorum node %d resigns as leader of epoch %d: EndQuorumEpoch to the other voters", self.node_id,
                 self.node.epoch)
        self._step(self.node.resign)
        self._step(self.node.tick)  # a Resigned node sends EndQuorumEpoch from its tick
        if self._exchanges:
            await asyncio.wait(set(self._exchanges), timeout=self.config.request_timeout_ms / 1000)

    async def stop(self) -> None:
        self._stopped = True  # no more ticks, nor steps for answers still on their way
        if self._timer is not None:
            self._timer.cancel()
        for task in list(self._exchanges):
            task.cancel()
        await asyncio.gather(*self._exchanges, return_exceptions=True)
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()
        for pending in self._answers.values():
            pending.future.cancel()
        for _, future in self._commit_waiters:
            future.cancel()
        for append in self._appends:
            if not append.future.done():
                append.future.set_exception(NotLeaderError(f"node {self.node_id} stopped"))
        self._appends.clear()

    def now_ms(self) -> int:
        assert self._loop is not None
        return int(self._loop.time() * 1000)

    # ------------------------------------------------------------------ the state machine's side

    @property
    def is_leader(self) -> bool:
        return self.node is not None and isinstance(self.node.state, Leader)

    def take_committed(self) -> list[Committed | LoadSnapshot]:
        assert self.node is not None
        return self.node.take_committed()

    async def append(self, values: list[bytes]) -> int:
        """Append as the leader and wait until committed; returns the offset of the last value. Raises
        NotLeaderError if this node does not lead, or stops leading before they commit (they may still
        commit under the next leader: the state machine learns that from the log, as every standby does)."""
        assert self.node is not None and self._loop is not None
        offset = self.node.propose(values, self.now_ms())
        append = _Append(offset, self.node.epoch, self._loop.create_future())
        self._appends.append(append)
        self._after_step([])
        return await append.future

    def propose_durably(self, values: list[bytes]) -> int:
        """Append as the leader and fsync this node's log before returning (the quorum learns of the entries
        at the next flush): for a quorum of one they are decided when this returns. Returns the last offset."""
        assert self.node is not None
        offset = self.node.propose(values, self.now_ms())
        self.node.log.flush()
        self._after_step([])
        return offset

    async def wait_committed(self, offset: int) -> None:
        """Until the high watermark reaches `offset` (everything before it is committed)."""
        assert self.node is not None and self._loop is not None
        if self.node.high_watermark is not None and self.node.high_watermark >= offset:
            return
        future = self._loop.create_future()
        self._commit_waiters.append((offset, future))
        await future

    def _wake_commit_waiters(self) -> None:
        hw = self.node.high_watermark if self.node is not None else None
        if hw is None or not self._commit_waiters:
            return
        waiting = []
        for offset, future in self._commit_waiters:
            if future.done():
                continue
            if hw >= offset:
                future.set_result(None)
            else:
                waiting.append((offset, future))
        self._commit_waiters = waiting

    # ------------------------------------------------------------------ driving the node

    def _step(self, action: Callable[[int], list[Envelope]]) -> None:
        assert self.node is not None
        if not self._stopped:
            self._after_step(action(self.now_ms()))

    def _after_step(self, out: list[Envelope]) -> None:
        if self._stopped:
            return
        for envelope in out:
            if isinstance(envelope.message, m.Request.__args__):
                self._spawn_exchange(envelope)
            else:
                self._answer(envelope)
        self._settle_appends()
        self._wake_commit_waiters()
        self.on_commit()
        self._schedule_tick()

    def _schedule_tick(self) -> None:
        assert self.node is not None and self._loop is not None
        due = self.node.next_deadline_ms()
        if due == self._timer_due_ms and self._timer is not None:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_due_ms = due
        if due < NEVER:
            self._timer = self._loop.call_at(due / 1000, self._on_timer)

    def _on_timer(self) -> None:
        self._timer, self._timer_due_ms = None, None
        assert self.node is not None
        self._step(self.node.tick)

    def _settle_appends(self) -> None:
        node = self.node
        assert node is not None
        keep = []
        for append in self._appends:
            if append.future.done():
                continue
            hw = node.high_watermark
            if node.epoch != append.epoch or not isinstance(node.state, Leader):
                append.future.set_exception(NotLeaderError(
                    f"node {self.node_id} stopped leading epoch {append.epoch} before offset {append.offset} "
                    f"committed"))
            elif hw is not None and hw > append.offset:
                append.future.set_result(append.offset)
            else:
                keep.append(append)
        self._appends = keep

    # ------------------------------------------------------------------ requests to other voters

    def _spawn_exchange(self, envelope: Envelope) -> None:
        task = asyncio.get_running_loop().create_task(self._exchange(envelope))
        self._exchanges.add(task)
        task.add_done_callback(self._exchanges.discard)

    async def _exchange(self, envelope: Envelope) -> None:
        peer = envelope.destination
        request = envelope.message
        api_key, version, body = codec.encode_request(request)
        fetch_offset = request.fetch_offset if isinstance(request, m.FetchRequest) else 0
        try:
            connection = await self._connection_to(peer)
            frame = await connection.request(api_key, version, [body], timeout_ms=self.config.request_timeout_ms)
            assert frame is not None
            _, offset = decode_response_header(frame, response_header_version(api_key, version))
            response = codec.decode_response(api_key, version, bytes(frame[offset:]), fetch_offset)
        except (KafkaError, OSError, DecodeError, codec.CodecError) as e:
            log.debug("quorum node %d: %s to %d failed: %s", self.node_id, type(request).__name__, peer, e)
            self._drop_connection(peer)
            return  # the node gives the request up after request.timeout.ms and sends it again
        if getattr(response, "error_code", None) == ErrorCode.inconsistent_voter_set:
            log.error("quorum node %d: voter %d refused %s: its controller.quorum.voters differ from ours %s",
                      self.node_id, peer, type(request).__name__, sorted(self.config.voter_ids))
        if self.node is not None:
            self._step(functools.partial(self.node.handle, Envelope(peer, self.node_id, envelope.correlation_id,
                                                                      response)))

    async def _connection_to(self, peer: int) -> Connection:
        connection = self._connections.get(peer)
        if connection is None or connection.closed:
            host, port = self.config.voters[peer]
            connection = await self._connect(host, port)
            if self._connections.get(peer) not in (None, connection):
                self._connections[peer].close()
            self._connections[peer] = connection
        return connection

    def _drop_connection(self, peer: int) -> None:
        connection = self._connections.pop(peer, None)
        if connection is not None:
            connection.close()

    # ------------------------------------------------------------------ requests from other voters

    def handlers(self) -> dict[int, Handler]:
        """The quorum's APIs for the controller's Dispatcher (with CONTROLLER_API_SPECS: Fetch is v16)."""
        return {api_key: self._handle for api_key in QUORUM_APIS}

    def _handle(self, ctx: RequestContext) -> Awaitable[list]:
        api_key, version = ctx.header.api_key, ctx.api_version
        body = bytes(ctx.frame[ctx.body_offset:])
        try:
            request = codec.decode_request(api_key, version, body)
        except codec.CodecError as e:
            log.warning("quorum node %d: refused %s from %s: %s", self.node_id, ApiKey(api_key).name, ctx.peer, e)
            return self._answer_now(api_key, version, ErrorCode.invalid_request)
        if not isinstance(request, m.DescribeQuorumRequest) and not ctx.session.cluster_action:
            return self._answer_now(api_key, version, ErrorCode.cluster_authorization_failed)
        if self.node is None or self._stopped:
            return self._answer_now(api_key, version, ErrorCode.not_leader_or_follower)
        correlation_id = self._next_incoming_id
        self._next_incoming_id += 1
        assert self._loop is not None
        future = self._loop.create_future()
        fetch_offset = request.fetch_offset if isinstance(request, m.FetchRequest) else 0
        self._answers[correlation_id] = _PendingAnswer(future, api_key, version, fetch_offset)
        source = _sender_of(request, fallback=-correlation_id - 1)
        self._step(functools.partial(self.node.handle, Envelope(source, self.node_id, correlation_id, request)))
        return future

    def _answer(self, envelope: Envelope) -> None:
        pending = self._answers.pop(envelope.correlation_id, None)
        if pending is None or pending.future.done():
            return
        message = envelope.message
        if isinstance(message, m.DescribeQuorumResponse):
            message = _with_wall_clock_timestamps(message, int(time.time() * 1000) - self.now_ms())
        body = codec.encode_response(message, pending.version, pending.fetch_offset)
        pending.future.set_result([body])

    def _answer_now(self, api_key: int, version: int, error: ErrorCode) -> Awaitable[list]:
        assert self._loop is not None
        future = self._loop.create_future()
        future.set_result([codec.encode_response(_error_response(api_key, error), version)])
        return future


def _sender_of(request: m.Request, fallback: int) -> int:
    """The node a request speaks for (the node checks it is a voter where that matters)."""
    match request:
        case m.VoteRequest():
            return request.candidate_id
        case m.BeginQuorumEpochRequest() | m.EndQuorumEpochRequest():
            return request.leader_id
        case m.FetchRequest() | m.FetchSnapshotRequest():
            return request.replica_id
    return fallback  # DescribeQuorum: any client; a distinct id per request keeps answers apart


def _with_wall_clock_timestamps(answer: m.DescribeQuorumResponse, wall_minus_loop_ms: int) -> m.DescribeQuorumResponse:
    """The node keeps fetch times on the loop's monotonic clock; DescribeQuorum v1+ (KIP-836) reports them in
    ms since the epoch, -1 when unknown."""
    def wall(timestamp: int) -> int:
        return timestamp + wall_minus_loop_ms if timestamp >= 0 else -1

    def to_wall(replica: m.ReplicaProgress) -> m.ReplicaProgress:
        return replace(replica, last_fetch_timestamp=wall(replica.last_fetch_timestamp),
                       last_caught_up_timestamp=wall(replica.last_caught_up_timestamp))

    return replace(answer, current_voters=tuple(map(to_wall, answer.current_voters)),
                   observers=tuple(map(to_wall, answer.observers)))


def _error_response(api_key: int, error: ErrorCode) -> m.Response:
    no_leader = m.NO_LEADER
    match api_key:
        case ApiKey.VOTE:
            return m.VoteResponse(error, no_leader, -1, False)
        case ApiKey.BEGIN_QUORUM_EPOCH:
            return m.BeginQuorumEpochResponse(error, no_leader, -1)
        case ApiKey.END_QUORUM_EPOCH:
            return m.EndQuorumEpochResponse(error, no_leader, -1)
        case ApiKey.FETCH:
            return m.FetchResponse(error, no_leader, -1, -1, -1)
        case ApiKey.FETCH_SNAPSHOT:
            return m.FetchSnapshotResponse(error, no_leader, -1, m.OffsetAndEpoch(-1, -1), 0, 0, b"")
    return m.DescribeQuorumResponse(error, no_leader, -1, -1, (), ())
