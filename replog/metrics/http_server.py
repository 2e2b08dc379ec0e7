"""The Prometheus scrape endpoint: GET /metrics on the event loop, so collectors read the broker's state on
the thread that changes it (prometheus-client's own server would call them from another thread)."""

import asyncio
import logging

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger(__name__)

MAX_REQUEST_HEAD_BYTES = 8192
READ_TIMEOUT_S = 10


async def start_metrics_server(host: str, port: int, registry: CollectorRegistry) -> asyncio.Server:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            method, _, rest = head.partition(b" ")
            path = rest.split(b" ", 1)[0].split(b"?", 1)[0]
            if method != b"GET":
                writer.write(_response(405, b"text/plain", b"only GET\n"))
            elif path != b"/metrics":
                writer.write(_response(404, b"text/plain", b"try /metrics\n"))
            else:
                writer.write(_response(200, CONTENT_TYPE_LATEST.encode(), generate_latest(registry)))
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            pass  # a client that went away or sent junk: nothing to answer
        finally:
            writer.close()

    return await asyncio.start_server(serve, host, port, limit=MAX_REQUEST_HEAD_BYTES)


_REASONS = {200: b"OK", 404: b"Not Found", 405: b"Method Not Allowed"}


def _response(status: int, content_type: bytes, body: bytes) -> bytes:
    return (b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
            % (status, _REASONS[status], content_type, len(body))) + body
