"""Replication and failover on three real broker processes that register with a controller running in the
test's event loop (so the test can read its state): followers catch up after SIGKILL and rejoin the ISR, a
leader killed or shut down under acks=all load loses no acknowledged record, a leader cut off from the
controller is deposed and its divergent tail truncated, a restarted controller keeps every epoch, and
every replica's segment data is identical up to the high watermark. confluent-kafka (librdkafka) produces
and consumes."""

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from replog.client.cluster import metadata_request
from replog.client.connection import Connection
from replog.client.errors import KafkaError
from replog.harness.broker_process import BrokerProcess
from replog.harness.local_cluster import LocalCluster
from replog.protocol.apis import ApiKey, response_header_version
from replog.protocol.control import (
    LEADER_AND_ISR_VERSION,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
    decode_leader_and_isr_response,
    encode_leader_and_isr_request,
)
from replog.protocol.headers import decode_response_header
from replog.protocol.records import build_batch
from replog.server.inter_broker import open_inter_broker_connection
from tests.integration.test_bad_input import produce as produce_raw
from tests.raw_wire import RawConnection

confluent_kafka = pytest.importorskip("confluent_kafka")

MIN_ISR_2 = {"min.insync.replicas": "2"}


@pytest.fixture
async def cluster(tmp_path):
    cluster = LocalCluster(tmp_path)
    try:
        await cluster.start()
        yield cluster
    finally:
        await cluster.stop()


def produce(bootstrap: str, topic: str, values: list[bytes], *, partition: int = 0, acks: str = "all",
            extra: dict | None = None) -> list[tuple[int, int, bytes]]:
    """Produce with librdkafka; returns the acknowledged (partition, offset, value)."""
    acked, errors = [], []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
        else:
            acked.append((msg.partition(), msg.offset(), msg.value()))

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                                         "topic.metadata.refresh.interval.ms": 1000, **(extra or {})})
    for value in values:
        producer.produce(topic, value, partition=partition, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(90) == 0
    assert errors == [], errors[:3]
    return acked


def consume_all(bootstrap: str, topic: str, partitions: list[int], expected: int) -> list[tuple[int, int, bytes]]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "replication-check",
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                     for p in partitions])
    read = []
    idle_polls = 0
    while len(read) < expected or idle_polls < 5:  # a few empty polls past the goal: nothing extra arrives
        batch = consumer.consume(1000, timeout=0.2)
        idle_polls = idle_polls + 1 if not batch else 0
        for msg in batch:
            assert msg.error() is None, msg.error()
            read.append((msg.partition(), msg.offset(), msg.value()))
        if idle_polls > 300:
            break
    consumer.close()
    return read


def log_dump(partition_dir: Path, below_offset: int) -> list[str]:
    """`replog log dump` of a replica's partition directory: its batches below an offset, without the
    per-replica file names and positions (segment boundaries differ between replicas)."""
    out = subprocess.run([sys.executable, "-m", "replog", "log", "dump", str(partition_dir)], check=True,
                         capture_output=True, text=True).stdout
    batches = []
    for line in out.splitlines():
        if not line.startswith("baseOffset:"):
            continue
        fields = line.split()
        if int(fields[3]) >= below_offset:  # lastOffset
            continue
        position = fields.index("position:")
        batches.append(" ".join(fields[:position] + fields[position + 2:]))
    return batches


def produce_to_broker(port: int, topic: str, values: list[bytes], *, acks: int):
    """One Produce request of one batch to partition 0, to this broker alone; returns its partition answer."""
    now_ms = int(time.time() * 1000)
    batch = build_batch([(None, value, (), now_ms) for value in values])
    conn = RawConnection(port)
    try:
        return produce_raw(conn, topic, 0, batch, acks=acks)
    finally:
        conn.close()


def values(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}-{i:06d}".encode() for i in range(count)]


async def wait_identical_replicas(cluster: LocalCluster, topic: str, partition: int, replicas: list[int],
                                  end_offset: int) -> list[str]:
    """Wait until every replica holds the same batches below end_offset; return them."""
    dumps: dict[int, list[str]] = {}

    def identical() -> bool:
        for node in replicas:
            dumps[node] = log_dump(cluster.log_dir(node, topic, partition), end_offset)
        first = dumps[replicas[0]]
        return all(dumps[n] == first for n in replicas) and first and int(first[-1].split()[3]) == end_offset - 1

    # Each check runs `replog log dump` processes: in a worker thread, because the controller shares this
    # event loop and must keep answering heartbeats meanwhile (on a loaded machine, blocking it fenced brokers).
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30.0
    while not await asyncio.to_thread(identical):
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for identical replicas of {topic}-{partition} up to {end_offset}")
        await asyncio.sleep(0.1)
    return dumps[replicas[0]]


async def test_followers_replicate_to_identical_segment_data(cluster):
    await cluster.controller.create_topic("replicated", {0: [1, 2, 3], 1: [2, 3, 1]}, MIN_ISR_2)
    for partition in (0, 1):
        acked = await asyncio.to_thread(produce, cluster.bootstrap, "replicated", values(f"p{partition}", 3000),
                                        partition=partition)
        assert [offset for _, offset, _ in acked] == list(range(3000))
        batches = await wait_identical_replicas(cluster, "replicated", partition, [1, 2, 3], 3000)
        assert all("isvalid: true" in line for line in batches)
    assert set(cluster.controller.registration("replicated", 0).isr) == {1, 2, 3}


async def test_killed_follower_drops_out_of_isr_then_catches_up_and_rejoins(cluster):
    await cluster.controller.create_topic("catch-up", {0: [1, 2, 3]}, MIN_ISR_2)
    await asyncio.to_thread(produce, cluster.bootstrap, "catch-up", values("before", 500))
    await cluster.kill(3)
    # acks=all waits for the whole ISR, so these complete once the leader has shrunk the ISR to {1, 2}.
    acked = await asyncio.to_thread(produce, cluster.bootstrap, "catch-up", values("during", 2000))
    assert acked[-1][1] == 2499
    await cluster.wait_for_isr("catch-up", 0, {1, 2})
    await cluster.restart(3)
    await cluster.wait_for_isr("catch-up", 0, {1, 2, 3})
    await wait_identical_replicas(cluster, "catch-up", 0, [1, 2, 3], 2500)


async def test_leader_killed_under_acks_all_load_loses_no_acknowledged_record(cluster):
    topic = "failover"
    await cluster.controller.create_topic(topic, {0: [1, 2, 3]}, MIN_ISR_2)
    count = 20_000
    producing = await start_load(cluster, topic, count)
    before = cluster.controller.registration(topic, 0)
    await cluster.kill(1)
    # Nobody tells the controller: broker 1 stops heartbeating, is fenced, and 2 (next in the ISR) leads.
    await cluster.wait_for(lambda: cluster.controller.registration(topic, 0).leader == 2, 20.0, "a new leader")
    after = cluster.controller.registration(topic, 0)
    assert (after.isr, after.leader_epoch) == ((2, 3), before.leader_epoch + 1)
    acked = await producing
    assert len(acked) == count
    read = await asyncio.to_thread(consume_all, cluster.bootstrap, topic, [0], count)
    assert_no_acknowledged_record_lost(acked, read)
    assert len({value for _, _, value in read}) == len(read), "the idempotent producer wrote a duplicate"
    await cluster.restart(1)
    await cluster.wait_for_isr(topic, 0, {1, 2, 3})
    end = max(offset for _, offset, _ in read) + 1
    await wait_identical_replicas(cluster, topic, 0, [1, 2, 3], end)


async def start_load(cluster: LocalCluster, topic: str, count: int) -> asyncio.Task:
    """Start producing `count` records to partition 0 (idempotent, acks=all, librdkafka) and return the task
    (its result: the acknowledged records) once the leader, broker 1, has taken some of them."""
    producing = asyncio.create_task(asyncio.to_thread(
        produce, cluster.bootstrap, topic, values("load", count),
        extra={"enable.idempotence": True, "message.timeout.ms": 60_000, "linger.ms": 2}))
    await cluster.wait_for(lambda: os.path.getsize(cluster.log_dir(1, topic, 0) / "00000000000000000000.log")
                           > 50_000, 30.0, "the leader to take some load")
    return producing


def assert_no_acknowledged_record_lost(acked, read) -> None:
    at_offset = {(p, o): v for p, o, v in read}
    lost = [(p, o, v) for p, o, v in acked if at_offset.get((p, o)) != v]
    assert not lost, f"{len(lost)} acknowledged records lost or moved, first {lost[:3]}"
    offsets = sorted(o for _, o, _ in read)
    assert offsets == list(range(len(offsets))), "offsets are not dense"


async def wait_for_leader_seen_by(broker: BrokerProcess, topic: str, partition: int, *, leader: int,
                                  timeout_s: float = 20.0) -> None:
    """Until this very broker (one connection to it, no other) answers Metadata naming `leader`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    connection = Connection("127.0.0.1", broker.port)
    await connection.connect()
    try:
        await connection.negotiate_versions()
        while True:
            answer = await connection.send(ApiKey.METADATA, metadata_request([topic], False))
            seen = {p.partition_index: p.leader_id for t in answer.topics for p in t.partitions}
            if seen.get(partition) == leader:
                return
            assert loop.time() < deadline, f"broker at {broker.port} still names leader {seen.get(partition)}"
            await asyncio.sleep(0.05)
    finally:
        connection.close()


async def test_leader_cut_off_from_the_controller_is_deposed_and_truncates_its_divergent_tail(cluster):
    """KIP-101's divergence: a leader that cannot reach the controller is fenced and replaced, but clients
    still reach it, and it still believes it leads, so it appends records (acks=1) that no other replica
    has. Once the link heals it learns it follows, must find where its log diverges from the new leader's
    and drop those records, not keep them."""
    topic = "divergent"
    await cluster.controller.create_topic(topic, {0: [1, 2, 3]}, {"min.insync.replicas": "1"})
    await asyncio.to_thread(produce, cluster.bootstrap, topic, values("committed", 100))
    await wait_identical_replicas(cluster, topic, 0, [1, 2, 3], 100)
    old_leader = cluster.brokers[1]
    cluster.controller_links[1].cut()
    await cluster.wait_for(lambda: cluster.controller.registration(topic, 0).leader == 2, 20.0,
                           "the controller to fence broker 1 and elect 2")
    new_bootstrap = f"{cluster.brokers[2].bootstrap},{cluster.brokers[3].bootstrap}"
    # The controller's decision reaches brokers 2 and 3 asynchronously: a client that asked them first
    # would be sent to the zombie, and the "new epoch" records would land there too.
    for broker_id in (2, 3):
        await wait_for_leader_seen_by(cluster.brokers[broker_id], topic, 0, leader=2)
    await asyncio.to_thread(produce, new_bootstrap, topic, values("new-epoch", 30))
    # The zombie still leads epoch 0 in its own eyes; acks=1 needs nobody else, so it appends. The request
    # goes to it over one connection: a client bootstrapped from it could still take its next metadata from
    # broker 2 or 3 and be sent to the new leader.
    stale = await asyncio.to_thread(produce_to_broker, old_leader.port, topic, values("zombie", 50), acks=1)
    assert (stale.error_code, stale.base_offset) == (ErrorCode.none, 100)
    cluster.controller_links[1].heal()
    await cluster.wait_for_isr(topic, 0, {2, 3, 1})
    batches = await wait_identical_replicas(cluster, topic, 0, [1, 2, 3], 130)
    old_leader_batches = await asyncio.to_thread(log_dump, cluster.log_dir(1, topic, 0), 10**9)
    assert len(old_leader_batches) == len(batches), "the old leader kept its tail"
    read = await asyncio.to_thread(consume_all, cluster.bootstrap, topic, [0], 130)
    assert [v for _, _, v in read] == values("committed", 100) + values("new-epoch", 30)


async def test_controller_requests_need_the_inter_broker_principal_and_a_current_epoch(cluster):
    broker = cluster.brokers[1]
    with pytest.raises(KafkaError) as refused:
        await open_inter_broker_connection("127.0.0.1", broker.port, client_id="impostor", username="broker-9",
                                           secret="wrong", request_timeout_ms=5000)
    assert refused.value.code == 58  # SASL_AUTHENTICATION_FAILED
    await cluster.controller.create_topic("fenced", {0: [1, 2, 3]})
    registration = cluster.controller.registration("fenced", 0)

    def request(controller_epoch: int) -> bytes:
        state = LeaderAndIsrPartitionState("fenced", 0, controller_epoch, 1, registration.leader_epoch + 5,
                                           [1], registration.partition_epoch + 5, [1, 2, 3])
        return encode_leader_and_isr_request(LeaderAndIsrRequest(
            4000, controller_epoch, -1, [LeaderAndIsrTopicState("fenced", registration.topic_id, [state])], []))

    async def send(connection, body: bytes):
        frame = await connection.request(ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION, [body])
        _, offset = decode_response_header(frame, response_header_version(ApiKey.LEADER_AND_ISR,
                                                                          LEADER_AND_ISR_VERSION))
        return decode_leader_and_isr_response(frame, offset)

    anonymous = Connection("127.0.0.1", broker.port)
    await anonymous.connect()
    try:
        assert (await send(anonymous, request(cluster.controller.controller_epoch))).error_code == 31
    finally:
        anonymous.close()
    authenticated = await open_inter_broker_connection("127.0.0.1", broker.port, client_id="old-controller",
                                                       username="controller", secret=cluster.secret,
                                                       request_timeout_ms=5000)
    try:
        stale = await send(authenticated, request(cluster.controller.controller_epoch - 1))
        assert stale.error_code == 11  # STALE_CONTROLLER_EPOCH: a deposed controller is ignored
    finally:
        authenticated.close()
    assert cluster.controller.registration("fenced", 0).leader == 1


async def test_stop_replica_with_delete_removes_every_replica_log(cluster):
    layout = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}
    await cluster.controller.create_topic("doomed", layout)
    for partition in layout:
        await asyncio.to_thread(produce, cluster.bootstrap, "doomed", values("doomed", 10), partition=partition)
        await wait_identical_replicas(cluster, "doomed", partition, [1, 2, 3], 10)
    await cluster.controller.delete_topic("doomed")
    await cluster.wait_for(lambda: not any(cluster.log_dir(n, "doomed", p).exists() for n in (1, 2, 3)
                                           for p in layout), 10.0, "every replica's log of doomed to be deleted")
    # Followers that lost their last partition stop their fetchers; SIGTERM must still stop the broker
    # cleanly (a fetcher whose cancellation was swallowed once kept brokers alive until SIGKILL).
    exit_codes = await asyncio.gather(*(asyncio.to_thread(b.stop, 10) for b in cluster.brokers.values()))
    assert exit_codes == [0, 0, 0]


async def test_controlled_shutdown_moves_leadership_first_and_loses_no_acknowledged_record(cluster):
    topic = "controlled"
    await cluster.controller.create_topic(topic, {0: [1, 2, 3]}, MIN_ISR_2)
    count = 20_000
    producing = await start_load(cluster, topic, count)
    # SIGTERM: the broker asks the controller to move its leaderships, and exits only once they moved.
    exit_code = await asyncio.to_thread(cluster.brokers[1].stop)
    assert exit_code == 0
    moved = cluster.controller.registration(topic, 0)
    assert moved.leader == 2 and 1 not in moved.isr, moved
    acked = await producing  # produce() asserts that librdkafka reported no error at all
    assert len(acked) == count
    read = await asyncio.to_thread(consume_all, cluster.bootstrap, topic, [0], count)
    assert_no_acknowledged_record_lost(acked, read)
    assert len({value for _, _, value in read}) == len(read) == count


async def test_a_restarted_controller_keeps_leaders_and_epochs_and_still_fences(cluster):
    topic = "durable-metadata"
    await cluster.controller.create_topic(topic, {0: [1, 2, 3], 1: [2, 3, 1]}, MIN_ISR_2)
    await cluster.kill(1)  # a first failover, so partition 0's epochs are not the initial ones
    await cluster.wait_for(lambda: cluster.controller.registration(topic, 0).leader == 2, 20.0, "failover")
    before = {p: cluster.controller.registration(topic, p) for p in (0, 1)}
    epoch = cluster.controller.controller_epoch
    await cluster.restart_controller()
    assert cluster.controller.controller_epoch == epoch + 1
    assert {p: cluster.controller.registration(topic, p) for p in (0, 1)} == before
    # Brokers keep their sessions across the restart and take the new controller epoch.
    acked = await asyncio.to_thread(produce, cluster.bootstrap, topic, values("after", 100))
    assert len(acked) == 100
    await cluster.restart(1)
    await cluster.wait_for_isr(topic, 0, {2, 3, 1})
    # The restarted controller still fences a silent broker and moves its leaderships.
    await cluster.kill(2)
    # Broker 1 is back in the ISR and first in the assignment, so the offline selector picks it.
    await cluster.wait_for(lambda: cluster.controller.registration(topic, 0).leader == 1, 20.0,
                           "the restarted controller to fence broker 2")
    assert cluster.controller.registration(topic, 0).leader_epoch == before[0].leader_epoch + 1
