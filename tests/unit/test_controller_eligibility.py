"""Fenced brokers and brokers in controlled shutdown are not eligible: AlterPartition may not name them (nor come
from a fenced former leader, nor name a member under a previous broker epoch, KIP-903), and new replicas are
assigned round-robin over the active brokers only."""

import collections
import uuid

import pytest
from kio.schema.errors import ErrorCode

from replog.controller.cluster import ControllerError

from .controller_fixtures import (  # noqa: F401 (fixtures)
    ALIVE,
    LAI,
    alter_partition,
    alter_partition_v3,
    brokers,
    clock,
    controller,
    controllers,
    epoch_of,
    heartbeat,
    let_sessions_expire,
    partition_states,
    state,
)
from .test_controller_fakes import HOST, FakeBroker

# ------------------------------------------------------------------------------ AlterPartition eligibility


async def test_alter_partition_naming_a_fenced_broker_is_ineligible(controller, brokers, clock):
    await controller.create_topic("t", {0: [1, 2, 3]})
    assert let_sessions_expire(controller, clock, 3) == [3]
    before = controller.registration("t", 0)
    assert alter_partition(controller, "t", [1, 2, 3]) == ErrorCode.ineligible_replica
    epochs = [(b, epoch_of(controller, b)) for b in (1, 2, 3)]
    assert alter_partition_v3(controller, "t", epochs) == ErrorCode.ineligible_replica
    assert controller.registration("t", 0) == before
    assert alter_partition(controller, "t", [1]) == ErrorCode.none  # eligible members only: accepted


async def test_alter_partition_naming_a_broker_in_controlled_shutdown_is_ineligible(controller, brokers):
    await controller.create_topic("t", {0: [1, 2, 3]})
    await controller.create_topic("u", {0: [3, 1]})  # so that broker 3 has leaderships to move
    assert heartbeat(controller, 3, want_shutdown=True) == ALIVE
    assert state(controller, "t") == (1, (1, 2), 0, 1)
    assert alter_partition(controller, "t", [1, 2, 3]) == ErrorCode.ineligible_replica
    assert state(controller, "t") == (1, (1, 2), 0, 1)


async def test_alter_partition_from_a_fenced_former_leader_is_refused(controller, brokers, clock):
    await controller.create_topic("t", {0: [1, 2]})
    old_epoch = epoch_of(controller, 1)
    assert let_sessions_expire(controller, clock, 1) == [1]
    after_fencing = controller.registration("t", 0)
    # Still registered with that epoch, but deposed: its leader epoch is old.
    assert alter_partition(controller, "t", [1, 2], broker_id=1, leader_epoch=0, partition_epoch=0) == \
        ErrorCode.fenced_leader_epoch
    # Even with the current epochs it is not the leader.
    assert alter_partition(controller, "t", [1, 2], broker_id=1) == ErrorCode.invalid_request
    controller.register_broker(1, uuid.uuid4(), HOST, brokers[1].port)  # restarted: a new broker epoch
    assert alter_partition(controller, "t", [1, 2], broker_id=1, broker_epoch=old_epoch) == \
        ErrorCode.stale_broker_epoch
    assert controller.registration("t", 0) == after_fencing


async def test_alter_partition_v3_refuses_a_member_seen_under_its_previous_epoch(controller, brokers, clock):
    await controller.create_topic("t", {0: [2, 1]})
    old_epoch = epoch_of(controller, 1)
    assert let_sessions_expire(controller, clock, 1) == [1]
    controller.register_broker(1, uuid.uuid4(), HOST, brokers[1].port)
    assert heartbeat(controller, 1) == ALIVE
    assert state(controller, "t") == (2, (2,), 0, 1)
    # The leader saw broker 1 fetch before it restarted (and maybe lost records): not that one.
    assert alter_partition_v3(controller, "t", [(2, epoch_of(controller, 2)), (1, old_epoch)]) == \
        ErrorCode.ineligible_replica
    assert alter_partition_v3(controller, "t", [(2, epoch_of(controller, 2)), (1, epoch_of(controller, 1))]) == \
        ErrorCode.none
    assert state(controller, "t") == (2, (2, 1), 0, 2)


# ----------------------------------------------------------------------------------- replica assignment


async def test_create_topic_assigns_round_robin_over_active_brokers_only(controller, brokers):
    fourth = await FakeBroker(4).start()
    try:
        controller.register_broker(4, uuid.uuid4(), HOST, fourth.port)  # registered, never unfenced
        await controller.settle()
        topic = await controller.create_topic("rr", partitions=6, replication_factor=2)
        assignment = {p.partition: p.replicas for p in topic.partitions.values()}
        assert all(set(replicas) <= {1, 2, 3} and len(replicas) == 2 for replicas in assignment.values())
        assert collections.Counter(r[0] for r in assignment.values()) == {1: 2, 2: 2, 3: 2}  # leaders spread
        assert collections.Counter(b for r in assignment.values() for b in r) == {1: 4, 2: 4, 3: 4}
        assert all(("rr", p) not in partition_states(r) for r in fourth.requests(LAI) for p in range(6))
        with pytest.raises(ControllerError) as raised:
            await controller.create_topic("wide", partitions=1, replication_factor=4)
        assert raised.value.error_code == ErrorCode.invalid_replication_factor  # 4 registered, 3 active
        default = await controller.create_topic("default")  # num.partitions 1, default.replication.factor 1
        assert [len(p.replicas) for p in default.partitions.values()] == [1]
        validated = await controller.create_topic("checked", partitions=2, replication_factor=3, validate_only=True)
        assert len(validated.partitions) == 2 and "checked" not in controller.metadata.topics
    finally:
        await fourth.stop()


async def test_a_fenced_broker_gets_no_replicas(controller, brokers, clock):
    assert let_sessions_expire(controller, clock, 2) == [2]
    topic = await controller.create_topic("rr", partitions=4, replication_factor=2)
    assert all(set(p.replicas) == {1, 3} for p in topic.partitions.values())
    assert collections.Counter(p.leader for p in topic.partitions.values()) == {1: 2, 3: 2}
    joined_again = heartbeat(controller, 2)
    assert joined_again == ALIVE
    topic = await controller.create_topic("all", partitions=3, replication_factor=3)
    assert all(set(p.replicas) == {1, 2, 3} for p in topic.partitions.values())
