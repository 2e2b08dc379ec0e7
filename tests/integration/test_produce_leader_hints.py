"""KIP-951 on three broker processes: a Produce (v10) to a broker that no longer leads the partition answers
NOT_LEADER_OR_FOLLOWER with the current leader and its endpoint, and librdkafka (confluent-kafka, which sends
Produce v10) moves the partition from that answer rather than from a metadata refresh; the bundled client
decodes the same answer."""

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from replog.client.admin import Admin
from replog.client.cluster_admin import PREFERRED, alter_partition_reassignments, elect_leaders
from replog.client.connection import Connection, decode_response_frame
from replog.harness.local_cluster import LocalCluster
from replog.protocol.apis import ApiKey
from replog.protocol.produce import (
    ProducePartitionData,
    ProduceRequestData,
    ProduceTopicData,
    encode_produce_request,
)
from replog.protocol.records import build_batch

from ..conditions import wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC = "hints"


@pytest.fixture
async def cluster(tmp_path):
    cluster = LocalCluster(tmp_path)
    try:
        await cluster.start()
        await cluster.controller.create_topic(TOPIC, {0: [1, 2]}, configs={})
        await cluster.controller.settle()
        yield cluster
    finally:
        await cluster.stop()


async def move_leader_to_2(cluster: LocalCluster) -> None:
    """Broker 1 stays up and a replica: it answers NOT_LEADER_OR_FOLLOWER from now on."""
    async with Admin(cluster.bootstrap) as admin:
        assert await alter_partition_reassignments(admin, {(TOPIC, 0): [2, 1]}) == {(TOPIC, 0): (0, None)}
        await wait_until(lambda: list(cluster.controller.registration(TOPIC, 0).replicas) == [2, 1], what="reassigned")
        assert (await elect_leaders(admin, PREFERRED, [(TOPIC, 0)]))[(TOPIC, 0)][0] == 0
    await cluster.controller.settle()
    assert cluster.controller.registration(TOPIC, 0).leader == 2


class DebugLines:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def log(self, level, fmt, *args) -> None:
        self.lines.append(fmt % args if args else fmt)


def produce_and_flush(producer, value: bytes) -> None:
    errors = []
    producer.produce(TOPIC, value, partition=0, on_delivery=lambda err, msg: err and errors.append(err))
    assert producer.flush(30) == 0
    assert not errors


async def test_librdkafka_moves_the_partition_from_the_produce_answer(cluster):
    debug = DebugLines()
    producer = confluent_kafka.Producer({
        "bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0,
        "topic.metadata.refresh.interval.ms": 600_000,  # no periodic refresh during the test
        "debug": "metadata,topic", "log.queue": False,
    }, logger=debug)  # fmt: skip
    await asyncio.to_thread(produce_and_flush, producer, b"to broker 1")
    await move_leader_to_2(cluster)
    debug.lines.clear()

    await asyncio.to_thread(produce_and_flush, producer, b"to broker 2, redirected")

    epoch = cluster.controller.registration(TOPIC, 0).leader_epoch
    # Logged only where librdkafka applies CurrentLeader / NodeEndpoints from a Produce or Fetch answer.
    assert any("METADATAUPDATE" in line and f"updated with leader 2 and epoch {epoch}" in line
               for line in debug.lines), [line for line in debug.lines if "METADATA" in line][:20]


async def test_not_leader_answer_names_the_leader_and_its_endpoint(cluster):
    await move_leader_to_2(cluster)
    broker_1 = cluster.brokers[1]
    records = memoryview(bytearray(build_batch([(None, b"v", [], 1_000)])))
    request = ProduceRequestData(None, -1, 5_000, [ProduceTopicData(TOPIC, [ProducePartitionData(0, records)])])
    connection = Connection("127.0.0.1", broker_1.port)
    await connection.connect()
    try:
        answers = {}
        for version in (9, 10):
            frame = await connection.request(ApiKey.PRODUCE, version, encode_produce_request(version, request))
            answers[version] = decode_response_frame(ApiKey.PRODUCE, version, frame)
    finally:
        connection.close()

    registration = cluster.controller.registration(TOPIC, 0)
    partition = answers[10].responses[0].partition_responses[0]
    assert partition.error_code == ErrorCode.not_leader_or_follower
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (2, registration.leader_epoch)
    [endpoint] = answers[10].node_endpoints
    assert (endpoint.node_id, endpoint.host, endpoint.port) == (2, "127.0.0.1", cluster.brokers[2].port)
    # v9 has no such fields: the client refreshes its metadata instead.
    assert answers[9].responses[0].partition_responses[0].error_code == ErrorCode.not_leader_or_follower
