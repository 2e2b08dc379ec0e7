"""The server's own request path, counted: a request answered at once is framed and handed to the writer as one
part, in the call that reads its frame (docs/profiles/rf3-produce-path.md)."""

import socket

from replog.protocol.apis import ApiKey
from replog.protocol.headers import encode_request_header
from replog.server.connection import ConnectionHolder, ServerConnection
from replog.server.dispatch import Dispatcher
from replog.server.writer import SocketWriter


class FakeTransport:
    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def get_extra_info(self, name, default=None):
        return {"peername": ("127.0.0.1", 1), "socket": self._sock}.get(name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def abort(self) -> None:
        raise AssertionError("the connection was aborted")


async def test_an_answer_given_at_once_reaches_the_writer_as_one_part(monkeypatch):
    written = []
    write = SocketWriter.write
    monkeypatch.setattr(SocketWriter, "write", lambda self, parts: written.append(list(parts)) or write(self, parts))
    server_side, client_side = socket.socketpair()
    with server_side, client_side:
        dispatcher = Dispatcher({ApiKey.PRODUCE: lambda ctx: [b"answer body"]}, lambda: [])
        connection = ServerConnection(ConnectionHolder(1), dispatcher, max_frame_bytes=1 << 20, max_inflight=5,
                                      use_sendfile=True)
        connection.connection_made(FakeTransport(server_side))
        head = encode_request_header(ApiKey.PRODUCE, 9, 42, "client")
        frame = (len(head) + 3).to_bytes(4, "big") + head + b"abc"
        for _ in range(3):  # three requests, each in one read
            buffer = connection.get_buffer(-1)
            buffer[:len(frame)] = frame
            connection.buffer_updated(len(frame))
        expected = (4 + 1 + 11).to_bytes(4, "big") + (42).to_bytes(4, "big") + b"\x00" + b"answer body"
        assert written == [[expected]] * 3
        assert client_side.recv(1024) == expected * 3
        connection.connection_lost(None)
