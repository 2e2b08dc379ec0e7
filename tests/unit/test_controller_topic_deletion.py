"""Topic deletion and the state machines the controller moves as it works: a topic deleted while one of its
replicas' brokers is away stays marked for deletion, and that broker is told to delete its replicas when
it registers again; partition and replica states follow fencing, elections and deletion."""

import uuid

import pytest
from kio.schema.errors import ErrorCode

from replog.controller.cluster import ControllerError
from replog.controller.state_machines import PartitionReplica, PartitionState, ReplicaState
from replog.log.partition_log import TopicPartition
from replog.protocol.apis import ApiKey

from .controller_fixtures import (  # noqa: F401 (fixtures)
    SESSION_MS,
    brokers,
    clock,
    controller,
    controllers,
    heartbeat,
    let_sessions_expire,
)

SR = ApiKey.STOP_REPLICA
T0 = TopicPartition("doomed", 0)


async def test_states_follow_fencing_and_election(controller, clock):
    await controller.create_topic("doomed", {0: [1, 2]})
    states = controller.states
    assert states.partitions.state(T0) is PartitionState.ONLINE
    assert states.replicas.state(PartitionReplica(T0, 1)) is ReplicaState.ONLINE
    assert let_sessions_expire(controller, clock, 1) == [1]
    assert states.replicas.state(PartitionReplica(T0, 1)) is ReplicaState.OFFLINE
    assert states.partitions.state(T0) is PartitionState.ONLINE  # 2 leads now
    assert let_sessions_expire(controller, clock, 1, 2) == [2]
    assert states.partitions.state(T0) is PartitionState.OFFLINE  # no replica left to lead


async def test_a_replica_away_during_deletion_is_deleted_when_its_broker_returns(controller, brokers, clock):
    await controller.create_topic("doomed", {0: [1, 2, 3]})
    assert let_sessions_expire(controller, clock, 3) == [3]
    await controller.delete_topic("doomed")
    assert [r.topic_states[0].topic_name for r in brokers[1].requests(SR)] == ["doomed"]
    assert not brokers[3].requests(SR)
    states = controller.states
    assert states.partitions.state(T0) is PartitionState.NON_EXISTENT
    assert states.replicas.state(PartitionReplica(T0, 1)) is ReplicaState.NON_EXISTENT
    assert states.replicas.state(PartitionReplica(T0, 3)) is ReplicaState.DELETION_INELIGIBLE
    # The name is not free until every replica is gone (Kafka: "marked for deletion").
    with pytest.raises(ControllerError) as refused:
        await controller.create_topic("doomed", {0: [1, 2]})
    assert refused.value.error_code == ErrorCode.topic_already_exists
    clock.advance(SESSION_MS)
    controller.register_broker(3, uuid.uuid4(), "127.0.0.1", brokers[3].port)
    heartbeat(controller, 3)
    await controller.settle()
    stop = brokers[3].requests(SR)[-1]
    assert (stop.topic_states[0].topic_name, stop.topic_states[0].partition_states[0].delete_partition) == \
        ("doomed", True)
    assert states.replicas.state(PartitionReplica(T0, 3)) is ReplicaState.NON_EXISTENT
    await controller.create_topic("doomed", {0: [1, 2, 3]})  # free again

