"""Incremental fetch sessions (KIP-227) with third-party consumers on a 3-broker cluster: kafka-python, which
opens sessions, reads every acknowledged record exactly once across the deletion of another topic it fetches
and a leader change; confluent-kafka (librdkafka sends sessionless full fetches) reads as before."""

import asyncio
import time

import pytest

from replog.harness.local_cluster import LocalCluster

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")

READ_TIMEOUT_S = 60.0


@pytest.fixture
async def cluster(tmp_path):
    cluster = LocalCluster(tmp_path, brokers=3)
    try:
        await cluster.start()
        yield cluster
    finally:
        await cluster.stop()


def produce(bootstrap: str, topic: str, partition: int, values: list[bytes]) -> list[tuple[str, int, int, bytes]]:
    """acks=all with librdkafka, retrying through a leader change; the acknowledged (topic, partition, offset, value)."""
    acked, errors = [], []

    def on_delivery(err, msg):
        (errors if err is not None else acked).append(
            err or (msg.topic(), msg.partition(), msg.offset(), msg.value()))

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                                         "topic.metadata.refresh.interval.ms": 1000})
    for value in values:
        producer.produce(topic, value, partition=partition, on_delivery=on_delivery)
    assert producer.flush(60) == 0 and not errors, errors
    return acked


def read_until(consumer, wanted: set, read: list) -> None:
    """Poll kafka-python until every wanted record is in `read` (which keeps duplicates, to be caught)."""
    deadline = time.monotonic() + READ_TIMEOUT_S
    while not wanted <= set(read):
        assert time.monotonic() < deadline, f"missing {sorted(wanted - set(read))[:5]}"
        for records in consumer.poll(timeout_ms=100).values():
            read += [(r.topic, r.partition, r.offset, r.value) for r in records]


def session_ids(consumer) -> set[int]:
    # kafka-python's own record of the sessions replog granted it (FetchSessionHandler per broker).
    return {handler.next_metadata.session_id for handler in consumer._fetcher._session_handlers.values()}


async def test_kafka_python_reads_through_fetch_sessions_across_topic_deletion_and_leader_change(cluster):
    await cluster.controller.create_topic("kept", {0: [1, 2, 3], 1: [2, 3, 1]})
    await cluster.controller.create_topic("doomed", {0: [1, 2, 3]})
    bootstrap = cluster.bootstrap
    acked = []
    for topic, partition in (("kept", 0), ("kept", 1), ("doomed", 0)):
        acked += await asyncio.to_thread(produce, bootstrap, topic, partition,
                                         [f"{topic}-{partition}-{i}".encode() for i in range(50)])
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                   auto_offset_reset="earliest", fetch_max_wait_ms=100, metadata_max_age_ms=1000)
    read: list = []
    try:
        consumer.assign([kafka.TopicPartition("kept", 0), kafka.TopicPartition("kept", 1),
                         kafka.TopicPartition("doomed", 0)])
        await asyncio.to_thread(read_until, consumer, set(acked), read)
        assert session_ids(consumer) - {0}, "kafka-python was granted no fetch session"

        # Deleting a topic in the session: its partition answers an error, the others keep flowing.
        await cluster.controller.delete_topic("doomed")
        more = await asyncio.to_thread(produce, bootstrap, "kept", 1, [b"after-delete-%d" % i for i in range(20)])
        await asyncio.to_thread(read_until, consumer, set(more), read)
        consumer.assign([kafka.TopicPartition("kept", 0), kafka.TopicPartition("kept", 1)])

        # A leader change: the old leader's session is gone with it; the new leader opens another.
        assert cluster.registration("kept", 0).leader == 1
        await cluster.kill(1)
        await cluster.wait_for(lambda: cluster.registration("kept", 0).leader in (2, 3), 30.0,
                               "a new leader of kept-0")
        after = await asyncio.to_thread(produce, bootstrap, "kept", 0, [b"after-kill-%d" % i for i in range(20)])
        await asyncio.to_thread(read_until, consumer, set(after), read)
        assert session_ids(consumer) - {0}
    finally:
        consumer.close()
    # Exactly once, in offset order per partition: an incremental answer never repeats or skips records.
    assert len(read) == len(set(read)) == len(acked) + len(more) + len(after)
    for topic, partition in (("kept", 0), ("kept", 1)):
        offsets = [offset for t, p, offset, _ in read if (t, p) == (topic, partition)]
        assert offsets == list(range(len(offsets)))

    # librdkafka sends sessionless full fetches (epoch -1) to the same brokers, and reads everything.
    kept = {r for r in read if r[0] == "kept"}
    assert await asyncio.to_thread(confluent_read, bootstrap, len(kept)) == kept


def confluent_read(bootstrap: str, count: int) -> set:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "full-fetches",
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition("kept", p, confluent_kafka.OFFSET_BEGINNING) for p in (0, 1)])
    read = set()
    deadline = time.monotonic() + READ_TIMEOUT_S
    try:
        while len(read) < count and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.1):
                assert msg.error() is None, msg.error()
                read.add((msg.topic(), msg.partition(), msg.offset(), msg.value()))
    finally:
        consumer.close()
    return read
