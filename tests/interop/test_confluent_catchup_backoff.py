"""The consume benchmark's confluent-kafka reader against a replog broker: when librdkafka's prefetch queue is
full it looks again after the benchmark's short fetch.queue.backoff.ms, not after librdkafka's default
second (which idled the reader for most of every full-mode run against replog; docs/profiles/consume.md)."""

import asyncio
import logging
import re
import time

import pytest

from benchmarks import consume_catchup
from benchmarks.produce_throughput import create_topic

confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC = "catchup-backoff"
RECORDS = 3_000
# Far below what one fetch answer carries (8 MiB of 1 KiB records), so the first answer fills the queue.
QUEUE_MARK = 100
READ_TIMEOUT_S = 60.0
QUEUE_FULL_BACKOFF = re.compile(r"Fetch backoff for (\d+)ms: Local: Queue full")


class LogLines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_catchup_reader_backs_off_a_full_queue_for_the_short_interval(broker):
    asyncio.run(create_topic(broker.bootstrap, TOPIC, 1))
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for _ in range(RECORDS):
        producer.produce(TOPIC, b"v" * consume_catchup.VALUE_BYTES, partition=0)
    assert producer.flush(30) == 0

    log = logging.getLogger("test-catchup-backoff")
    log.setLevel(logging.DEBUG)
    handler = LogLines()
    log.addHandler(handler)
    config = consume_catchup.catchup_consumer_config(broker.bootstrap) | {
        "queued.min.messages": QUEUE_MARK, "debug": "fetch"}
    consumer = confluent_kafka.Consumer(config, logger=log)
    try:
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
        received = 0
        deadline = time.monotonic() + READ_TIMEOUT_S
        while received < RECORDS or not queue_full_backoffs(handler.lines):
            assert time.monotonic() < deadline, f"read {received} of {RECORDS}, no queue-full back-off logged"
            # One record a call until librdkafka has logged a back-off (its log arrives through these calls):
            # the queue stays above its mark meanwhile, so the fetcher must meet it full.
            wanted = QUEUE_MARK if queue_full_backoffs(handler.lines) else 1
            received += len(consumer.consume(min(wanted, RECORDS - received) or 1, 0.1))
    finally:
        consumer.close()
        log.removeHandler(handler)

    assert set(queue_full_backoffs(handler.lines)) == {consume_catchup.QUEUE_FULL_BACKOFF_MS}


def queue_full_backoffs(lines: list[str]) -> list[int]:
    """The back-offs, in ms, librdkafka logged for a full prefetch queue."""
    return [int(m.group(1)) for line in lines if (m := QUEUE_FULL_BACKOFF.search(line))]
