"""Three controller processes and three broker processes (LocalCluster(controller_processes=True)): a SIGKILL of
the active controller elects another whose view has every broker registered and unfenced; the same in the
middle of a topic creation (it succeeds or fails with a retriable error, and a retry succeeds); and together
with a SIGKILL of a leader broker (leadership moves, acks=all produce succeeds on the moved partitions)."""

import asyncio
import time

import pytest
from kio.schema.errors import ErrorCode

from replog.client.admin import Admin, NewTopic
from replog.client.errors import KafkaError
from replog.client.quorum_admin import QuorumInfo
from replog.harness.local_cluster import FAST_SESSION_TIMEOUT_MS, LocalCluster

from .test_replication import MIN_ISR_2, produce, values

pytest.importorskip("confluent_kafka")

FAILOVER_DEADLINE_S = 15.0  # Kafka's default quorum timeouts: a new leader in about 1-3.5 s
MOVE_DEADLINE_S = FAILOVER_DEADLINE_S + FAST_SESSION_TIMEOUT_MS / 1000 + 10  # + the dead broker's session
ASSIGNMENT = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}


@pytest.fixture
async def cluster(tmp_path):
    cluster = LocalCluster(tmp_path, controllers=3, controller_processes=True)
    try:
        await cluster.start()
        yield cluster
    finally:
        await cluster.stop()


async def kill_active_controller(cluster: LocalCluster) -> tuple[int, int]:
    """SIGKILL the active controller; return it and the epoch it led."""
    before = await cluster.quorum_processes.wait_for_leader(FAILOVER_DEADLINE_S)
    await cluster.kill_controller(before.leader_id)
    return before.leader_id, before.leader_epoch


async def wait_for_brokers_at(cluster: LocalCluster, leader: QuorumInfo, deadline_s: float, *,
                              fenced: int = 0) -> None:
    """Until the quorum's leader has taken over as the active controller in its epoch (the epoch gauge moves
    once its first record of the epoch is committed and replayed) and counts every broker but `fenced` of
    them active."""
    deadline = time.monotonic() + deadline_s
    wanted = (leader.leader_epoch, len(cluster.brokers) - fenced, fenced)
    while True:
        gauges = await cluster.quorum_processes.gauges(leader.leader_id)
        if (gauges["epoch"], gauges["activebrokercount"], gauges["fencedbrokercount"]) == wanted:
            return
        assert time.monotonic() < deadline, f"controller {leader.leader_id} in epoch {leader.leader_epoch}: {gauges}"
        await asyncio.sleep(0.2)  # poll interval


def leaders(cluster: LocalCluster, topic: str) -> dict[int, tuple[int, int]]:
    return {p: (cluster.registration(topic, p).leader, cluster.registration(topic, p).leader_epoch)
            for p in ASSIGNMENT}


async def test_sigkill_of_the_active_controller_elects_one_every_broker_is_registered_with(cluster):
    topic = "process-failover"
    await cluster.create_topic(topic, ASSIGNMENT, MIN_ISR_2)
    await cluster.wait_for(lambda: all(leader > 0 for leader, _ in leaders(cluster, topic).values()), 20.0,
                           "every partition to have a leader")
    before = leaders(cluster, topic)
    killed, epoch = await kill_active_controller(cluster)
    killed_at = time.monotonic()
    new = await cluster.quorum_processes.wait_for_leader(FAILOVER_DEADLINE_S, not_id=killed, above_epoch=epoch)
    print(f"SIGKILL of controller {killed} -> controller {new.leader_id} active in epoch {new.leader_epoch} "
          f"after {time.monotonic() - killed_at:.2f} s")
    await wait_for_brokers_at(cluster, new, FAILOVER_DEADLINE_S)
    await cluster.refresh_view()
    assert leaders(cluster, topic) == before  # the controller change moved no leader and bumped no epoch
    # A broker fenced by the new controller and started again can only register with it, and does.
    await cluster.kill(2)
    await wait_for_brokers_at(cluster, new, MOVE_DEADLINE_S, fenced=1)
    await cluster.restart(2)
    await wait_for_brokers_at(cluster, new, FAILOVER_DEADLINE_S)
    assert len(await asyncio.to_thread(produce, cluster.bootstrap, topic, values("after", 50), partition=2)) == 50
    # The killed controller comes back as a follower of the new one.
    await cluster.start_controller(killed)
    again = await cluster.quorum_processes.wait_for_leader(FAILOVER_DEADLINE_S)
    assert again.leader_epoch >= new.leader_epoch
    assert {v.replica_id for v in again.voters} == {3000, 3001, 3002}


async def test_sigkill_of_the_active_controller_during_a_topic_creation(cluster):
    topic = "created-during-failover"
    async with Admin(cluster.bootstrap, request_timeout_ms=5_000) as admin:
        creating = asyncio.create_task(admin.create_topics(
            [NewTopic(topic, configs=MIN_ISR_2, replica_assignment={0: [1, 2, 3], 1: [2, 3, 1]})]))
        killed, epoch = await kill_active_controller(cluster)
        try:
            await creating
            outcome = "created"
        except KafkaError as e:  # the creation may not have been committed: a retriable error, never a hang
            assert e.retriable, e
            outcome = f"retriable {e}"
        await cluster.quorum_processes.wait_for_leader(FAILOVER_DEADLINE_S, not_id=killed, above_epoch=epoch)
        deadline = time.monotonic() + FAILOVER_DEADLINE_S
        while outcome.startswith("retriable") and topic not in await admin.list_topics():
            try:
                await admin.create_topics([NewTopic(topic, configs=MIN_ISR_2,
                                                    replica_assignment={0: [1, 2, 3], 1: [2, 3, 1]})])
                outcome += ", then created on retry"
            except KafkaError as e:
                if e.code == ErrorCode.topic_already_exists:  # the first attempt's outcome was unknown: it won
                    outcome += ", then found created by it"
                    break
                assert e.retriable and time.monotonic() < deadline, e
    print(f"CreateTopics during the failover: {outcome}")
    await cluster.wait_for(lambda: all(cluster.registration(topic, p).leader in (1, 2, 3) for p in (0, 1)),
                           20.0, "the topic's partitions to have leaders")
    assert len(await asyncio.to_thread(produce, cluster.bootstrap, topic, values("v", 50))) == 50


async def test_sigkill_of_the_active_controller_and_a_leader_broker_moves_leadership(cluster):
    topic = "controller-and-broker"
    await cluster.create_topic(topic, ASSIGNMENT, MIN_ISR_2)
    await cluster.wait_for(lambda: leaders(cluster, topic)[0][0] == 1, 20.0, "broker 1 to lead partition 0")
    assert len(await asyncio.to_thread(produce, cluster.bootstrap, topic, values("before", 50))) == 50
    before = leaders(cluster, topic)
    moved = [p for p, (leader, _) in before.items() if leader == 1]
    killed_at = time.monotonic()
    killed, epoch = await kill_active_controller(cluster)
    await cluster.kill(1)
    await cluster.wait_for(lambda: all(cluster.registration(topic, p).leader in (2, 3) for p in moved),
                           MOVE_DEADLINE_S, "leadership to move off the killed broker")
    print(f"controller {killed} and broker 1 killed -> partitions {moved} led by "
          f"{[cluster.registration(topic, p).leader for p in moved]} after {time.monotonic() - killed_at:.2f} s")
    for p in moved:
        assert cluster.registration(topic, p).leader_epoch > before[p][1]
        acked = await asyncio.to_thread(produce, cluster.bootstrap, topic, values(f"after-{p}", 50), partition=p)
        assert len(acked) == 50


async def test_an_isolated_active_controller_is_replaced_and_catches_up_once_healed(cluster):
    first = await cluster.quorum_processes.wait_for_leader(FAILOVER_DEADLINE_S)
    cluster.isolate_controller(first.leader_id)
    # Its followers stop hearing from it and elect another; it stops hearing their fetches and resigns.
    new = await cluster.quorum_processes.wait_for_leader(FAILOVER_DEADLINE_S, not_id=first.leader_id,
                                                         above_epoch=first.leader_epoch)
    await wait_for_brokers_at(cluster, new, FAILOVER_DEADLINE_S)
    await cluster.create_topic("while-isolated", {0: [1, 2, 3]}, MIN_ISR_2)  # the new leader decides alone
    cluster.heal_controller(first.leader_id)
    deadline = time.monotonic() + FAILOVER_DEADLINE_S
    while True:  # the old leader follows the new one and fetches what it missed
        info = await cluster.quorum_processes.describe()
        if info is not None and info.leader_epoch >= new.leader_epoch and all(
                info.lag(v) == 0 for v in info.voters):
            break
        assert time.monotonic() < deadline, f"the healed controller never caught up: {info}"
        await asyncio.sleep(0.2)  # poll interval
    assert first.leader_id in {v.replica_id for v in info.voters}
    assert len(await asyncio.to_thread(produce, cluster.bootstrap, "while-isolated", values("v", 20))) == 20
