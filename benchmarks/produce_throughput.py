"""Single-broker produce throughput: bundled async client and confluent-kafka, acks=1 and acks=all,
1 KiB and 100 B values, no compression, linger 5 ms, ~1 MB batches. Each case writes to its own
1-partition topic; the figure is value bytes per second, divided by raw 1 MiB file appends."""

import asyncio
import os
import time
from pathlib import Path

import confluent_kafka

from replog.client import Admin, NewTopic, Producer
from replog.harness.broker_process import BrokerProcess

from .baselines import file_append
from .harness import MiB, Result, repeat

NAME = "produce"
BATCH_BYTES = 1_000_000  # under the broker's default message.max.bytes (1,048,588) with batch overhead
LINGER_MS = 5


async def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    async with Admin(bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, partitions, 1)])


async def bundled_produce(bootstrap: str, topic: str, acks: str, value: bytes, count: int) -> float:
    async with Producer(bootstrap, acks=acks, linger_ms=LINGER_MS, batch_size=BATCH_BYTES) as producer:
        await producer.start()  # connection and producer id outside the timed region
        started = time.perf_counter()
        for _ in range(count):
            await producer.send(topic, value)
        await producer.flush()
        return count / (time.perf_counter() - started)


def confluent_produce(bootstrap: str, topic: str, acks: str, value: bytes, count: int) -> float:
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "linger.ms": LINGER_MS,
        "batch.size": BATCH_BYTES,
        "compression.type": "none",
        "queue.buffering.max.kbytes": 256 * 1024,
    })  # fmt: skip
    producer.list_topics(topic, timeout=10)  # metadata and connection outside the timed region
    started = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:  # local queue full: let deliveries drain
                producer.poll(0.005)
    if remaining := producer.flush(60):
        raise RuntimeError(f"confluent-kafka: {remaining} messages undelivered")
    return count / (time.perf_counter() - started)


def run(quick: bool, workdir: Path) -> list[Result]:
    volume = (8 if quick else 64) * MiB
    warmup, repeats = (1, 2) if quick else (1, 5)
    append_volume = (64 if quick else 256) * MiB
    append = repeat(lambda: file_append(workdir, append_volume, fdatasync=False), warmup=1, repeats=3)
    broker = BrokerProcess(workdir / "produce-logs", output=workdir / "produce-broker.out")
    broker.start()
    results = []
    try:
        for client in ("replog", "confluent-kafka"):
            for acks in ("1", "all"):
                for value_bytes in (1024, 100):
                    results.append(
                        produce_case(
                            broker.bootstrap,
                            client,
                            acks,
                            value_bytes,
                            volume,
                            warmup,
                            repeats,
                            append.median,
                        )
                    )
    finally:
        broker.stop()
    return results


def produce_case(bootstrap, client, acks, value_bytes, volume, warmup, repeats, append_rate) -> Result:
    topic = f"produce-{client}-acks{acks}-{value_bytes}b".replace(".", "")
    asyncio.run(create_topic(bootstrap, topic))
    value = os.urandom(value_bytes)
    count = volume // value_bytes
    if client == "replog":
        measure = lambda: asyncio.run(bundled_produce(bootstrap, topic, acks, value, count))  # noqa: E731
    else:
        measure = lambda: confluent_produce(bootstrap, topic, acks, value, count)  # noqa: E731
    records_per_s = repeat(measure, warmup=warmup, repeats=repeats)
    bytes_per_s = type(records_per_s).of([r * value_bytes for r in records_per_s.samples])
    return Result(NAME, f"{client}, acks={acks}, {value_bytes} B values", "B/s", bytes_per_s, "file append",
                  append_rate, {"records_per_s": records_per_s.median, "records": count})  # fmt: skip
