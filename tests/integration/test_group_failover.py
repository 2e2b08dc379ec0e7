"""Coordinator failover on a 3-broker cluster (issue 15, items 2 and 6): __consumer_offsets is created through
the controller with replication 3; the broker leading the group's offsets partition is killed while a
confluent-kafka member consumes; the new leader loads the partition, the member carries on, and the
group's committed offsets (those before the kill and those after) are what a new member resumes from."""

import asyncio
import time

import pytest

from replog.client.admin import NewTopic
from replog.client.sync import SyncAdmin
from replog.coordinator.partitioning import partition_for
from replog.harness.local_cluster import LocalCluster
from tests.interop.test_consumer_groups import produce

GROUP = "failover-group"
TOPIC = "stream"
PARTITIONS = 3
OFFSETS = "__consumer_offsets"


@pytest.fixture
async def cluster(tmp_path):
    cluster = LocalCluster(tmp_path, overrides={"group.initial.rebalance.delay.ms": "0"})
    await cluster.start()
    try:
        yield cluster
    finally:
        await cluster.stop()


def committed(bootstrap: str) -> dict[int, int]:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    try:
        tps = consumer.committed([confluent_kafka.TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in tps}


def read_and_commit(consumer, count: int) -> list[bytes]:
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(values) < count and time.monotonic() < deadline:
        for msg in consumer.consume(500, timeout=0.2):
            assert msg.error() is None, msg.error()
            values.append(msg.value())
    deadline = time.monotonic() + 30
    while True:  # a commit during the coordinator's move fails retriably; the member retries it
        try:
            consumer.commit(asynchronous=False)
            return values
        except Exception:  # confluent_kafka.KafkaException
            if time.monotonic() > deadline:
                raise
            consumer.poll(0.2)


async def test_killed_coordinator_group_resumes_from_committed_offsets(cluster):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    bootstrap = cluster.bootstrap
    admin = SyncAdmin(bootstrap)
    try:
        await asyncio.to_thread(admin.create_topics, [NewTopic(TOPIC, PARTITIONS, 3, {})])
    finally:
        admin.close()
    first_ends = await asyncio.to_thread(produce, bootstrap, TOPIC, 300)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    try:
        first = await asyncio.to_thread(read_and_commit, consumer, 300)
        assert sorted(first) == sorted(f"v-{i}".encode() for i in range(300))
        offsets_partition = partition_for(GROUP, 50)
        registration = cluster.controller.registration(OFFSETS, offsets_partition)
        assert len(registration.replicas) == 3  # offsets.topic.replication.factor, three live brokers
        coordinator = registration.leader

        await cluster.kill(coordinator)
        await cluster.wait_for(lambda: cluster.controller.registration(OFFSETS, offsets_partition).leader
                               not in (coordinator, -1), 30.0, "a new leader of the group's offsets partition")
        survivors = ",".join(b.bootstrap for n, b in cluster.brokers.items() if n != coordinator)
        assert await asyncio.to_thread(committed, survivors) == first_ends  # loaded by the new coordinator

        second_ends = await asyncio.to_thread(lambda: produce(survivors, TOPIC, 300, start=300))
        second = await asyncio.to_thread(read_and_commit, consumer, 300)
        assert sorted(second) == sorted(f"v-{i}".encode() for i in range(300, 600))
    finally:
        await asyncio.to_thread(consumer.close)
    ends = {p: max(first_ends.get(p, 0), second_ends.get(p, 0)) for p in range(PARTITIONS)}
    assert await asyncio.to_thread(committed, survivors) == ends
