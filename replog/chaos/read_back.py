"""Reading a chaos run's topic back: every partition from offset 0 up to its high watermark."""

import time

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


def high_watermark(consumer: confluent_kafka.Consumer, partition: int) -> int:
    """The partition's HW from its leader, asking again (bounded) while the client's metadata is stale."""
    deadline = time.monotonic() + WATERMARK_TIMEOUT_S
    tp = confluent_kafka.TopicPartition(TOPIC, partition)
    while True:
        try:
            return consumer.get_watermark_offsets(tp, WATERMARK_TIMEOUT_S)[1]
        except confluent_kafka.KafkaException:  # NOT_LEADER_FOR_PARTITION and the like; the last one is raised
            if time.monotonic() > deadline:
                raise
            time.sleep(CONSUME_POLL_S)  # librdkafka refreshes its metadata meanwhile


def read_all(bootstrap: str, report: ChaosReport,
             security: dict[str, str] | None = None) -> dict[int, list[tuple[int, str]]]:
    """Every partition from offset 0 up to its high watermark: (offset, value) in the order read. security:
    librdkafka's security keys for a secured cluster."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, **CONSUMER_CONFIG, **(security or {}),
                                         "group.id": "replog-chaos-checker", "enable.partition.eof": True})
    try:
        for partition in ASSIGNMENT:
            report.high_watermarks[partition] = high_watermark(consumer, partition)
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, p, confluent_kafka.OFFSET_BEGINNING)
                         for p in ASSIGNMENT])
        read: dict[int, list[tuple[int, str]]] = {p: [] for p in ASSIGNMENT}
        pending = {p for p, hw in report.high_watermarks.items() if hw > 0}
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(CONSUME_BATCH, CONSUME_POLL_S):
                partition = msg.partition()
                if msg.error() is None:
                    read[partition].append((msg.offset(), msg.value().decode(errors="replace")))
                    reached = msg.offset() + 1
                elif msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    reached = msg.offset()
                else:
                    continue  # transient (a connection, a leader moving): librdkafka retries by itself
                if reached >= report.high_watermarks[partition]:
                    pending.discard(partition)
        report.incomplete_reads = sorted(pending)
        report.read = sum(len(records) for records in read.values())
        return read
    finally:
        consumer.close()
