"""Three controllers (the quorum, in the test's event loop) and three real broker processes: the active
controller stops, another becomes active within seconds, every broker heartbeats with it, none is fenced and no
leader epoch moves; then the leader of an RF=3 partition is killed, leadership moves, and acks=all produce
succeeds (librdkafka). The same holds when the active controller stops in the middle of a topic creation."""

import asyncio
import time

import pytest

from replog.harness.local_cluster import LocalCluster

from .test_replication import MIN_ISR_2, produce, values

pytest.importorskip("confluent_kafka")

FAILOVER_DEADLINE_S = 15.0  # Kafka's default election timeouts: a new leader in about 1-3.5 s


@pytest.fixture
async def cluster(tmp_path):
    cluster = LocalCluster(tmp_path, controllers=3)
    try:
        await cluster.start()
        yield cluster
    finally:
        await cluster.stop()


def leaders(cluster: LocalCluster, topic: str) -> dict[int, tuple[int, int]]:
    return {p.partition: (p.leader, p.leader_epoch) for p in cluster.controller.metadata.topics[topic].partitions.values()}


async def fail_over(cluster: LocalCluster) -> float:
    """Stop the active controller; return the seconds until another is active and every broker heartbeats
    with it."""
    old = cluster.controller
    started = time.monotonic()
    await cluster.stop_controller(old.controller_id)
    new = await cluster.wait_for_active_controller(FAILOVER_DEADLINE_S)
    assert new is not old and new.controller_epoch > old.controller_epoch

    def every_broker_heard_since_activation() -> bool:
        contacts = [new.sessions.last_contact_ms(b) for b in cluster.brokers]
        return all(c is not None and c > new.activated_at_ms for c in contacts)

    await cluster.wait_for(every_broker_heard_since_activation, FAILOVER_DEADLINE_S,
                           "every broker to heartbeat with the new active controller")
    return time.monotonic() - started


async def test_active_controller_failover_keeps_brokers_and_leaders_then_a_leader_broker_fails(cluster):
    topic = "quorum-failover"
    await cluster.controller.create_topic(topic, {0: [1, 2, 3], 1: [2, 3, 1]}, MIN_ISR_2)
    assert len(await asyncio.to_thread(produce, cluster.bootstrap, topic, values("before", 100))) == 100
    before = leaders(cluster, topic)
    broker_epochs = {b: r.epoch for b, r in cluster.controller.metadata.brokers.items()}

    seconds = await fail_over(cluster)
    print(f"failover: a new active controller with every broker heartbeating after {seconds:.2f} s")
    new = cluster.controller
    assert cluster.active_brokers() == {1, 2, 3}  # nobody fenced by the change of controller
    assert {b: r.epoch for b, r in new.metadata.brokers.items()} == broker_epochs  # nobody re-registered
    assert leaders(cluster, topic) == before  # the failover itself moved no leader, bumped no epoch
    assert new.fence_expired_brokers() == []

    await cluster.kill(1)  # partition 0's leader
    await cluster.wait_for(lambda: new.registration(topic, 0).leader in (2, 3), 20.0, "leadership to move")
    assert new.registration(topic, 0).leader_epoch == before[0][1] + 1
    acked = await asyncio.to_thread(produce, cluster.bootstrap, topic, values("after", 100), partition=0)
    assert len(acked) == 100


async def test_active_controller_stopped_during_a_topic_creation(cluster):
    first = cluster.controller
    creating = asyncio.create_task(first.create_topic("created-during-failover", {0: [1, 2, 3]}, MIN_ISR_2))
    await asyncio.sleep(0)  # the creation has begun: its records are appended, maybe not yet committed
    await fail_over(cluster)
    await asyncio.gather(creating, return_exceptions=True)  # cancelled or done: either way not a crash
    new = cluster.controller
    topic = "created-during-failover"
    if topic not in new.metadata.topics:  # never committed: the client retries, as after a timeout
        await new.create_topic(topic, {0: [1, 2, 3]}, MIN_ISR_2)
    assert len(await asyncio.to_thread(produce, cluster.bootstrap, topic, values("v", 50))) == 50
    assert cluster.active_brokers() == {1, 2, 3}
