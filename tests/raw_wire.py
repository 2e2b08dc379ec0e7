"""A blocking raw-socket Kafka client for tests that need exact control of the bytes on the wire."""

import socket

from replog.protocol.apis import response_header_version
from replog.protocol.frames import size_prefix
from replog.protocol.headers import decode_response_header, encode_request_header
from replog.protocol.messages import decode_response, encode_request


class RawConnection:
    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self._correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(size_prefix(len(payload)) + payload)

    def send_request(self, api_key: int, version: int, body: bytes) -> int:
        self._correlation_id += 1
        self.send_frame(encode_request_header(api_key, version, self._correlation_id, "raw-test") + body)
        return self._correlation_id

    def receive_frame(self) -> bytes:
        size = int.from_bytes(self._receive_exactly(4), "big")
        return self._receive_exactly(size)

    def _receive_exactly(self, n: int) -> bytes:
        chunks, remaining = [], n
        while remaining:
            chunk = self.sock.recv(remaining)
            if not chunk:
                raise ConnectionError("closed by the broker")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def call(self, api_key: int, version: int, request: dict | bytes):
        """Send a request (a kio dict or encoded body) and decode the response with kio."""
        body = request if isinstance(request, bytes) else encode_request(api_key, version, request)
        correlation_id = self.send_request(api_key, version, body)
        frame = self.receive_frame()
        got, offset = decode_response_header(frame, response_header_version(api_key, version))
        assert got == correlation_id
        return decode_response(api_key, version, frame, offset)

    def is_closed_by_peer(self) -> bool:
        """True once the broker has closed the connection (reads EOF or a reset)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
