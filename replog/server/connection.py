"""One client connection: frames in through a BufferedProtocol, responses out in request order.

Requests are dispatched as they arrive (so produce requests are appended in order); responses may finish
out of order (a parked fetch, an acks=all produce) but are written strictly in order. At most
max_inflight requests are outstanding per connection: past that the connection stops reading, which is
the backpressure a client feels. Reading also pauses while the socket's unsent bytes are above a limit.
A connection with no request outstanding that neither reads nor writes for connections.max.idle.ms is
closed, as Kafka's Selector does; that also ends a peer that sent part of a frame and went quiet.
"""

import asyncio
import collections
import logging

from replog.protocol.frames import FrameDecoder, FrameError, ReceiveBudget
from replog.security.principal_mapping import DEFAULT_MAPPER, NoMatchingRule, PrincipalMapper

from .auth import INTER_BROKER_ONLY, ONLY_SECRET_HOLDERS, ClusterMembers, Session
from .completion import Completion
from .dispatch import CloseConnection, Dispatcher, SessionExpired
from .sasl import ListenerSasl
from .tls import certificate_principal
from .writer import SocketWriter, TransportWriter

log = logging.getLogger(__name__)

WRITE_HIGH_WATER_BYTES = 64 * 1024 * 1024
TLS_RECORD_START = (0x16, 0x03)  # a TLS handshake record, protocol major version 3
# Kafka's sasl.server.max.receive.size default: the largest frame a SASL listener reads before the client has
# authenticated, so an anonymous peer cannot make it buffer socket.request.max.bytes (CVE-2022-34917).
SASL_MAX_RECEIVE_BYTES = 524_288
# Memory a server's connections may claim up front for large frames still arriving (KIP-72's bound; Kafka's
# queued.max.request.bytes is unbounded by default): eight 1 MiB produce requests being received at once are
# allocated whole, more than a broker's producers send at the same moment in the replicated benchmarks; past
# that a frame's buffer grows with its bytes, so a flood of size prefixes pins at most these 8 MiB.
RECEIVE_BUDGET_BYTES = 8 * 1024 * 1024


class _Slot:
    """A response position in the in-order queue."""

    __slots__ = ("parts", "done")

    def __init__(self) -> None:
        self.parts = None
        self.done = False


class ServerConnection(asyncio.BufferedProtocol):
    def __init__(self, holder: "ConnectionHolder", dispatcher: Dispatcher, *, max_frame_bytes: int, max_inflight: int,
                 use_sendfile: bool, idle_timeout_ms: int | None = None, listener_name: str = "PLAINTEXT",
                 sasl: ListenerSasl = INTER_BROKER_ONLY, tls: bool = False,
                 members: ClusterMembers = ONLY_SECRET_HOLDERS,
                 principal_mapper: PrincipalMapper = DEFAULT_MAPPER) -> None:
        self._holder = holder
        self._dispatcher = dispatcher
        self._max_frame_bytes = max_frame_bytes
        self._decoder = FrameDecoder(min(max_frame_bytes, SASL_MAX_RECEIVE_BYTES) if sasl.required else max_frame_bytes,
                                     budget=holder.receive_budget)
        self._max_inflight = max_inflight
        self._use_sendfile = use_sendfile
        self._slots: collections.deque[_Slot] = collections.deque()
        self._tasks: set[asyncio.Task] = set()  # answers that coroutines compute
        self._transport: asyncio.Transport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._writer: SocketWriter | TransportWriter | None = None
        self._tls = tls
        self._principal_mapper = principal_mapper
        self._first_read: memoryview | None = None  # where the first bytes arrive ...
        self._first_bytes: bytes | None = None  # ... and the first two of them, to name a protocol mismatch
        self._reading_paused = False
        self._resume_scheduled = False
        self._closed = False
        self._idle_timeout_s = None if idle_timeout_ms is None else idle_timeout_ms / 1000
        self._last_active = 0.0  # loop time of the last bytes read or response queued
        self._idle_check: asyncio.TimerHandle | None = None
        self.peer = "?"
        self.session = Session(listener_name=listener_name, sasl=sasl, members=members)
        self.idle = asyncio.Event()
        self.idle.set()

    # asyncio callbacks
    def connection_made(self, transport) -> None:
        self._transport = transport
        self._loop = asyncio.get_running_loop()
        host, port = (transport.get_extra_info("peername") or ("?", "?"))[:2]
        self.peer = f"{host}:{port}"
        unmapped = None  # why a TLS peer's certificate gives no principal
        if self._tls:
            # No sendfile through TLS; the transport encrypts and buffers, and says when it drains.
            transport.set_write_buffer_limits(high=WRITE_HIGH_WATER_BYTES)
            self._writer = TransportWriter(transport, on_error=self._on_write_error)
            ssl_object = transport.get_extra_info("ssl_object")
            try:
                principal = certificate_principal(ssl_object.getpeercert(binary_form=True), self._principal_mapper)
            except NoMatchingRule as e:  # Kafka fails the authentication: the connection closes
                unmapped = str(e)
            else:
                if principal is not None:  # mTLS; on SASL_SSL, SASL sets the principal
                    self.session.identified_by_certificate(principal)
        else:
            self._writer = SocketWriter(
                self._loop, transport.get_extra_info("socket").fileno(), use_sendfile=self._use_sendfile,
                on_error=self._on_write_error, on_drained=self._maybe_resume_reading,
            )
        self._holder.connection_opened(self)
        if unmapped is not None:
            log.warning("listener %s: no principal for the certificate of %s", self.session.listener_name, self.peer)
            self._abort(unmapped)
            return
        if self._idle_timeout_s is not None and not self._closed:
            self._last_active = self._loop.time()
            self._idle_check = self._loop.call_later(self._idle_timeout_s, self._close_if_idle)

    def get_buffer(self, sizehint: int) -> memoryview:
        buffer = self._decoder.get_buffer()
        if self._first_bytes is None:
            self._first_read = buffer
        return buffer

    def buffer_updated(self, nbytes: int) -> None:
        self._mark_active()
        if self._first_bytes is None and self._first_read is not None:
            self._first_bytes, self._first_read = bytes(self._first_read[:min(nbytes, 2)]), None
        try:
            self._decoder.buffer_updated(nbytes)
        except FrameError as e:
            self._abort(f"bad frame: {e}{self._mismatch_hint()}")
            return
        self._process_frames()

    def _mismatch_hint(self) -> str:
        if not self._tls and self._first_bytes is not None and tuple(self._first_bytes) == TLS_RECORD_START:
            return f" (a TLS handshake on {self.session.listener_name}, a listener without TLS)"
        return ""

    def resume_writing(self) -> None:
        """A TLS transport's backlog fell below its low-water mark (plain sockets use SocketWriter's callback)."""
        self._maybe_resume_reading()

    def eof_received(self) -> bool:
        return False  # close our side too; Kafka has no half-closed connections

    def connection_lost(self, exc) -> None:
        self._closed = True
        if self._idle_check is not None:
            self._idle_check.cancel()
        for task in self._tasks:
            task.cancel()
        self._decoder.close()
        if self._writer is not None:
            self._writer.close()
        self._slots.clear()
        self.idle.set()
        self._holder.connection_closed(self)

    # request flow
    def _process_frames(self) -> None:
        while not self._closed and len(self._slots) < self._max_inflight:
            frame = self._decoder.next_frame()
            if frame is None:
                break
            self._handle(frame)
        self._update_reading()

    def _handle(self, frame: bytearray) -> None:
        try:
            result = self._dispatcher.dispatch(frame, self.peer, self.close, self.session)
        except CloseConnection as e:
            if isinstance(e, SessionExpired):
                self._holder.expired_sessions_closed += 1
            self._abort(str(e))
            return
        except Exception:
            log.exception("request from %s failed; closing the connection", self.peer)
            self._abort("internal error")
            return
        if self._decoder.max_frame_bytes != self._max_frame_bytes and not self.session.must_authenticate:
            self._decoder.max_frame_bytes = self._max_frame_bytes  # authenticated: the listener's own limit
        if result is None and not self._slots:
            return  # acks=0 and nothing queued before it: nothing to order
        slot = _Slot()
        self._slots.append(slot)
        self.idle.clear()
        if result is None or type(result) is list:  # answered now: most requests
            slot.parts, slot.done = result, True
            self._write_ready_responses()
        elif isinstance(result, Completion):
            # The framed answer is written in the call that completes it: no task, no loop turn in between.
            result.on_done(lambda completion, s=slot: self._on_completion(completion, s))
        else:  # a coroutine: the dispatcher frames an async handler's answer once it is awaited
            task = asyncio.ensure_future(result)
            self._tasks.add(task)
            task.add_done_callback(lambda t, s=slot: self._on_response_ready(t, s))

    def _on_response_ready(self, task: asyncio.Task, slot: _Slot) -> None:
        self._tasks.discard(task)
        if task.cancelled() or self._closed:
            return
        error = task.exception()
        if error is not None:
            self._fail_delayed(error)
            return
        slot.parts, slot.done = task.result(), True
        self._write_ready_responses()
        self._process_frames()

    def _on_completion(self, completion: Completion, slot: _Slot) -> None:
        """Runs inside the call that completed the request (another request's append or fetch, or a timer):
        writes what is ready now, but takes no new request here; that waits for its own loop callback."""
        if self._closed:
            return  # the client is gone; nobody reads the answer
        try:
            slot.parts, slot.done = completion.result(), True
        except Exception as error:
            self._fail_delayed(error)
            return
        try:
            self._write_ready_responses()
        except Exception:
            log.exception("writing a delayed answer to %s failed; closing the connection", self.peer)
            self._abort("internal error")
            return
        self._maybe_resume_reading()  # it may have paused at max_inflight with whole frames left in the decoder

    def _fail_delayed(self, error: BaseException) -> None:
        if isinstance(error, CloseConnection):
            self._abort(str(error))
        else:
            log.error("delayed request from %s failed", self.peer, exc_info=error)
            self._abort("internal error")

    def _write_ready_responses(self) -> None:
        while self._slots and self._slots[0].done:
            parts = self._slots.popleft().parts
            if parts is not None:
                self._writer.write(parts)
                self._mark_active()
        if not self._slots:
            self.idle.set()

    # backpressure
    def _update_reading(self) -> None:
        should_pause = (
            len(self._slots) >= self._max_inflight
            or self._writer.buffered_bytes > WRITE_HIGH_WATER_BYTES
            or self._holder.shutting_down
        )
        if should_pause and not self._reading_paused and not self._closed:
            self._transport.pause_reading()
            self._reading_paused = True
        elif not should_pause and self._reading_paused and not self._closed:
            self._transport.resume_reading()
            self._reading_paused = False

    def _maybe_resume_reading(self) -> None:
        """Take the frames that waited, in a loop callback of their own: this runs after a write, which may be
        inside another request's call (a delayed answer) or inside this connection's own dispatch loop."""
        if self._reading_paused and not self._resume_scheduled:
            self._resume_scheduled = True
            self._loop.call_soon(self._resume_reading)

    def _resume_reading(self) -> None:
        self._resume_scheduled = False
        self._process_frames()

    # idle expiry (Kafka's connections.max.idle.ms)
    def _mark_active(self) -> None:
        if self._idle_check is not None:
            self._last_active = self._loop.time()

    def _close_if_idle(self) -> None:
        """Close after the idle time; a connection with a request outstanding is waiting on us, not idle."""
        now = self._loop.time()
        idle_until = self._last_active + self._idle_timeout_s
        if not self._slots and now >= idle_until:
            self._abort(f"idle for more than {self._idle_timeout_s * 1000:.0f} ms")
            return
        # Look again when it would become idle, or soon after its outstanding requests are answered.
        self._idle_check = self._loop.call_at(max(idle_until, now + self._idle_timeout_s / 10), self._close_if_idle)

    # closing
    def _on_write_error(self, error: BaseException) -> None:
        self._abort(f"write failed: {error}")

    def _abort(self, reason: str) -> None:
        if self._closed:
            return
        log.info("closing connection from %s: %s", self.peer, reason)
        self._closed = True
        self._transport.abort()

    def close(self) -> None:
        self._abort("closed by the server")

    def stop_reading(self) -> None:
        """Graceful shutdown: take no new requests; in-flight ones still get their responses."""
        if not self._closed and not self._reading_paused:
            self._transport.pause_reading()
            self._reading_paused = True


class ConnectionHolder:
    """The connections a server holds: admits them up to max_connections (none while shutting down), forgets
    closed ones, and takes them through a staged shutdown (stop reading, drain, close)."""

    def __init__(self, max_connections: int, receive_budget_bytes: int = RECEIVE_BUDGET_BYTES) -> None:
        assert max_connections >= 0  # 0 refuses every connection
        self.max_connections = max_connections
        self.receive_budget = ReceiveBudget(receive_budget_bytes)
        self.connections: set[ServerConnection] = set()
        self.shutting_down = False
        self.expired_sessions_closed = 0  # KIP-368: connections closed for a request after their session ended
        self._closed_reauthentications = 0  # successful re-authentications of the connections since closed

    def connection_opened(self, connection: ServerConnection) -> None:
        if self.shutting_down or len(self.connections) >= self.max_connections:
            log.warning("refusing connection from %s: %d connections open", connection.peer, len(self.connections))
            connection.close()
            return
        self.connections.add(connection)

    def connection_closed(self, connection: ServerConnection) -> None:
        if connection in self.connections:
            self.connections.discard(connection)
            self._closed_reauthentications += connection.session.reauthentications

    @property
    def reauthentications(self) -> int:
        """Successful SASL re-authentications (KIP-368) on this server's connections, open and closed."""
        return self._closed_reauthentications + sum(c.session.reauthentications for c in self.connections)

    def stop_reading(self) -> None:
        """Shutdown, first stage: refuse new connections and new requests; in-flight ones still finish."""
        self.shutting_down = True
        for connection in list(self.connections):
            connection.stop_reading()

    async def drain(self, timeout_s: float) -> None:
        """Wait, at most timeout_s, until every connection has answered the requests it had in flight."""
        drains = [asyncio.ensure_future(c.idle.wait()) for c in self.connections]
        if drains:
            await asyncio.wait(drains, timeout=timeout_s)
        for task in drains:
            task.cancel()

    def close_all(self) -> None:
        self.shutting_down = True
        for connection in list(self.connections):
            connection.close()
