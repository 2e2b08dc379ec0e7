"""Catch-up read of a page-cached backlog, with the broker's sendfile path on and off.

A backlog (16 MiB quick, 1 GiB full) of 1 KiB values over 4 partitions is produced once; then for each
setting of fetch.sendfile.enable the broker restarts on the same log directory, the segment files are
read once (and `fincore` confirms they are cached), and two readers catch up from offset 0: a raw
driver that keeps one Fetch v11 per partition in flight on one socket and discards the records, and a
confluent-kafka consumer. Figures are divided by raw sendfile and read()+send() of the largest segment.
"""

import asyncio
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import confluent_kafka

from replog.harness.broker_process import BrokerProcess
from replog.protocol.apis import ApiKey
from replog.protocol.fetch import decode_fetch_response
from replog.protocol.frames import size_prefix
from replog.protocol.headers import encode_request_header
from replog.protocol.messages import encode_request

from .baselines import discard_server, read_send_to_loopback, sendfile_to_loopback, warm
from .harness import MiB, Result, Stats, repeat
from .produce_throughput import create_topic

NAME = "consume"
TOPIC = "catchup"
PARTITIONS = 4
VALUE_BYTES = 1024
FETCH_VERSION = 11
PARTITION_MAX_BYTES = 8 * MiB
QUEUE_FULL_BACKOFF_MS = 10  # librdkafka's fetch.queue.backoff.ms, see catchup_consumer_config
BATCH_HEADER_BYTES = (
    27  # through last_offset_delta: base_offset, length, epoch, magic, crc, attributes, delta
)


def produce_backlog(bootstrap: str, volume: int) -> int:
    """Writes `volume` bytes of values spread round-robin over the partitions; returns the record count."""
    asyncio.run(create_topic(bootstrap, TOPIC, PARTITIONS))
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1_000_000,
                                         "queue.buffering.max.kbytes": 256 * 1024})  # fmt: skip
    value = os.urandom(VALUE_BYTES)
    count = volume // VALUE_BYTES
    for i in range(count):
        while True:
            try:
                producer.produce(TOPIC, value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.005)
    if producer.flush(120):
        raise RuntimeError("backlog not fully delivered")
    return count


def segment_files(log_dir: Path) -> list[Path]:
    return sorted(log_dir.glob(f"{TOPIC}-*/*.log"))


def warm_and_check(log_dir: Path) -> str:
    """Read every segment once; returns fincore's summary (or a note if it is missing)."""
    files = segment_files(log_dir)
    for path in files:
        warm(path)
    return page_cache_residency(files)


def page_cache_residency(files: list[Path]) -> str:
    """How much of the files the page cache holds now, from fincore (or a note if it is missing)."""
    if not files:
        return "no segment files"
    if not shutil.which("fincore"):
        return "fincore not available"
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES,SIZE", *map(str, files)],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    resident = sum(int(line.split()[0]) for line in out.splitlines())
    size = sum(int(line.split()[1]) for line in out.splitlines())
    return f"{resident / size:.1%} of {size / MiB:.0f} MiB resident"


class RawFetcher:
    """One socket, one Fetch v11 in flight per partition; records are parsed only for the next offset."""

    def __init__(self, host: str, port: int):
        self.sock = socket.create_connection((host, port))
        self.correlation_id = 0
        self.in_flight: dict[int, int] = {}  # correlation id -> partition

    def send_fetch(self, partition: int, offset: int) -> None:
        self.correlation_id += 1
        body = encode_request(ApiKey.FETCH, FETCH_VERSION, {
            "replica_id": -1, "max_wait": 100, "min_bytes": 1, "max_bytes": 64 * MiB, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": TOPIC, "partitions": [{
                "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                "log_start_offset": -1, "partition_max_bytes": PARTITION_MAX_BYTES}]}],
        })  # fmt: skip
        header = encode_request_header(ApiKey.FETCH, FETCH_VERSION, self.correlation_id, "bench-raw")
        self.sock.sendall(size_prefix(len(header) + len(body)) + header + body)
        self.in_flight[self.correlation_id] = partition

    def receive(self) -> tuple[int, int, int]:
        """Reads the next response; returns (partition, next offset, record bytes)."""
        size = int.from_bytes(self._read(4), "big")
        frame = self._read(size)
        partition = self.in_flight.pop(int.from_bytes(frame[:4], "big"))
        response = decode_fetch_response(FETCH_VERSION, frame, 4)
        result = response.topics[0].partitions[0]
        assert result.error_code == 0, f"fetch error {result.error_code}"
        records = result.records or memoryview(b"")
        return partition, next_offset(records), len(records)

    def _read(self, n: int) -> bytearray:
        buffer = bytearray(n)
        view = memoryview(buffer)
        got = 0
        while got < n:
            read = self.sock.recv_into(view[got:])
            if not read:
                raise ConnectionError("broker closed the connection")
            got += read
        return buffer

    def close(self) -> None:
        self.sock.close()


def next_offset(records: memoryview) -> int | None:
    """Offset after the last complete batch, or None if there is none."""
    position, last = 0, None
    while position + BATCH_HEADER_BYTES <= len(records):
        base_offset = int.from_bytes(records[position : position + 8], "big")
        length = int.from_bytes(records[position + 8 : position + 12], "big")
        if position + 12 + length > len(records):
            break
        last = base_offset + int.from_bytes(records[position + 23 : position + 27], "big") + 1
        position += 12 + length
    return last


def raw_catchup(port: int, ends: dict[int, int]) -> float:
    """Bytes of records per second until every partition has been read to its end offset."""
    fetcher = RawFetcher("127.0.0.1", port)
    try:
        started = time.perf_counter()
        total = 0
        for partition in ends:
            fetcher.send_fetch(partition, 0)
        while fetcher.in_flight:
            partition, offset, size = fetcher.receive()
            total += size
            if offset is not None and offset < ends[partition]:
                fetcher.send_fetch(partition, offset)
            elif offset is None:
                raise RuntimeError(f"partition {partition}: empty fetch before the end offset")
        return total / (time.perf_counter() - started)
    finally:
        fetcher.close()


def catchup_consumer_config(bootstrap: str) -> dict:
    """confluent-kafka's settings for a catch-up read, the same for every broker measured.

    librdkafka stops fetching once its prefetch queue holds queued.min.messages (100,000 by default, counted
    over the consumer's one queue: 100 MB of 1 KiB records) and then waits fetch.queue.backoff.ms (1,000 ms
    by default) before it looks again, however soon the application drains the queue. A broker that answers
    each fetch with what it asks (8 MiB a partition, 32 MB here, as Kafka does) fills that queue in three or
    four answers and the reader then idles for most of that second; one that caps its answers lower (Tansu
    sends about 5 MiB) never fills it. The short back-off makes the reader resume fetching as soon as the
    queue is below its mark, so the figure is the broker's and the client's pace, not a client timer."""
    return {
        "bootstrap.servers": bootstrap, "group.id": "bench-catchup", "enable.auto.commit": False,
        "fetch.max.bytes": 64 * MiB, "max.partition.fetch.bytes": PARTITION_MAX_BYTES,
        "queued.max.messages.kbytes": 256 * 1024, "fetch.queue.backoff.ms": QUEUE_FULL_BACKOFF_MS,
    }  # fmt: skip


def confluent_catchup(bootstrap: str, count: int) -> float:
    """Value bytes per second for a confluent-kafka consumer reading all partitions from offset 0."""
    consumer = confluent_kafka.Consumer(catchup_consumer_config(bootstrap))
    try:
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        started = time.perf_counter()
        received = value_bytes = 0
        deadline = started + 300
        while received < count and time.perf_counter() < deadline:
            # Never ask for more than is left: consume() waits out its timeout while short of num_messages.
            for message in consumer.consume(min(10_000, count - received), 1.0):
                if message.error():
                    raise RuntimeError(f"consumer error: {message.error()}")
                value_bytes += len(message.value())
                received += 1
        if received < count:
            raise RuntimeError(f"confluent-kafka read {received} of {count} records in 300 s")
        return value_bytes / (time.perf_counter() - started)
    finally:
        consumer.close()


def end_offsets(bootstrap: str) -> dict[int, int]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-ends"})
    try:
        return {p: consumer.get_watermark_offsets(confluent_kafka.TopicPartition(TOPIC, p), 10)[1]
                for p in range(PARTITIONS)}  # fmt: skip
    finally:
        consumer.close()


def run(quick: bool, workdir: Path) -> list[Result]:
    volume = (16 if quick else 1024) * MiB
    warmup, repeats = (1, 2) if quick else (1, 3)
    log_dir = workdir / "consume-logs"
    broker = BrokerProcess(log_dir, overrides={"fetch.sendfile.enable": "true"}, output=workdir / "consume-broker.out")
    broker.start()
    try:
        count = produce_backlog(broker.bootstrap, volume)
        ends = end_offsets(broker.bootstrap)
    finally:
        broker.stop()
    results = []
    for sendfile in ("true", "false"):
        broker = BrokerProcess(log_dir, overrides={"fetch.sendfile.enable": sendfile}, output=broker.output)
        results += measure_setting(broker, log_dir, ends, count, warmup, repeats)
    return results


def measure_setting(broker: BrokerProcess, log_dir: Path, ends: dict[int, int], count: int, warmup: int,
                    repeats: int) -> list[Result]:  # fmt: skip
    """Both readers against one broker start, with baselines measured right before on the largest segment."""
    broker.start()
    try:
        cached = warm_and_check(log_dir)
        largest = max(segment_files(log_dir), key=lambda p: p.stat().st_size)
        baselines = measure_baselines(largest, warmup, repeats)
        raw = repeat(lambda: raw_catchup(broker.port, ends), warmup=warmup, repeats=repeats)
        confluent = repeat(lambda: confluent_catchup(broker.bootstrap, count), warmup=warmup, repeats=repeats)
    finally:
        broker.stop()
    setting = broker.overrides["fetch.sendfile.enable"]
    extra = {"page_cache": cached, "records": count}
    return [
        Result(NAME, f"sendfile={setting}, {reader}", "B/s", stats, name, baseline.median, extra)
        for reader, stats in (("raw fetch driver", raw), ("confluent-kafka", confluent))
        for name, baseline in baselines.items()
    ]


def measure_baselines(path: Path, warmup: int, repeats: int) -> dict[str, Stats]:
    with discard_server() as address:
        return {
            "raw sendfile": repeat(
                lambda: sendfile_to_loopback(address, path), warmup=warmup, repeats=repeats
            ),
            "read()+send()": repeat(
                lambda: read_send_to_loopback(address, path), warmup=warmup, repeats=repeats
            ),
        }
