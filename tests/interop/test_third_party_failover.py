"""Independent witnesses through a failover: kafka-python and aiokafka, idempotent with acks=all, produce to a
3-broker cluster (RF=3, min.insync.replicas=2) while their partitions' leader is SIGKILLed; then every
acknowledged record must read back at its acknowledged offset, once, with dense offsets, and the replicas must
hold identical batches once the killed broker is back.

The chaos run's writers are librdkafka's alone (replog/chaos/load.py), and test_third_party_clients.py runs
these two clients against a single broker with no fault: here their own retry, metadata refresh and
idempotence code meets a leader change, with Produce versions librdkafka does not send (kafka-python's and
aiokafka's) decoded by the hand-written Produce decoder, and acks=all answered through the new leader's HW."""

import asyncio
import functools
import os
import signal
import threading

import pytest

from replog.harness.local_cluster import LocalCluster
from tests.integration.test_replication import MIN_ISR_2, cluster, wait_identical_replicas  # noqa: F401

kafka = pytest.importorskip("kafka")
aiokafka = pytest.importorskip("aiokafka")

MAX_RECORDS = 200_000  # per client; each stops once the new leaders have acknowledged AFTER_FAILOVER more
AFTER_FAILOVER = 2_000
PARTITIONS = {0: [1, 2, 3], 1: [1, 3, 2]}  # broker 1 leads both, the killed one
DELIVERY_TIMEOUT_MS = 120_000  # past any failover here (the broker session timeout is a few seconds)


class Writer:
    """One client's writes: values sent round-robin over PARTITIONS until `enough` is set, and their outcomes
    ((partition, offset, value) acknowledged, values failed), recorded from the client's callbacks."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.enough = threading.Event()
        self.sent = 0
        self.acked: list[tuple[int, int, bytes]] = []
        self.failed: list[bytes] = []

    def next_value(self) -> tuple[int, bytes] | None:
        if self.enough.is_set() or self.sent == MAX_RECORDS:
            return None
        self.sent += 1
        return self.sent % len(PARTITIONS), f"{self.prefix}-{self.sent:06d}".encode()


def produce_with_kafka_python(bootstrap: str, topic: str, writer: Writer) -> None:
    """kafka-python's defaults (idempotent) and acks=all."""
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=2,
                                   delivery_timeout_ms=DELIVERY_TIMEOUT_MS, metadata_max_age_ms=1_000)
    while (sending := writer.next_value()) is not None:
        partition, value = sending
        try:
            future = producer.send(topic, value, partition=partition)
        except kafka.errors.KafkaError:
            writer.failed.append(value)  # the producer failed for good (a fatal sequence error)
            break
        future.add_callback(lambda metadata, v=value: writer.acked.append((metadata.partition, metadata.offset, v)))
        future.add_errback(lambda _, v=value: writer.failed.append(v))
    producer.flush(DELIVERY_TIMEOUT_MS / 1000)
    producer.close()


async def produce_with_aiokafka(bootstrap: str, topic: str, writer: Writer) -> None:
    producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True,
                                         linger_ms=2, request_timeout_ms=30_000, metadata_max_age_ms=1_000)
    await producer.start()

    def on_done(value: bytes, future: asyncio.Future) -> None:
        if future.exception() is None:
            writer.acked.append((future.result().partition, future.result().offset, value))
        else:
            writer.failed.append(value)

    try:
        while (sending := writer.next_value()) is not None:
            partition, value = sending
            try:
                future = await producer.send(topic, value, partition=partition)
            except aiokafka.errors.KafkaError:
                writer.failed.append(value)  # the producer failed for good (a fatal sequence error)
                break
            future.add_done_callback(functools.partial(on_done, value))
        await producer.flush()
    finally:
        await producer.stop()


def read_with_kafka_python(bootstrap: str, topic: str, expected: int) -> list[tuple[int, int, bytes]]:
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                   auto_offset_reset="earliest")
    consumer.assign([kafka.TopicPartition(topic, p) for p in PARTITIONS])
    read, idle_polls = [], 0
    while (len(read) < expected or idle_polls < 5) and idle_polls < 300:
        batches = consumer.poll(timeout_ms=200)
        idle_polls = 0 if batches else idle_polls + 1
        for records in batches.values():
            read += [(r.partition, r.offset, r.value) for r in records]
    consumer.close()
    return read


async def read_with_aiokafka(bootstrap: str, topic: str, expected: int) -> list[tuple[int, int, bytes]]:
    consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                         auto_offset_reset="earliest")
    await consumer.start()
    read, idle_polls = [], 0
    try:
        consumer.assign([aiokafka.TopicPartition(topic, p) for p in PARTITIONS])
        await consumer.seek_to_beginning()
        while (len(read) < expected or idle_polls < 5) and idle_polls < 300:
            batches = await consumer.getmany(timeout_ms=200)
            idle_polls = 0 if batches else idle_polls + 1
            for records in batches.values():
                read += [(r.partition, r.offset, r.value) for r in records]
    finally:
        await consumer.stop()
    return read


def assert_every_acknowledged_record_read_once(acked: list, failed: list, read: list) -> None:
    at = {(partition, offset): value for partition, offset, value in read}
    lost = [record for record in acked if at.get(record[:2]) != record[2]]
    assert not lost, f"{len(lost)} acknowledged records lost or moved, first {lost[:3]}"
    read_values = [value for _, _, value in read]
    assert len(set(read_values)) == len(read_values), "an idempotent producer's record was written twice"
    assert set(read_values) <= {value for _, _, value in acked} | set(failed), "read a record that was never sent"
    for partition in PARTITIONS:
        offsets = sorted(offset for p, offset, _ in read if p == partition)
        assert offsets == list(range(len(offsets))), f"partition {partition}'s offsets are not dense"


async def test_kafka_python_and_aiokafka_lose_no_acknowledged_record_when_the_leader_is_killed(cluster: LocalCluster):
    writers = {"witness-kafka-python": Writer("kp"), "witness-aiokafka": Writer("ak")}
    for topic in writers:
        await cluster.controller.create_topic(topic, PARTITIONS, MIN_ISR_2)
    before = {topic: cluster.controller.registration(topic, 0).leader_epoch for topic in writers}
    producing = [
        asyncio.create_task(asyncio.to_thread(produce_with_kafka_python, cluster.bootstrap, "witness-kafka-python",
                                              writers["witness-kafka-python"])),
        asyncio.create_task(asyncio.to_thread(asyncio.run, produce_with_aiokafka(
            cluster.bootstrap, "witness-aiokafka", writers["witness-aiokafka"]))),
    ]  # fmt: skip

    def leader_log_bytes() -> list[int]:
        return [os.path.getsize(cluster.log_dir(1, topic, p) / "00000000000000000000.log")
                for topic in writers for p in PARTITIONS]

    await cluster.wait_for(lambda: min(leader_log_bytes()) > 20_000, 60.0, "the leader to take both clients' load")
    # The followers stop for a moment before the kill: whatever the leader appends meanwhile is on it alone, so
    # an acks=all answer given before the HW covered it would be a loss this test sees, not a lucky race.
    followers = [cluster.brokers[b].proc.pid for b in (2, 3)]
    appended_before = sum(leader_log_bytes())
    for pid in followers:
        os.kill(pid, signal.SIGSTOP)
    try:
        await cluster.wait_for(lambda: sum(leader_log_bytes()) > appended_before + 4_000, 30.0,
                               "the leader to append while its followers are stopped")
        await cluster.kill(1)
    finally:
        for pid in followers:
            os.kill(pid, signal.SIGCONT)
    acked_at_kill = {topic: len(writer.acked) for topic, writer in writers.items()}
    for topic in writers:
        for p in PARTITIONS:
            await cluster.wait_for(lambda t=topic, p=p: cluster.controller.registration(t, p).leader in (2, 3),
                                   30.0, f"a new leader of {topic}-{p}")
    for topic, writer in writers.items():
        # Or a failed send: a client whose acknowledged records the new leader lacks stops on a sequence error.
        await cluster.wait_for(lambda w=writer, t=topic: len(w.acked) > acked_at_kill[t] + AFTER_FAILOVER or w.failed,
                               60.0, f"the new leaders to acknowledge {AFTER_FAILOVER} more of {topic}")
        writer.enough.set()
    await asyncio.gather(*producing)
    for topic, writer in writers.items():
        assert cluster.controller.registration(topic, 0).leader_epoch > before[topic]
        assert writer.failed == [], f"{topic}: {len(writer.failed)} sends failed though two replicas stayed in sync"
        assert len(writer.acked) == writer.sent

    await cluster.restart(1)
    read = {
        "witness-kafka-python": await asyncio.to_thread(read_with_kafka_python, cluster.bootstrap,
                                                        "witness-kafka-python", writers["witness-kafka-python"].sent),
        "witness-aiokafka": await asyncio.to_thread(asyncio.run, read_with_aiokafka(
            cluster.bootstrap, "witness-aiokafka", writers["witness-aiokafka"].sent)),
    }  # fmt: skip
    for topic, writer in writers.items():
        assert_every_acknowledged_record_read_once(writer.acked, writer.failed, read[topic])
        for p in PARTITIONS:
            await cluster.wait_for_isr(topic, p, {1, 2, 3}, timeout=60.0)
            end = max(offset for partition, offset, _ in read[topic] if partition == p) + 1
            await wait_identical_replicas(cluster, topic, p, [1, 2, 3], end)
