"""Partition reassignment (KIP-455) on a 4-broker cluster, with kafka-python's KafkaAdminClient as the witness
(alter_partition_reassignments / list_partition_reassignments) and confluent-kafka producing and consuming:
a move under acks=all load loses no acknowledged record, moves the leader off the broker it leaves and deletes
that broker's log; a reassignment waiting for a down broker survives a controller restart (and an
active-controller failover), can be cancelled, and completes once the broker returns; a broker that was down
when its replica was removed deletes the stray log when it returns; bad targets get Kafka's error codes with
a message."""

import asyncio
import threading
import time

import pytest

from replog.client import cluster_admin
from replog.client.admin import Admin, NewTopic
from replog.harness.local_cluster import LocalCluster

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka_admin = pytest.importorskip("kafka.admin")
import kafka  # noqa: E402
import kafka.errors  # noqa: E402

TIMEOUT = 30


@pytest.fixture
async def cluster(tmp_path):
    cluster = LocalCluster(tmp_path, brokers=4)
    try:
        await cluster.start()
        yield cluster
    finally:
        await cluster.stop()


def create(bootstrap: str, topic: str, replicas: list[int], configs: dict[str, str] | None = None) -> None:
    client = kafka_python_admin(bootstrap)
    try:
        client.create_topics([kafka_admin.NewTopic(topic, -1, -1, replica_assignments={0: replicas},
                                                   topic_configs=configs or {})])
    finally:
        client.close()


def kafka_python_admin(bootstrap: str):
    return kafka_admin.KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT * 1000)


# What a client meets while the cluster changes under it, and retries as Kafka's Java AdminClient does:
# kafka-python tries a broker that the metadata it has still lists after it died, and raises on the
# NOT_CONTROLLER or REQUEST_TIMED_OUT a broker relays while it has not yet found the new active controller.
TRANSIENT = (kafka.errors.KafkaConnectionError, kafka.errors.NodeNotReadyError, kafka.errors.RequestTimedOutError,
             RuntimeError)
RETRY_FOR_S = 20.0


async def _admin_call(bootstrap: str, call):
    deadline = time.monotonic() + RETRY_FOR_S
    while True:
        client = kafka_python_admin(bootstrap)
        try:
            return await asyncio.to_thread(call, client)
        except TRANSIENT:
            if time.monotonic() > deadline:
                raise
        finally:
            client.close()
        await asyncio.sleep(0.2)  # back-off between attempts, as the client's retry.backoff.ms


async def reassign(bootstrap: str, targets: dict) -> dict:
    return await _admin_call(bootstrap, lambda client: client.alter_partition_reassignments(
        {kafka.TopicPartition(t, p): r for (t, p), r in targets.items()}))


async def ongoing(bootstrap: str) -> dict:
    listed = await _admin_call(bootstrap, lambda client: client.list_partition_reassignments())
    return {(tp.topic, tp.partition): (v["replicas"], v["adding_replicas"], v["removing_replicas"])
            for tp, v in listed.items()}


class AcksAllLoad:
    """A producer thread sending numbered records with acks=all until stopped; remembers the acked ones."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.acked: set[bytes] = set()
        self.failed = 0
        self._stop = threading.Event()
        self._producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2,
                                                   "enable.idempotence": True})
        self._thread = threading.Thread(target=self._run, args=(topic,), daemon=True)

    def _delivered(self, error, message) -> None:
        if error is None:
            self.acked.add(message.value())
        else:
            self.failed += 1

    def _run(self, topic: str) -> None:
        n = 0
        while not self._stop.is_set():
            try:
                self._producer.produce(topic, b"r%d" % n, partition=0, on_delivery=self._delivered)
                n += 1
            except BufferError:
                pass
            self._producer.poll(0.001)
        self._producer.flush(TIMEOUT)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(TIMEOUT + 5)


def read_all(bootstrap: str, topic: str, expected: int) -> set[bytes]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "reassignment-check",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    seen: set[bytes] = set()
    try:
        for _ in range(600):
            for message in consumer.consume(1000, 0.1):
                if message.error() is None:
                    seen.add(message.value())
            if len(seen) >= expected:
                break
    finally:
        consumer.close()
    return seen


async def test_move_under_acks_all_load_keeps_every_acked_record_and_deletes_the_removed_log(cluster):
    await asyncio.to_thread(create, cluster.bootstrap, "moving", [1, 2, 3], {"min.insync.replicas": "2"})
    load = AcksAllLoad(cluster.bootstrap, "moving")
    load.start()
    try:
        await cluster.wait_for(lambda: len(load.acked) >= 2_000, 30.0, "records acked before the move")
        # Off broker 1, which leads: the new replica catches up under load, then leadership moves to 4.
        answer = await reassign(cluster.bootstrap, {("moving", 0): [4, 2, 3]})
        assert answer == {kafka.TopicPartition("moving", 0): None}

        def moved() -> bool:
            p = cluster.controller.registration("moving", 0)
            return p.replicas == (4, 2, 3) and not p.is_reassigning

        await cluster.wait_for(moved, 60.0, "the reassignment to complete")
        acked_at_completion = len(load.acked)
        await cluster.wait_for(lambda: len(load.acked) > acked_at_completion + 500, 30.0, "produce after the move")
    finally:
        await asyncio.to_thread(load.stop)
    done = cluster.controller.registration("moving", 0)
    assert done.leader == 4 and set(done.isr) <= {2, 3, 4}  # the preferred target took over
    await cluster.wait_for(lambda: not cluster.log_dir(1, "moving", 0).exists(), 20.0, "broker 1's log deleted")
    assert cluster.log_dir(4, "moving", 0).exists()
    assert await ongoing(cluster.bootstrap) == {}
    seen = await asyncio.to_thread(read_all, cluster.bootstrap, "moving", len(load.acked))
    assert load.acked - seen == set(), f"{len(load.acked - seen)} acknowledged records lost"


async def test_reassignment_to_a_down_broker_survives_a_controller_restart_cancels_and_completes(cluster):
    await asyncio.to_thread(create, cluster.bootstrap, "parked", [1, 2, 3])
    live = cluster.brokers[2].bootstrap  # kafka-python may give up on a bootstrap list naming a down broker
    await cluster.kill(4)
    await cluster.wait_for(lambda: 4 not in cluster.active_brokers(), 20.0, "broker 4 to be fenced")
    assert await reassign(live, {("parked", 0): [1, 2, 4]}) == {
        kafka.TopicPartition("parked", 0): None}
    assert await ongoing(live) == {("parked", 0): ([1, 2, 4, 3], [4], [3])}

    await cluster.restart_controller()  # the reassignment is in the metadata log
    await cluster.wait_for(lambda: {1, 2, 3} <= cluster.active_brokers(), 20.0, "brokers back with the controller")
    assert await ongoing(live) == {("parked", 0): ([1, 2, 4, 3], [4], [3])}

    cancel = {("parked", 0): None}
    assert await reassign(live, cancel) == {kafka.TopicPartition("parked", 0): None}
    assert cluster.controller.registration("parked", 0).replicas == (1, 2, 3)
    assert await ongoing(live) == {}
    assert await reassign(live, cancel) == {
        kafka.TopicPartition("parked", 0): kafka.errors.NoReassignmentInProgressError}

    await reassign(live, {("parked", 0): [1, 2, 4]})
    await cluster.restart_controller()
    await cluster.restart(4)  # registers, is told its new replica, catches up, joins the ISR: completion

    def completed() -> bool:
        p = cluster.controller.registration("parked", 0)
        return p.replicas == (1, 2, 4) and not p.is_reassigning

    await cluster.wait_for(completed, 60.0, "the reassignment to complete after broker 4 returned")
    await cluster.wait_for(lambda: not cluster.log_dir(3, "parked", 0).exists(), 20.0, "broker 3's log deleted")

    # A replica removed while its broker is down cannot be told; back, the broker finds it stray and deletes it.
    await cluster.kill(1)
    await cluster.wait_for(lambda: 1 not in cluster.active_brokers(), 20.0, "broker 1 to be fenced")
    await reassign(live, {("parked", 0): [2, 4]})  # 2 and 4 are in sync: done at once
    assert cluster.controller.registration("parked", 0).replicas == (2, 4)
    assert cluster.log_dir(1, "parked", 0).exists()
    await cluster.restart(1)
    await cluster.wait_for(lambda: not cluster.log_dir(1, "parked", 0).exists(), 20.0, "broker 1's stray log deleted")


async def test_bad_targets_are_invalid_replica_assignment_with_a_message(cluster):
    await asyncio.to_thread(create, cluster.bootstrap, "kept", [1, 2, 3])
    for target, said in (([1, 2, 9], "broker 9, but no such broker is registered"), ([1, 1, 2], "duplicate"),
                         ([], "empty replica list")):
        async with Admin(cluster.bootstrap) as admin:
            answers = await cluster_admin.alter_partition_reassignments(
                admin, {("kept", 0): target, ("kept", 7): [1, 2, 3], ("absent", 0): [1, 2, 3]})
        code, message = answers[("kept", 0)]
        assert code == kafka.errors.InvalidReplicationAssignmentError.errno and said in message
        assert answers[("kept", 7)][0] == kafka.errors.UnknownTopicOrPartitionError.errno
        assert answers[("absent", 0)][0] == kafka.errors.UnknownTopicOrPartitionError.errno
        if not target:
            continue  # kafka-python refuses an empty list itself
        # kafka-python reports the same code as its error class.
        assert await reassign(cluster.bootstrap, {("kept", 0): target}) == {
            kafka.TopicPartition("kept", 0): kafka.errors.InvalidReplicationAssignmentError}
    assert cluster.controller.registration("kept", 0).replicas == (1, 2, 3)


async def test_single_node_keeps_partitions_where_they_are(broker):
    """One broker: a target of itself is accepted (nothing moves), anything else names an unknown broker,
    there is never a reassignment to cancel or list."""
    async with Admin(broker.bootstrap) as admin:
        await admin.create_topics([NewTopic("alone")])
        answers = await cluster_admin.alter_partition_reassignments(
            admin, {("alone", 0): [1], ("alone", 1): [1], ("other", 0): [1]})
        assert answers[("alone", 0)] == (0, None)
        assert answers[("alone", 1)][0] == kafka.errors.UnknownTopicOrPartitionError.errno
        assert answers[("other", 0)][0] == kafka.errors.UnknownTopicOrPartitionError.errno
        for target, said in (([2], "broker 2, but no such broker is registered"), ([1, 1], "duplicate"),
                             ([], "empty replica list")):
            code, message = (await cluster_admin.alter_partition_reassignments(admin, {("alone", 0): target}))[
                ("alone", 0)]
            assert code == kafka.errors.InvalidReplicationAssignmentError.errno and said in message
        cancelled = await cluster_admin.alter_partition_reassignments(admin, {("alone", 0): None})
        assert cancelled[("alone", 0)][0] == kafka.errors.NoReassignmentInProgressError.errno
        assert await cluster_admin.list_partition_reassignments(admin) == {}
    assert await ongoing(broker.bootstrap) == {}


async def test_reassignment_carries_on_after_an_active_controller_failover(tmp_path):
    """Three controllers (the Raft quorum): the standby that takes over has replayed the reassignment from the
    metadata log, lists it, and completes it when the new replica catches up."""
    cluster = LocalCluster(tmp_path, brokers=4, controllers=3)
    try:
        await cluster.start()
        await asyncio.to_thread(create, cluster.bootstrap, "handed-over", [1, 2, 3])
        live = cluster.brokers[2].bootstrap  # kafka-python may give up on a bootstrap list naming a down broker
        await cluster.kill(4)
        await cluster.wait_for(lambda: 4 not in cluster.active_brokers(), 20.0, "broker 4 to be fenced")
        await reassign(live, {("handed-over", 0): [4, 2, 3]})
        old = cluster.controller
        await cluster.stop_controller(old.controller_id)
        new = await cluster.wait_for_active_controller(30.0)
        assert new is not old
        assert await ongoing(live) == {("handed-over", 0): ([4, 2, 3, 1], [4], [1])}
        await cluster.restart(4)

        def completed() -> bool:
            p = cluster.controller.registration("handed-over", 0)
            return p.replicas == (4, 2, 3) and not p.is_reassigning

        await cluster.wait_for(completed, 60.0, "the new active controller to complete the reassignment")
        await cluster.wait_for(lambda: not cluster.log_dir(1, "handed-over", 0).exists(), 20.0,
                               "broker 1's log deleted")
    finally:
        await cluster.stop()
