"""A real full disk: broker 1 of a three-broker cluster has a second log dir on a 2 MB tmpfs; produce traffic
fills it until ENOSPC. The dir goes offline (KIP-112), the partition in it answers KAFKA_STORAGE_ERROR, the
controller moves its leadership and drops broker 1 from its ISR, and no acknowledged record is lost; broker 1
stays up and keeps leading the partition in its healthy dir. Once the disk has room and broker 1 restarts,
the dir is back and its replica catches up into the ISR. Needs root (mount); skipped with the reason
otherwise. librdkafka (confluent-kafka) produces and consumes."""

import asyncio
import subprocess

import pytest
from kio.schema.errors import ErrorCode

from replog.harness.broker_process import BrokerProcess
from replog.harness.local_cluster import LocalCluster
from replog.protocol.apis import ApiKey
from replog.protocol.produce import (
    ProducePartitionData,
    ProduceRequestData,
    ProduceTopicData,
    encode_produce_request,
)
from replog.protocol.records import build_batch
from tests.raw_wire import RawConnection

confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC = "disk"
SMALL_DISK = "2m"
ROOMY_DISK = "16m"
VALUE_BYTES = 4096
RECORDS = 1000  # 4 MB of values: twice what the small disk holds
# Broker 1 puts each new log in its emptier dir, the first on a tie: partitions 0 and 2 in its healthy dir,
# 1 and 3 on the small disk. It leads 0 and 1 and follows 2 and 3.
HEALTHY, ON_SMALL_DISK, FOLLOWED_ON_SMALL_DISK = 0, 1, 3
ASSIGNMENT = {0: [1, 2, 3], 1: [1, 2, 3], 2: [2, 1, 3], 3: [2, 1, 3]}
FAILOVER_TIMEOUT_S = 15.0
FILL_ATTEMPTS = 64  # 64 KB records: 4 MB, twice the small disk
STOP_TIMEOUT_S = 30.0  # detection is a heartbeat (300 ms here) plus one LeaderAndIsr round trip


def mount_tmpfs(path, size: str) -> str | None:
    """Mount a tmpfs of `size` at path; returns why not, or None."""
    path.mkdir(parents=True)
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                            capture_output=True, text=True)
    return None if result.returncode == 0 else f"cannot mount a tmpfs: {result.stderr.strip() or result.returncode}"


@pytest.fixture
def small_disk(tmp_path):
    path = tmp_path / "small-disk"
    reason = mount_tmpfs(path, SMALL_DISK)
    if reason is not None:
        pytest.skip(reason)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


@pytest.fixture
async def cluster(tmp_path, small_disk):
    cluster = LocalCluster(tmp_path)
    try:
        await cluster.start()
        # Broker 1 again, now with a second log dir on the small disk.
        broker = cluster.brokers[1]
        await asyncio.to_thread(broker.stop)
        broker.overrides["log.dirs"] = f"{broker.log_dir},{small_disk}"
        await cluster.restart(1)
        yield cluster
    finally:
        await cluster.stop()


def raw_produce(port: int, partition: int, *, value_bytes: int = 5) -> ErrorCode:
    """One acks=1 produce of one record straight to a broker; the partition's error code."""
    records = memoryview(bytearray(build_batch([(None, bytes(value_bytes), [], 1000)])))
    request = ProduceRequestData(None, 1, 5000, [ProduceTopicData(TOPIC, [ProducePartitionData(partition, records)])])
    conn = RawConnection(port)
    try:
        body = b"".join(bytes(p) for p in encode_produce_request(9, request))
        response = conn.call(ApiKey.PRODUCE, 9, body)
    finally:
        conn.close()
    return ErrorCode(response.responses[0].partition_responses[0].error_code)


def offline_replicas(port: int, partition: int) -> list[int]:
    conn = RawConnection(port)
    try:
        response = conn.call(ApiKey.METADATA, 12, {"topics": [{"name": TOPIC, "topic_id": None}],
                                                   "allow_auto_topic_creation": False,
                                                   "include_topic_authorized_operations": False})
    finally:
        conn.close()
    (topic,) = response.topics
    (wanted,) = (p for p in topic.partitions if p.partition_index == partition)
    return sorted(wanted.offline_replicas)


def produce(bootstrap: str, values: list[bytes]) -> list[tuple[int, bytes]]:
    """acks=all with retries (librdkafka's defaults); returns the acknowledged (offset, value)."""
    acked, errors = [], []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
        else:
            acked.append((msg.offset(), msg.value()))

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                                         "topic.metadata.refresh.interval.ms": 1000})
    for value in values:
        producer.produce(TOPIC, value, partition=ON_SMALL_DISK, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert errors == [], errors[:3]
    return acked


def consume(bootstrap: str, wanted: set[bytes]) -> set[bytes]:
    """Read the partition from the start until every wanted value has come, or nothing more comes."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "disk-faults",
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(TOPIC, ON_SMALL_DISK, confluent_kafka.OFFSET_BEGINNING)])
    read, idle_polls = set(), 0
    try:
        while not wanted <= read and idle_polls < 50:  # 50 empty polls of 0.2 s: nothing more will come
            batch = consumer.consume(1000, timeout=0.2)
            idle_polls = idle_polls + 1 if not batch else 0
            for msg in batch:
                assert msg.error() is None, msg.error()
                read.add(msg.value())
    finally:
        consumer.close()
    return read


async def test_a_full_log_dir_goes_offline_and_leadership_moves(cluster, small_disk):
    controller = cluster.controller
    await controller.create_topic(TOPIC, ASSIGNMENT, configs={"min.insync.replicas": "2"})
    await cluster.wait_for(lambda: all((small_disk / f"{TOPIC}-{p}").is_dir() for p in (1, 3))
                           and all(cluster.log_dir(1, TOPIC, p).is_dir() for p in (0, 2)), 10.0, "broker 1's logs")
    await cluster.wait_for_isr(TOPIC, ON_SMALL_DISK, {1, 2, 3})
    broker = cluster.brokers[1]

    values = [b"%06d" % i + bytes(VALUE_BYTES - 6) for i in range(RECORDS)]
    acked = await asyncio.to_thread(produce, cluster.bootstrap, values)

    # The disk filled: broker 1 lost the partition on it and the controller moved it away.
    await cluster.wait_for(lambda: controller.registration(TOPIC, ON_SMALL_DISK).leader in (2, 3),
                           FAILOVER_TIMEOUT_S, "the leadership to move off the full disk")
    moved = controller.registration(TOPIC, ON_SMALL_DISK)
    assert 1 not in moved.isr
    assert controller.metadata.offline_replicas_of(moved) == {1}
    # The replica it followed on that disk is offline too, and out of the ISR; the leader is unchanged.
    followed = controller.registration(TOPIC, FOLLOWED_ON_SMALL_DISK)
    assert (followed.leader, followed.isr) == (2, (2, 3))
    assert controller.metadata.offline_replicas_of(followed) == {1}
    assert broker.proc.poll() is None, "broker 1 died"
    assert raw_produce(broker.port, ON_SMALL_DISK) == ErrorCode.kafka_storage_error
    await cluster.wait_for(lambda: offline_replicas(broker.port, ON_SMALL_DISK) == [1], 10.0,
                           "broker 1's metadata to list its replica offline")
    # Its healthy dir serves on.
    assert controller.registration(TOPIC, HEALTHY).leader == 1
    assert raw_produce(broker.port, HEALTHY) == ErrorCode.none

    # No acknowledged record was lost (retries may have written some twice).
    assert len(acked) == RECORDS
    wanted = {value for _, value in acked}
    assert wanted <= await asyncio.to_thread(consume, cluster.bootstrap, wanted)

    # The disk gets room; after a restart the dir is online again and its replica catches up.
    await asyncio.to_thread(broker.stop)
    subprocess.run(["mount", "-o", f"remount,size={ROOMY_DISK}", str(small_disk)], check=True)
    await cluster.restart(1)
    await cluster.wait_for_isr(TOPIC, ON_SMALL_DISK, {1, 2, 3}, timeout=20.0)
    assert controller.metadata.offline_replicas_of(controller.registration(TOPIC, ON_SMALL_DISK)) == set()


def test_a_broker_whose_only_log_dir_fails_shuts_down_cleanly(small_disk, tmp_path):
    """Kafka's ReplicaManager.handleLogDirFailure: with no log dir left the broker stops (here cleanly)."""
    broker = BrokerProcess(tmp_path / "unused", output=tmp_path / "single.out",
                           overrides={"log.dirs": str(small_disk)})
    broker.start()
    try:
        conn = RawConnection(broker.port)
        try:
            response = conn.call(ApiKey.CREATE_TOPICS, 7, {
                "topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                            "configs": []}], "timeout": 5000, "validate_only": False})
        finally:
            conn.close()
        assert response.topics[0].error_code == ErrorCode.none
        for _ in range(FILL_ATTEMPTS):
            error = raw_produce(broker.port, 0, value_bytes=64 * 1024)
            if error != ErrorCode.none:
                break
        assert error == ErrorCode.kafka_storage_error
        assert broker.proc.wait(STOP_TIMEOUT_S) == 0
        assert "every log dir has failed" in broker.output_tail()
    finally:
        broker.stop()
