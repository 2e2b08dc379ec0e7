"""One client connection to one broker: framing, correlation ids, in-flight bookkeeping, version negotiation.

The connection is its own asyncio.BufferedProtocol so the socket reads straight into the FrameDecoder's
memory. Requests are pipelined: each gets the next correlation id and joins a FIFO of in-flight requests;
Kafka answers in order on a connection, so a response whose id differs from the head of the FIFO means the
stream is out of sync and the connection is closed (aiokafka's CloseReason.OUT_OF_SYNC). Writes issued in
one event-loop turn are coalesced into a single transport.writelines call, unless a request asks to be
written at once (`flush=True`: a lone request its caller waits on, such as a follower's fetch).

When the broker gives the SASL session a lifetime (KIP-368) the connection re-authenticates before it ends, as
Kafka's clients do: the first request after the re-authentication time waits until the requests in flight are
answered, the SASL exchange runs again, then it and the requests behind it go out in the order they were made.
"""

import asyncio
import random
from collections import deque
from dataclasses import dataclass

from ..protocol import messages
from ..protocol.apis import SUPPORTED_APIS, ApiKey, response_header_version
from ..protocol.frames import FrameDecoder, FrameError, size_prefix
from ..protocol.headers import decode_response_header, encode_request_header
from .errors import NETWORK_EXCEPTION, REQUEST_TIMED_OUT, UNSUPPORTED_VERSION, KafkaError
from .reauth_timing import reauth_delay_s
from .security import ClientSecurity, authenticate

CORRELATION_ID_LIMIT = 2**31
DEFAULT_MAX_FRAME_BYTES = 128 * 1024 * 1024
CLIENT_SOFTWARE_NAME = "replog"
CLIENT_SOFTWARE_VERSION = "0.1.0"
_API_VERSIONS_FIRST = 3  # KIP-511: a broker that lacks v3 answers UNSUPPORTED_VERSION with a v0 body
# The SASL exchange: it takes no in-flight slot, so re-authentication is never stuck behind requests that
# hold slots while they wait for it.
_SASL_APIS = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


def decode_response_frame(api_key: int, version: int, frame: bytearray):
    """Decode a whole response frame (header, then body) into its kio entity."""
    _, offset = decode_response_header(frame, response_header_version(api_key, version))
    return messages.decode_response(api_key, version, _readonly(frame), offset)


def _readonly(frame: bytearray) -> memoryview:
    # kio's readers refuse writable buffers; a read-only view of the frame costs no copy.
    return memoryview(frame).toreadonly()


@dataclass(slots=True)
class _InFlight:
    correlation_id: int
    api_key: int
    version: int
    future: asyncio.Future


class Connection(asyncio.BufferedProtocol):
    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str = CLIENT_SOFTWARE_NAME,
        max_in_flight: int = 32,
        request_timeout_ms: int = 30_000,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        local_host: str | None = None,
        security: ClientSecurity | None = None,
    ) -> None:
        assert 0 < port < 65536
        assert max_in_flight > 0
        assert request_timeout_ms > 0
        self.host = host
        self.port = port
        self.client_id = client_id
        self.local_host = local_host  # the address to connect from; None: the one the OS routes from
        self.security = security or ClientSecurity()
        self.request_timeout_ms = request_timeout_ms
        self.max_in_flight = max_in_flight
        self.api_versions: dict[int, tuple[int, int]] = {}
        # Responses answer our own requests, sized by what we asked for: no need to grow their buffers.
        self._decoder = FrameDecoder(max_frame_bytes, grow_large_frames=False)
        self._in_flight: deque[_InFlight] = deque()
        self._slots = asyncio.Semaphore(max_in_flight)
        self._next_correlation_id = 0
        # Each (api key, version)'s request header around its correlation id, encoded once: a follower sends
        # the same Fetch header thousands of times a second.
        self._header_ends: dict[tuple[int, int], tuple[bytes, bytes]] = {}
        self._transport: asyncio.Transport | None = None
        self._pending_writes: list[bytes | memoryview] = []
        self._flush_scheduled = False
        self._error: KafkaError | None = None
        self._reauth_at: float | None = None  # loop time to re-authenticate from (KIP-368); None: never
        self._reauthentication: asyncio.Future | None = None  # the re-authentication under way
        self.reauthentications = 0  # completed re-authentications, for tests and metrics

    def __repr__(self) -> str:
        return f"<Connection {self.host}:{self.port} in_flight={len(self._in_flight)}>"

    @property
    def closed(self) -> bool:
        return self._error is not None

    @property
    def in_flight_count(self) -> int:
        return len(self._in_flight)

    async def connect(self, timeout_ms: int | None = None) -> None:
        """Open the socket (with TLS if configured), negotiate API versions and authenticate with SASL if
        configured; raises KafkaError (NETWORK_EXCEPTION for a failed connection or TLS handshake)."""
        assert self._transport is None
        loop = asyncio.get_running_loop()
        timeout = (timeout_ms or self.request_timeout_ms) / 1000
        tls = self.security.ssl_context
        try:
            local_addr = None if self.local_host is None else (self.local_host, 0)
            await asyncio.wait_for(
                loop.create_connection(lambda: self, self.host, self.port, local_addr=local_addr, ssl=tls,
                                       server_hostname=self.host if tls is not None else None), timeout)
        except (OSError, TimeoutError) as e:  # ssl.SSLError is an OSError
            self.close(KafkaError(NETWORK_EXCEPTION, f"cannot connect to {self.host}:{self.port}: {e!r}"))
            raise self._error from e
        await self.negotiate_versions()
        assert self.api_versions
        if self.security.sasl is not None:
            self._session_started(await authenticate(self, self.security.sasl))

    def _session_started(self, lifetime_ms: int) -> None:
        delay = reauth_delay_s(lifetime_ms, random.random())
        self._reauth_at = None if delay is None else asyncio.get_running_loop().time() + delay

    def _reauth_due(self, now: float) -> bool:
        return self._reauthentication is not None or (self._reauth_at is not None and now >= self._reauth_at)

    async def _fresh_session(self) -> None:
        """Wait for the re-authentication, starting it if nobody has; raises KafkaError if it fails."""
        if self._reauthentication is None:
            self._reauthentication = asyncio.ensure_future(self._reauthenticate())
            # Its failure also closes the connection; retrieve it here in case every waiter timed out.
            self._reauthentication.add_done_callback(lambda task: task.cancelled() or task.exception())
        await asyncio.shield(self._reauthentication)

    async def _reauthenticate(self) -> None:
        try:
            # Kafka's clients stop sending, let the requests in flight finish, then re-authenticate: the
            # broker takes nothing but the SASL exchange until it completes.
            pending = [entry.future for entry in self._in_flight]
            if pending:
                await asyncio.wait(pending)
            self._raise_if_closed()
            assert self.security.sasl is not None
            self._session_started(await authenticate(self, self.security.sasl))
            self.reauthentications += 1
        except KafkaError as e:
            self.close(KafkaError(e.code, f"re-authentication with {self.host}:{self.port} failed: {e}"))
            raise self._error from e
        finally:
            self._reauthentication = None

    async def negotiate_versions(self) -> None:
        body = messages.encode_request(
            ApiKey.API_VERSIONS,
            _API_VERSIONS_FIRST,
            {
                "client_software_name": CLIENT_SOFTWARE_NAME,
                "client_software_version": CLIENT_SOFTWARE_VERSION,
            },
        )
        frame = await self.request(ApiKey.API_VERSIONS, _API_VERSIONS_FIRST, [body])
        assert frame is not None
        _, offset = decode_response_header(frame, response_header_version(ApiKey.API_VERSIONS, 3))
        error_code = int.from_bytes(frame[offset : offset + 2], "big", signed=True)
        # On UNSUPPORTED_VERSION the body is v0-encoded and lists what the broker does support.
        version = 0 if error_code == UNSUPPORTED_VERSION else _API_VERSIONS_FIRST
        response = messages.decode_response(ApiKey.API_VERSIONS, version, _readonly(frame), offset)
        if error_code not in (0, UNSUPPORTED_VERSION):
            raise KafkaError(error_code, "ApiVersions failed")
        self.api_versions = {
            int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys
        }

    def pick_version(self, api_key: int) -> int:
        """The highest version both sides support: min(our max, broker max)."""
        ours = SUPPORTED_APIS[api_key]
        theirs = self.api_versions.get(api_key)
        if theirs is None:
            raise KafkaError(UNSUPPORTED_VERSION, f"broker does not offer {ApiKey(api_key).name}")
        version = min(ours.max_version, theirs[1])
        if version < max(ours.min_version, theirs[0]):
            raise KafkaError(UNSUPPORTED_VERSION, f"no common version of {ApiKey(api_key).name}: {theirs}")
        assert ours.supports(version)
        return version

    async def send(
        self, api_key: int, data: dict, *, version: int | None = None, timeout_ms: int | None = None
    ):
        """Encode `data` with kio, send it, and return the decoded response entity."""
        if version is None:
            version = self.pick_version(api_key)
        body = messages.encode_request(api_key, version, data)
        frame = await self.request(api_key, version, [body], timeout_ms=timeout_ms)
        assert frame is not None
        return decode_response_frame(api_key, version, frame)

    async def request(
        self,
        api_key: int,
        version: int,
        parts: list[bytes | memoryview],
        *,
        expect_response: bool = True,
        timeout_ms: int | None = None,
        flush: bool = False,
    ) -> bytearray | None:
        """Send one request made of body parts; return the whole response frame (header included).

        Waiting for a free in-flight slot counts against the same timeout as waiting for the response.
        `flush`: write it, with any requests queued before it, in this call rather than at the end of the
        event-loop turn. The turn lets requests issued together leave in one write; a caller that sends one
        request and waits for it gains nothing from it, and on a follower's fetch it is a wait on the acks=all
        path behind whatever I/O the turn serves first (docs/profiles/rf3-linger0.md).
        """
        self._raise_if_closed()
        timeout = (timeout_ms or self.request_timeout_ms) / 1000
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if api_key in _SASL_APIS:
            entry = self._enqueue(api_key, version, parts, expect_response, flush)
            return None if entry is None else await self._await_response(entry, timeout)
        if self._slots.locked():
            try:
                await asyncio.wait_for(self._slots.acquire(), timeout)
            except TimeoutError:
                raise KafkaError(REQUEST_TIMED_OUT, f"no free in-flight slot on {self!r}") from None
        else:
            # Taking a free slot must not yield: requests issued in order are then written in order,
            # which keeps an idempotent producer's sequences in order on the wire.
            await self._slots.acquire()
        try:
            if self._reauth_due(loop.time()):
                try:
                    await asyncio.wait_for(self._fresh_session(), max(0.0, deadline - loop.time()))
                except TimeoutError:
                    raise KafkaError(REQUEST_TIMED_OUT, f"re-authentication with {self.host}:{self.port}") from None
            self._raise_if_closed()  # the connection may have died while we waited for a slot
            entry = self._enqueue(api_key, version, parts, expect_response, flush)
            if entry is None:
                return None
            return await self._await_response(entry, max(0.0, deadline - loop.time()))
        finally:
            self._slots.release()

    async def _await_response(self, entry: _InFlight, timeout: float) -> bytearray:
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for hears of the answer through a callback a
        # loop turn before it wakes the caller, a turn more on every follower fetch; and it can drop a
        # cancellation that arrives with the answer.
        try:
            async with asyncio.timeout(timeout):
                return await entry.future
        except TimeoutError:
            # Like Kafka's NetworkClient: a timed-out request poisons the connection (its reply may still come).
            self.close(
                KafkaError(NETWORK_EXCEPTION, f"closed after request {entry.correlation_id} timed out")
            )
            raise KafkaError(
                REQUEST_TIMED_OUT, f"{ApiKey(entry.api_key).name} to {self.host}:{self.port}"
            ) from None

    def _enqueue(self, api_key: int, version: int, parts: list, expect_response: bool,
                 flush: bool = False) -> _InFlight | None:
        assert version >= 0
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) % CORRELATION_ID_LIMIT
        ends = self._header_ends.get((api_key, version))
        if ends is None:
            ends = self._header_ends[(api_key, version)] = self._encode_header_ends(api_key, version)
        head, tail = ends
        size = len(head) + 4 + len(tail) + sum(len(p) for p in parts)
        # Size prefix and header in one buffer: a part fewer for the transport to gather.
        self._pending_writes.append(
            size_prefix(size) + head + correlation_id.to_bytes(4, "big", signed=True) + tail
        )
        self._pending_writes.extend(parts)
        entry = None
        if expect_response:
            # In the FIFO before its bytes can leave, so that even an answer read in the same call finds it.
            entry = _InFlight(correlation_id, api_key, version, asyncio.get_running_loop().create_future())
            self._in_flight.append(entry)
        if flush:
            self._flush()  # a flush already scheduled then finds nothing left to write
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush_scheduled_writes)
        return entry

    def _encode_header_ends(self, api_key: int, version: int) -> tuple[bytes, bytes]:
        """The header's bytes before the correlation id (api key, version) and after it (client id, tags)."""
        header = encode_request_header(api_key, version, 0, self.client_id)
        return header[:4], header[8:]

    def _flush_scheduled_writes(self) -> None:
        self._flush_scheduled = False
        self._flush()

    def _flush(self) -> None:
        if self._transport is None or self._error is not None:
            self._pending_writes.clear()
            return
        if self._pending_writes:
            writes, self._pending_writes = self._pending_writes, []
            self._transport.writelines(writes)

    def _raise_if_closed(self) -> None:
        if self._error is not None:
            raise self._error

    def close(self, error: KafkaError | None = None) -> None:
        """Close the socket and fail every in-flight request; idempotent."""
        if self._error is None:
            self._error = error or KafkaError(
                NETWORK_EXCEPTION, f"connection to {self.host}:{self.port} closed"
            )
        while self._in_flight:
            entry = self._in_flight.popleft()
            if not entry.future.done():
                entry.future.set_exception(self._error)
        self._pending_writes.clear()
        if self._transport is not None:
            self._transport.close()
        assert not self._in_flight

    # asyncio.BufferedProtocol callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert self._transport is None
        self._transport = transport  # type: ignore[assignment]

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._decoder.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            self._decoder.buffer_updated(nbytes)
        except FrameError as e:
            self.close(KafkaError(NETWORK_EXCEPTION, f"bad frame from broker: {e}"))
            return
        while (frame := self._decoder.next_frame()) is not None:
            if not self._dispatch(frame):
                return

    def eof_received(self) -> bool:
        return False  # let the transport close; connection_lost fails what is in flight

    def connection_lost(self, exc: Exception | None) -> None:
        self.close(
            KafkaError(NETWORK_EXCEPTION, f"connection to {self.host}:{self.port} lost: {exc or 'EOF'}")
        )

    def _dispatch(self, frame: bytearray) -> bool:
        if not self._in_flight or len(frame) < 4:
            self.close(KafkaError(NETWORK_EXCEPTION, "unexpected response frame: closing (out of sync)"))
            return False
        entry = self._in_flight.popleft()
        correlation_id = int.from_bytes(frame[:4], "big", signed=True)
        if correlation_id != entry.correlation_id:
            self._in_flight.appendleft(entry)  # so close() fails it with the others
            self.close(
                KafkaError(
                    NETWORK_EXCEPTION,
                    f"correlation id {correlation_id} != expected {entry.correlation_id}: closing (out of sync)",
                )
            )
            return False
        if not entry.future.done():  # a cancelled caller leaves a done future behind
            entry.future.set_result(frame)
        return True
