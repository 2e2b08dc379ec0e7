"""Independent witnesses: real Kafka clients produce 10,000 records with acks=all and read back exactly
what was acknowledged, in order per partition. Each client uses its default settings apart from acks (so
kafka-python and confluent-kafka are idempotent); one topic per client, some compressed."""

import asyncio
import shutil
import subprocess

import pytest

RECORDS = 10_000


def values(prefix: str) -> list[bytes]:
    return [f"{prefix}-{i:05d}".encode() for i in range(RECORDS)]


def assert_read_back_exactly(acked: list[tuple[int, int, bytes]], read: list[tuple[int, int, bytes]]) -> None:
    """acked/read: (partition, offset, value). Same records, same offsets, offsets dense per partition."""
    assert len(acked) == RECORDS
    assert sorted(read) == sorted(acked)
    by_partition: dict[int, list[int]] = {}
    for partition, offset, _ in sorted(read):
        by_partition.setdefault(partition, []).append(offset)
    for offsets in by_partition.values():
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))


def create_topic(broker, name: str, partitions: int) -> None:
    from replog.client.admin import NewTopic
    from replog.client.sync import SyncAdmin

    admin = SyncAdmin(broker.bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1, {})])
    finally:
        admin.close()


def test_confluent_kafka_idempotent_lz4(broker):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = "confluent-lz4"
    create_topic(broker, topic, 3)
    acked: list[tuple[int, int, bytes]] = []
    errors: list[object] = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
        else:
            acked.append((msg.partition(), msg.offset(), msg.value()))

    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                                         "enable.idempotence": True, "compression.type": "lz4"})
    for i, value in enumerate(values("ck")):
        producer.produce(topic, value, key=str(i % 17).encode(), on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert errors == []
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "interop",
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(3)])
    read = []
    deadline_polls = 600
    while len(read) < RECORDS and deadline_polls:
        deadline_polls -= 1
        for msg in consumer.consume(1000, timeout=0.1):
            assert msg.error() is None, msg.error()
            read.append((msg.partition(), msg.offset(), msg.value()))
    consumer.close()
    assert_read_back_exactly(acked, read)


def test_kafka_python_defaults_gzip(broker):
    kafka = pytest.importorskip("kafka")
    topic = "kafka-python-gzip"
    create_topic(broker, topic, 2)
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", compression_type="gzip")
    futures = [(producer.send(topic, value), value) for value in values("kp")]
    producer.flush(60)
    acked = []
    for future, value in futures:
        metadata = future.get(timeout=60)
        acked.append((metadata.partition, metadata.offset, value))
    producer.close()
    consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                                   auto_offset_reset="earliest")
    consumer.assign([kafka.TopicPartition(topic, p) for p in range(2)])
    read = []
    polls = 600
    while len(read) < RECORDS and polls:
        polls -= 1
        for records in consumer.poll(timeout_ms=100).values():
            read += [(r.partition, r.offset, r.value) for r in records]
    consumer.close()
    assert_read_back_exactly(acked, read)


def test_aiokafka_acks_all(broker):
    aiokafka = pytest.importorskip("aiokafka")
    topic = "aiokafka-plain"
    create_topic(broker, topic, 2)

    async def run() -> tuple[list, list]:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
        await producer.start()
        try:
            futures = [(await producer.send(topic, value), value) for value in values("ak")]
            acked = []
            for future, value in futures:
                metadata = await future
                acked.append((metadata.partition, metadata.offset, value))
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                                             enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        read = []
        try:
            consumer.assign([aiokafka.TopicPartition(topic, p) for p in range(2)])
            await consumer.seek_to_beginning()
            for _ in range(600):
                if len(read) >= RECORDS:
                    break
                batches = await consumer.getmany(timeout_ms=100)
                for records in batches.values():
                    read += [(r.partition, r.offset, r.value) for r in records]
        finally:
            await consumer.stop()
        return acked, read

    acked, read = asyncio.run(run())
    assert_read_back_exactly(acked, read)


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is installed by .ci/run (apt-get install kcat)")
def test_kcat_snappy(broker):
    topic = "kcat-snappy"
    create_topic(broker, topic, 1)
    lines = values("kc")
    produced = subprocess.run(
        ["kcat", "-P", "-b", broker.bootstrap, "-t", topic, "-p", "0", "-X", "acks=all", "-z", "snappy"],
        input=b"\n".join(lines) + b"\n", capture_output=True, timeout=120)
    # kcat exits non-zero and reports "Delivery failed" for any record that was not acknowledged.
    assert produced.returncode == 0, produced.stderr
    assert b"failed" not in produced.stderr.lower()
    consumed = subprocess.run(
        ["kcat", "-C", "-b", broker.bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-e",
         "-f", "%p %o %s\n"], capture_output=True, timeout=120)
    assert consumed.returncode == 0, consumed.stderr
    read = []
    for line in consumed.stdout.splitlines():
        partition, offset, value = line.split(b" ", 2)
        read.append((int(partition), int(offset), value))
    acked = [(0, i, value) for i, value in enumerate(lines)]
    assert_read_back_exactly(acked, read)


def test_confluent_kafka_lists_every_topic(broker):
    """librdkafka 2.15/2.16 send 3 bytes after a Metadata v12 body when asking for all topics; Kafka ignores
    them, and so must replog, or list_topics() fails with a transport error."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient

    create_topic(broker, "listed-a", 2)
    create_topic(broker, "listed-b", 1)
    metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert {"listed-a", "listed-b"} <= set(metadata.topics)
    assert len(metadata.topics["listed-a"].partitions) == 2
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lister"})
    try:
        assert "listed-b" in consumer.list_topics(timeout=10).topics
    finally:
        consumer.close()
