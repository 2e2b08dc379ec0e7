"""KIP-368 between nodes: two brokers and a controller whose inter-broker listener is SASL_PLAINTEXT with a short
connections.max.reauth.ms. Replica fetchers, the controller's pushes and forwarding all run on the bundled
client's connections, which must re-authenticate before their sessions end: a replicated topic keeps both
replicas in its ISR while a producer writes across several session lifetimes, and no broker closes a
connection for an expired session."""

import asyncio
import secrets
import time
import uuid

import pytest

from replog.client.admin import Admin, NewTopic
from replog.client.producer import Producer
from replog.controller.server import ClusterController, ControllerConfig
from replog.harness.broker_process import BrokerProcess
from replog.harness.local_cluster import FAST_REPLICATION
from tests.conditions import wait_until

HOST = "127.0.0.1"
LIFETIME_MS = 2000
PERIODS = 3
DEADLINE_S = 30.0
EXPIRED_LOG = "no re-authentication within connections.max.reauth.ms"


@pytest.fixture
async def cluster(tmp_path):
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
            "listeners": f"PLAINTEXT://{HOST}:{broker.port},INTERNAL://{HOST}:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.internal.connections.max.reauth.ms": str(LIFETIME_MS),
        })
        brokers[node_id] = broker
    try:
        await asyncio.gather(*(asyncio.to_thread(b.start) for b in brokers.values()))
        await wait_until(lambda: set(controller.metadata.active_broker_ids()) == {1, 2}, "the brokers to register",
                         DEADLINE_S)
        yield controller, brokers
    finally:
        await asyncio.gather(*(asyncio.to_thread(b.stop) for b in brokers.values()))
        await controller.stop()


async def test_replication_between_brokers_outlives_several_session_lifetimes(cluster):
    controller, brokers = cluster
    topic = f"replicated-{uuid.uuid4().hex[:6]}"
    bootstrap = f"{HOST}:{brokers[1].port}"
    async with Admin(bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, 1, 2)])
    producer = Producer(bootstrap, acks="all")
    await producer.start()
    isr_sizes, acknowledged = set(), 0
    try:
        ends = time.monotonic() + PERIODS * LIFETIME_MS / 1000
        while time.monotonic() < ends:  # one acks=all write at a time: each needs the follower's fetch
            delivered = await producer.send(topic, b"across re-authentications", partition=0)
            await asyncio.wait_for(delivered, DEADLINE_S)
            acknowledged += 1
            isr_sizes.add(len(controller.metadata.topics[topic].partitions[0].isr))
    finally:
        await producer.close()
    assert acknowledged and isr_sizes == {2}  # no follower fell out: its fetcher's session was renewed in time
    for broker in brokers.values():
        assert broker.running
        assert EXPIRED_LOG not in broker.output.read_text(), broker.output_tail(40)
