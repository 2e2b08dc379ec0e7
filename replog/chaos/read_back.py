"""Reading a run's topic back with librdkafka: every partition from offset 0 up to its high watermark. The
chaos run (runner.py) and the crash loop (crash_loop.py) both end with it."""

import time
from collections.abc import Callable, Iterable
from typing import Protocol

import confluent_kafka

from .chaos_report import ChaosReport
from .chaos_run_config import (
    ASSIGNMENT,
    CONSUME_BATCH,
    CONSUME_POLL_S,
    CONSUME_TIMEOUT_S,
    CONSUMER_CONFIG,
    TOPIC,
    WATERMARK_TIMEOUT_S,
)

Records = dict[int, list[tuple[int, str]]]  # partition -> (offset, value) in the order read


class ReadBackReport(Protocol):
    """The part of a run's report the read-back fills in."""

    high_watermarks: dict[int, int]
    incomplete_reads: list[int]  # partitions not read up to their HW before the timeout
    read: int


def high_watermark(consumer: confluent_kafka.Consumer, topic: str, partition: int) -> int:
    """The partition's HW from its leader, asking again (bounded) while the client's metadata is stale."""
    deadline = time.monotonic() + WATERMARK_TIMEOUT_S
    tp = confluent_kafka.TopicPartition(topic, partition)
    while True:
        try:
            return consumer.get_watermark_offsets(tp, WATERMARK_TIMEOUT_S)[1]
        except confluent_kafka.KafkaException:  # NOT_LEADER_FOR_PARTITION and the like; the last one is raised
            if time.monotonic() > deadline:
                raise
            time.sleep(CONSUME_POLL_S)  # librdkafka refreshes its metadata meanwhile


def read_back(consumer_config: dict, topic: str, partitions: Iterable[int], report: ReadBackReport, *,
              decode: Callable[[bytes], str], timeout_s: float,
              on_corrupt: Callable[[str], None] | None = None) -> Records:
    """Every partition from offset 0 up to the high watermark it had when the read began. A batch librdkafka
    finds corrupt (with check.crcs) arrives as an error message: described to `on_corrupt` if given;
    other errors are transient (a connection, a leader moving), which librdkafka retries by itself."""
    consumer = confluent_kafka.Consumer({**consumer_config, "enable.partition.eof": True})
    try:
        partitions = list(partitions)
        for partition in partitions:
            report.high_watermarks[partition] = high_watermark(consumer, topic, partition)
        consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                         for p in partitions])
        read: Records = {p: [] for p in partitions}
        pending = {p for p, hw in report.high_watermarks.items() if hw > 0}
        deadline = time.monotonic() + timeout_s
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(CONSUME_BATCH, CONSUME_POLL_S):
                partition = msg.partition()
                error = msg.error()
                if error is None:
                    read[partition].append((msg.offset(), decode(msg.value())))
                    reached = msg.offset() + 1
                elif error.code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    reached = msg.offset()
                else:
                    if error.code() == confluent_kafka.KafkaError._BAD_MSG and on_corrupt is not None:
                        on_corrupt(f"partition {partition} offset {msg.offset()}: {error.str()}")
                    continue
                if reached >= report.high_watermarks[partition]:
                    pending.discard(partition)
        report.incomplete_reads = sorted(pending)
        report.read = sum(len(records) for records in read.values())
        return read
    finally:
        consumer.close()


def read_all(bootstrap: str, report: ChaosReport, security: dict[str, str] | None = None) -> Records:
    """The chaos run's topic, read back. security: librdkafka's security keys for a secured cluster."""
    config = {"bootstrap.servers": bootstrap, **CONSUMER_CONFIG, **(security or {}),
              "group.id": "replog-chaos-checker"}
    return read_back(config, TOPIC, ASSIGNMENT, report, decode=lambda value: value.decode(errors="replace"),
                     timeout_s=CONSUME_TIMEOUT_S)
