"""Thousands of partitions RF=3 on 3 brokers (issue 18): one CreateTopics settles with no broker fenced, every
partition gets a leader and a full ISR, and every broker serves all of them, as the controller decided, from
the incremental UpdateMetadata it applied (controller/metadata_push.py). A size for CI on a loaded 2-core
machine; benchmarks/partition_scaling.py creates 10,000.
"""

import asyncio

import pytest

from replog.client.cluster import metadata_request, snapshot_from_metadata
from replog.client.connection import Connection
from replog.harness.local_cluster import LocalCluster
from replog.harness.processes import HOST
from replog.protocol.apis import ApiKey
from tests.conditions import wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient  # noqa: E402

TOPIC = "many"
PARTITIONS = 2_000
KAFKA_SESSION_TIMEOUT_MS = 9_000  # broker.session.timeout.ms: a stalled controller or broker would fence
SETTLE_TIMEOUT_S = 120.0
# Each broker creates 2,000 logs before it answers the LeaderAndIsr: on a loaded 2-core machine that can take
# longer than the controller's default 30 s request timeout (Kafka's controller.socket.timeout.ms), which
# would resend it. The benchmark's 10,000 round waits longer likewise.
CONTROLLER_OPTIONS = {"request_timeout_ms": 120_000, "propagation_timeout_ms": 120_000}


def round_robin(partitions: int) -> dict[int, list[int]]:
    return {p: [(p + i) % 3 + 1 for i in range(3)] for p in range(partitions)}


async def metadata_of_broker(port: int):
    """The Metadata this one broker answers, from its own image."""
    connection = Connection(HOST, port, client_id="many-partitions-test")
    try:
        await connection.connect(10_000)
        return snapshot_from_metadata(await connection.send(ApiKey.METADATA, metadata_request([TOPIC], False)))
    finally:
        connection.close()


def confluent_partitions(bootstrap: str) -> dict[int, tuple[int, tuple[int, ...]]]:
    """{partition: (leader, ISR)} as librdkafka's Metadata request lists them."""
    topic = AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=30).topics[TOPIC]
    assert topic.error is None, topic.error
    return {p.id: (p.leader, tuple(p.isrs)) for p in topic.partitions.values()}


def test_thousands_of_partitions_rf3_settle_with_no_broker_fenced(tmp_path):
    async def scenario() -> None:
        cluster = LocalCluster(tmp_path, brokers=3, session_timeout_ms=KAFKA_SESSION_TIMEOUT_MS,
                               controller_options=CONTROLLER_OPTIONS)
        await cluster.start()
        try:
            controller = cluster.controller
            epochs = {b.broker_id: b.epoch for b in controller.metadata.brokers.values()}
            await asyncio.wait_for(controller.create_topic(TOPIC, round_robin(PARTITIONS),
                                                           {"min.insync.replicas": "2"}), SETTLE_TIMEOUT_S)
            await asyncio.wait_for(controller.settle(), SETTLE_TIMEOUT_S)

            def settled() -> bool:
                return all(p.leader == p.replicas[0] and len(p.isr) == 3
                           for p in controller.metadata.topics[TOPIC].partitions.values())

            await wait_until(settled, "every partition led by its preferred replica with a full ISR",
                             SETTLE_TIMEOUT_S)
            await asyncio.wait_for(controller.settle(), SETTLE_TIMEOUT_S)
            # No broker was fenced (a fenced broker registers again with a new epoch), none is now.
            assert {b.broker_id: b.epoch for b in controller.metadata.brokers.values()} == epochs
            assert not any(b.fenced for b in controller.metadata.brokers.values())
            expected = {p.partition: (p.leader, tuple(sorted(p.isr)))
                        for p in controller.metadata.topics[TOPIC].partitions.values()}
            # Each broker's own image (a full snapshot, then increments) has every partition as decided.
            for broker_id, broker in cluster.brokers.items():
                snapshot = await metadata_of_broker(broker.port)
                served = {info.partition: (info.leader, tuple(sorted(info.isr)))
                          for info in snapshot.topics[TOPIC].partitions.values()}
                assert served == expected, f"broker {broker_id}"
            # A third-party client's view of the cluster.
            witnessed = await asyncio.to_thread(confluent_partitions, cluster.bootstrap)
            assert {i: (leader, tuple(sorted(isr))) for i, (leader, isr) in witnessed.items()} == expected
        finally:
            await cluster.stop()

    asyncio.run(scenario())
