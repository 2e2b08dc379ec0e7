"""Two brokers and a controller, each broker with a PLAINTEXT inter-broker listener and an SSL listener for
clients: a client on the SSL listener learns every broker's SSL address (registered with the controller,
carried by UpdateMetadata) and produces to a replicated topic and reads it back over TLS only."""

import asyncio
import secrets
import time
import uuid

import pytest
import trustme
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from replog.controller.server import ClusterController, ControllerConfig
from replog.harness.broker_process import BrokerProcess
from replog.harness.local_cluster import FAST_REPLICATION

HOST = "127.0.0.1"
DEADLINE_S = 30.0


@pytest.fixture
async def cluster(tmp_path):
    ca = trustme.CA()
    ca.issue_cert(HOST).private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "server.pem"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    secret = secrets.token_hex(8)
    controller = ClusterController(ControllerConfig(inter_broker_secret=secret, metadata_log_dir=tmp_path / "meta"))
    await controller.start()
    brokers = {}
    for node_id in (1, 2):
        broker = BrokerProcess(tmp_path / f"broker-{node_id}", node_id=node_id,
                               output=tmp_path / f"broker-{node_id}.out")
        broker.overrides.update({
            **FAST_REPLICATION, "inter.broker.secret": secret,
            "controller.quorum.bootstrap.servers": f"{HOST}:{controller.port}",
            "listeners": f"PLAINTEXT://{HOST}:{broker.port},SSL://{HOST}:0",
            "ssl.keystore.location": str(tmp_path / "server.pem"),
        })
        brokers[node_id] = broker
    try:
        await asyncio.gather(*(asyncio.to_thread(b.start) for b in brokers.values()))
        deadline = time.monotonic() + DEADLINE_S
        while set(controller.metadata.active_broker_ids()) != {1, 2}:
            assert time.monotonic() < deadline, "brokers did not register"
            await asyncio.sleep(0.05)
        yield brokers, str(tmp_path / "ca.pem")
    finally:
        await asyncio.gather(*(asyncio.to_thread(b.stop) for b in brokers.values()))
        await controller.stop()


async def test_a_tls_client_sees_every_brokers_tls_address_and_replicates(cluster):
    brokers, ca_file = cluster
    config = {"bootstrap.servers": f"{HOST}:{brokers[1].ready.listener_ports['SSL']}", "security.protocol": "SSL",
              "ssl.ca.location": ca_file}
    await asyncio.to_thread(round_trip_over_tls, config, brokers)


def round_trip_over_tls(config: dict, brokers: dict[int, BrokerProcess]) -> None:
    admin = AdminClient(config)
    expected = {node_id: (HOST, broker.ready.listener_ports["SSL"]) for node_id, broker in brokers.items()}
    deadline = time.monotonic() + DEADLINE_S
    while {n: (b.host, b.port) for n, b in admin.list_topics(timeout=5).brokers.items()} != expected:
        assert time.monotonic() < deadline, admin.list_topics(timeout=5).brokers
        time.sleep(0.1)
    topic = f"replicated-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 2, 2)])[topic].result(DEADLINE_S)
    producer = Producer({**config, "acks": "all"})
    for partition in (0, 1):  # one led by each broker, most likely; every one replicated to both
        producer.produce(topic, b"over tls", partition=partition)
    assert producer.flush(DEADLINE_S) == 0
    consumer = Consumer({**config, "group.id": "g", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
    try:
        got, deadline = [], time.monotonic() + DEADLINE_S
        while len(got) < 2:
            assert time.monotonic() < deadline, got
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                got.append(message.value())
        assert got == [b"over tls", b"over tls"]
    finally:
        consumer.close()
