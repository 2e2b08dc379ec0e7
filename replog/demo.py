"""`python -m replog.demo` (make demo): one broker, one topic, a few thousand records there and back.

Starts a broker process in a temporary directory on a free port, creates a 3-partition topic, produces
5,000 records with the bundled idempotent producer (acks=all), once uncompressed and once with lz4,
reads them back with the bundled consumer, checks count and content, and tells what happened.
The broker is always stopped with SIGTERM, whatever fails.
"""

import asyncio
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .client import Admin, Consumer, NewTopic, Producer
from .protocol.apis import ApiKey
from .protocol.compression import Compression, CompressionError, compress
from .protocol.frames import size_prefix
from .protocol.headers import encode_request_header

RECORDS = 5_000
PARTITIONS = 3
VALUE_BYTES = 100
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
CONSUME_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers_api_versions(host: str, port: int, timeout: float = 1.0) -> bool:
    """One blocking ApiVersions v0 round trip: the broker is serving requests, not just listening."""
    header = encode_request_header(ApiKey.API_VERSIONS, 0, 1, "replog-probe")
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(size_prefix(len(header)) + header)
            size = int.from_bytes(_recv_exactly(s, 4), "big")
            assert 0 < size < 1 << 20
            body = _recv_exactly(s, size)
    except (OSError, ConnectionError):
        return False
    correlation_id = int.from_bytes(body[:4], "big")
    error_code = int.from_bytes(body[4:6], "big", signed=True)
    return correlation_id == 1 and error_code == 0


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = s.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        chunks += chunk
    return bytes(chunks)


class BrokerProcess:
    """A `python -m replog broker start` child process on 127.0.0.1 (shared with the integration tests)."""

    def __init__(
        self, log_dir: Path, *, port: int | None = None, node_id: int = 1, output: Path | None = None,
        overrides: dict[str, str] | None = None,
    ):
        self.log_dir = Path(log_dir)
        self.port = port or free_port()
        self.node_id = node_id
        self.overrides = dict(overrides or {})
        self.output = output or self.log_dir.parent / f"broker-{node_id}.out"
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = READY_TIMEOUT_S) -> None:
        assert self.proc is None or self.proc.poll() is not None, "broker already running"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable, "-m", "replog", "broker", "start",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "--override", f"log.dirs={self.log_dir}",
            "--override", f"node.id={self.node_id}",
        ]  # fmt: skip
        for key, value in self.overrides.items():
            command += ["--override", f"{key}={value}"]
        with open(self.output, "ab") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        self.wait_ready(timeout)

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not answers_api_versions("127.0.0.1", self.port):
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.output_tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"broker not ready after {timeout}s:\n{self.output_tail()}")
            time.sleep(0.05)  # poll interval while the process boots

    def output_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.output.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no output)"

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM, then SIGKILL if it does not exit in time; returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return self.kill()

    def kill(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.kill()
        return self.proc.wait(STOP_TIMEOUT_S)

    def restart(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Stop (gracefully) and start again on the same port and log directory."""
        self.stop()
        self.start(timeout)


async def produce(bootstrap: str, topic: str, compression: str) -> tuple[float, dict[int, list[int]]]:
    """Send RECORDS keyed records; returns (seconds, {partition: offsets})."""
    offsets: dict[int, list[int]] = {}
    started = time.perf_counter()
    async with Producer(bootstrap, acks="all", compression=compression, linger_ms=5) as producer:
        deliveries = [await producer.send(topic, _value(i), key=b"key-%d" % i) for i in range(RECORDS)]
        await producer.flush()
        for delivery in deliveries:
            metadata = delivery.result()
            offsets.setdefault(metadata.partition, []).append(metadata.offset)
    return time.perf_counter() - started, offsets


def _value(i: int) -> bytes:
    return (b"record-%06d-" % i).ljust(VALUE_BYTES, b"x")


async def consume(bootstrap: str, topic: str) -> tuple[float, list[bytes], dict[int, int]]:
    """Read the topic from the beginning until RECORDS arrive; returns (seconds, values, end offsets)."""
    started = time.perf_counter()
    values: list[bytes] = []
    async with Consumer(bootstrap) as consumer:
        tps = [(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        while len(values) < RECORDS and time.monotonic() < deadline:
            for records in (await consumer.getmany(1000)).values():
                assert all(a.offset < b.offset for a, b in zip(records, records[1:], strict=False))
                values.extend(r.value for r in records)
        ends = await consumer.end_offsets(tps)
    return time.perf_counter() - started, values, {p: ends[(topic, p)] for _, p in tps}


async def story(bootstrap: str) -> bool:
    codecs = ["none"] + (["lz4"] if _lz4_available() else [])
    ok = True
    async with Admin(bootstrap) as admin:
        await admin.create_topics([NewTopic(f"demo-{c}", PARTITIONS, 1) for c in codecs])
        print(f"created topics {', '.join(f'demo-{c}' for c in codecs)} with {PARTITIONS} partitions each")
    for codec in codecs:
        topic = f"demo-{codec}"
        megabytes = RECORDS * VALUE_BYTES / 1e6
        seconds, offsets = await produce(bootstrap, topic, codec)
        print(f"[{codec}] produced {RECORDS} records ({megabytes:.1f} MB of values) in {seconds:.2f}s "
              f"= {megabytes / seconds:.1f} MB/s, acks=all, idempotent")  # fmt: skip
        for p in sorted(offsets):
            print(
                f"[{codec}]   partition {p}: {len(offsets[p])} records at offsets {min(offsets[p])}..{max(offsets[p])}"
            )
        seconds, values, ends = await consume(bootstrap, topic)
        print(f"[{codec}] consumed {len(values)} records in {seconds:.2f}s = {megabytes / seconds:.1f} MB/s; "
              f"end offsets {ends}")  # fmt: skip
        expected = {_value(i) for i in range(RECORDS)}
        good = len(values) == RECORDS and set(values) == expected and sum(ends.values()) == RECORDS
        print(f"[{codec}] verification: {'OK' if good else 'FAILED'} (count, content and end offsets)")
        ok &= good
    return ok


def _lz4_available() -> bool:
    try:
        compress(Compression.LZ4, b"probe")
    except (CompressionError, ImportError, AttributeError):
        return False
    return True


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)  # unwinds through the finally that stops the broker


def main() -> int:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    with tempfile.TemporaryDirectory(prefix="replog-demo-") as tmp:
        broker = BrokerProcess(Path(tmp) / "logs")
        print(f"starting broker on {broker.bootstrap} (logs in {tmp})")
        broker.start()
        print(f"broker pid {broker.proc.pid} answers ApiVersions")
        try:
            ok = asyncio.run(story(broker.bootstrap))
        finally:
            code = broker.stop()
            print(f"broker stopped with SIGTERM (exit code {code})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
