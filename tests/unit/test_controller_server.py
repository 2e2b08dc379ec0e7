"""ClusterController in-process with the real protocol: fake brokers record what it pushes, and partition
leaders talk AlterPartition to it over authenticated connections."""

import asyncio
import uuid

import pytest
from kio.schema.errors import ErrorCode

from replog.broker.inter_broker import open_inter_broker_connection
from replog.client.connection import Connection
from replog.client.errors import KafkaError
from replog.controller.broker_requests import EPOCH_DURING_DELETE
from replog.controller.channel import ChannelConfig
from replog.controller.cluster import ControllerError
from replog.controller.handlers import CONTROLLER_APIS
from replog.controller.propagation import PropagationError
from replog.controller.server import FIRST_CONTROLLER_EPOCH, ClusterController, ControllerConfig
from replog.protocol.apis import ApiKey

from .test_controller_fakes import HOST, SECRET, FakeBroker, connect_as_controller, wait_until

LAI, UM, SR = ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA
FAST = ChannelConfig(retry_backoff_ms=5, retry_backoff_max_ms=20)
CONTROLLER_ID = 3000


def config(**overrides) -> ControllerConfig:
    return ControllerConfig(inter_broker_secret=SECRET, controller_id=CONTROLLER_ID, channel=FAST,
                            propagation_timeout_ms=5_000, **overrides)


@pytest.fixture
async def brokers():
    fakes = {i: await FakeBroker(i).start() for i in (1, 2, 3)}
    yield fakes
    for fake in fakes.values():
        await fake.stop()


@pytest.fixture
async def controller(brokers):
    ctl = ClusterController(config())
    await ctl.start()
    for broker_id, fake in brokers.items():
        await ctl.add_broker(broker_id, HOST, fake.port)
    yield ctl
    await ctl.stop()


def forget_requests(brokers) -> None:
    for fake in brokers.values():
        fake.received.clear()


def apis(fake: FakeBroker) -> list[ApiKey]:
    return [key for key, _ in fake.received]


def partition_states(request) -> dict[tuple[str, int], object]:
    return {(t.topic_name, p.partition_index): p for t in request.topic_states for p in t.partition_states}


# ------------------------------------------------------------------------------------ propagation


async def test_add_broker_sends_metadata_naming_every_broker(controller, brokers):
    last = brokers[3].requests(UM)[-1]
    assert (last.controller_id, last.controller_epoch, last.type) == (CONTROLLER_ID, FIRST_CONTROLLER_EPOCH, 2)
    assert [(b.id, b.endpoints[0].host, b.endpoints[0].port) for b in last.live_brokers] == \
        [(i, HOST, brokers[i].port) for i in (1, 2, 3)]
    assert brokers[1].requests(LAI) == []  # no partitions yet


async def test_create_topic_tells_each_replica_and_every_broker(controller, brokers):
    forget_requests(brokers)
    topic = await controller.create_topic("orders", {0: [1, 2], 1: [2, 3]}, {"min.insync.replicas": "2"})
    assert [apis(brokers[i]) for i in (1, 2, 3)] == [[LAI, UM]] * 3  # LeaderAndIsr first, on every broker
    (to_2,) = brokers[2].requests(LAI)
    assert (to_2.controller_id, to_2.controller_epoch) == (CONTROLLER_ID, FIRST_CONTROLLER_EPOCH)
    assert [(t.topic_name, t.topic_id, t.configs) for t in to_2.topic_states] == \
        [("orders", topic.topic_id, {"min.insync.replicas": "2"})]
    states = partition_states(to_2)
    assert set(states) == {("orders", 0), ("orders", 1)}
    p1 = states[("orders", 1)]
    assert (p1.leader, p1.isr, p1.replicas, p1.leader_epoch, p1.partition_epoch, p1.is_new) == \
        (2, [2, 3], [2, 3], 0, 0, True)
    assert sorted((leader.broker_id, leader.port) for leader in to_2.live_leaders) == [(1, brokers[1].port), (2, brokers[2].port)]
    (to_3,) = brokers[3].requests(LAI)
    assert set(partition_states(to_3)) == {("orders", 1)}
    assert [leader.broker_id for leader in to_3.live_leaders] == [2]
    (metadata,) = brokers[1].requests(UM)
    assert [(t.topic_name, len(t.partition_states)) for t in metadata.topic_states] == [("orders", 2)]


async def test_elect_leader_bumps_epochs_and_tells_the_replicas(controller, brokers):
    await controller.create_topic("t", {0: [1, 2, 3]})
    forget_requests(brokers)
    changed = await controller.elect_leader("t", 0, 2, [2, 3])
    assert (changed.leader, changed.isr, changed.leader_epoch, changed.partition_epoch) == (2, (2, 3), 1, 1)
    assert controller.registration("t", 0) == changed
    for i in (1, 2, 3):
        (request,) = brokers[i].requests(LAI)
        state = partition_states(request)[("t", 0)]
        assert (state.leader, state.isr, state.leader_epoch, state.partition_epoch, state.is_new) == \
            (2, [2, 3], 1, 1, False)
        assert apis(brokers[i]) == [LAI, UM]
    (metadata,) = brokers[1].requests(UM)
    p = metadata.topic_states[0].partition_states[0]
    assert (p.leader, p.isr, p.leader_epoch, p.zk_version) == (2, [2, 3], 1, 1)


async def test_elect_leader_refuses_a_leader_outside_the_isr(controller, brokers):
    await controller.create_topic("t", {0: [1, 2, 3]})
    forget_requests(brokers)
    with pytest.raises(ControllerError) as raised:
        await controller.elect_leader("t", 0, 3, [1, 2])
    assert raised.value.error_code == ErrorCode.invalid_request
    assert all(fake.received == [] for fake in brokers.values())


async def test_set_isr_keeps_the_leader_epoch(controller, brokers):
    await controller.create_topic("t", {0: [1, 2, 3]})
    changed = await controller.set_isr("t", 0, [1, 3])
    state = partition_states(brokers[1].requests(LAI)[-1])[("t", 0)]
    assert (state.isr, state.leader_epoch, state.partition_epoch) == ([1, 3], 0, 1) == \
        (list(changed.isr), changed.leader_epoch, changed.partition_epoch)


async def test_a_partition_error_is_raised_with_broker_and_partition(controller, brokers):
    await controller.create_topic("t", {0: [1, 2], 1: [2, 1]})
    brokers[2].partition_error[("t", 0)] = ErrorCode.kafka_storage_error
    with pytest.raises(PropagationError) as raised:
        await controller.elect_leader("t", 0, 2)
    assert [(f.broker_id, f.api, f.partition, f.error) for f in raised.value.failures] == \
        [(2, "LEADER_AND_ISR", "t-0", "KAFKA_STORAGE_ERROR")]
    assert controller.registration("t", 0).leader == 2  # decided; the broker must be fixed or resynced


async def test_a_stale_partition_answer_means_the_broker_already_has_it(controller, brokers):
    await controller.create_topic("t", {0: [1, 2]})
    brokers[1].partition_error[("t", 0)] = ErrorCode.stale_controller_epoch
    await controller.resync_broker(1)  # no error: the broker has this state already


async def test_a_stale_controller_epoch_for_the_whole_request_is_raised(controller, brokers):
    brokers[3].request_error[UM] = ErrorCode.stale_controller_epoch
    with pytest.raises(PropagationError) as raised:
        await controller.create_topic("t", {0: [1]})
    assert [(f.broker_id, f.api, f.partition, f.error) for f in raised.value.failures] == \
        [(3, "UPDATE_METADATA", None, "STALE_CONTROLLER_EPOCH")]


async def test_bumped_controller_epoch_is_on_every_later_request(controller, brokers):
    assert controller.bump_controller_epoch() == FIRST_CONTROLLER_EPOCH + 1
    await controller.create_topic("t", {0: [1, 2]})
    lai = brokers[1].requests(LAI)[-1]
    assert lai.controller_epoch == FIRST_CONTROLLER_EPOCH + 1
    assert partition_states(lai)[("t", 0)].controller_epoch == FIRST_CONTROLLER_EPOCH + 1
    assert brokers[3].requests(UM)[-1].controller_epoch == FIRST_CONTROLLER_EPOCH + 1


async def test_delete_topic_stops_and_deletes_replicas_then_forgets_the_topic(controller, brokers):
    await controller.create_topic("gone", {0: [1, 2], 1: [2, 1]})
    await controller.create_topic("kept", {0: [3]})
    forget_requests(brokers)
    await controller.delete_topic("gone")
    assert [apis(brokers[i]) for i in (1, 2, 3)] == [[SR, UM], [SR, UM], [UM]]
    (stop,) = brokers[1].requests(SR)
    assert [(t.topic_name, [(p.partition_index, p.leader_epoch, p.delete_partition) for p in t.partition_states])
            for t in stop.topic_states] == [("gone", [(0, EPOCH_DURING_DELETE, True), (1, EPOCH_DURING_DELETE, True)])]
    assert [t.topic_name for t in brokers[3].requests(UM)[-1].topic_states] == ["kept"]
    with pytest.raises(ControllerError):
        controller.registration("gone", 0)


async def test_resync_sends_a_broker_all_its_partitions(controller, brokers):
    await controller.create_topic("a", {0: [1, 2], 1: [2, 3]})
    await controller.create_topic("b", {0: [3, 2]})
    forget_requests(brokers)
    await controller.resync_broker(2)
    assert apis(brokers[1]) == apis(brokers[3]) == []
    assert apis(brokers[2]) == [LAI, UM]
    assert set(partition_states(brokers[2].requests(LAI)[0])) == {("a", 0), ("a", 1), ("b", 0)}


async def test_a_restarted_broker_on_a_new_port_is_resynced_by_add_broker(controller, brokers):
    await controller.create_topic("t", {0: [1, 2]})
    await brokers[2].stop()
    restarted = brokers[2] = await FakeBroker(2).start()
    await controller.add_broker(2, HOST, restarted.port)
    assert set(partition_states(restarted.requests(LAI)[0])) == {("t", 0)}
    ports = {b.id: b.endpoints[0].port for b in brokers[1].requests(UM)[-1].live_brokers}
    assert ports[2] == restarted.port


async def test_remove_broker_tells_the_others(controller, brokers):
    await controller.remove_broker(3)
    assert [b.id for b in brokers[1].requests(UM)[-1].live_brokers] == [1, 2]
    with pytest.raises(ControllerError):
        await controller.create_topic("t", {0: [3]})


async def test_a_silent_broker_times_out_and_is_caught_up_when_it_returns(brokers):
    controller = ClusterController(ControllerConfig(inter_broker_secret=SECRET, channel=FAST,
                                                    propagation_timeout_ms=200))
    await controller.start()
    try:
        await controller.add_broker(1, HOST, brokers[1].port)
        port = brokers[1].port
        await brokers[1].stop()
        forget_requests(brokers)
        with pytest.raises(PropagationError) as raised:
            await controller.create_topic("t", {0: [1]})
        assert {(f.api, f.error) for f in raised.value.failures} == \
            {("LEADER_AND_ISR", "no answer within 200 ms"), ("UPDATE_METADATA", "no answer within 200 ms")}
        await brokers[1].start(port)
        await wait_until(lambda: apis(brokers[1]) == [LAI, UM], "the queued requests to arrive")
    finally:
        await controller.stop()


# ------------------------------------------------------------------------------ AlterPartition over the wire


def alter_partition_request(topic_id: uuid.UUID, index: int, new_isr: list[int], *, broker_id: int = 1,
                            leader_epoch: int = 0, partition_epoch: int = 0) -> dict:
    return {"broker_id": broker_id, "broker_epoch": -1, "topics": [{"topic_id": topic_id, "partitions": [
        {"partition_index": index, "leader_epoch": leader_epoch, "new_isr": new_isr, "leader_recovery_state": 0,
         "partition_epoch": partition_epoch}]}]}


@pytest.fixture
async def leader_connection(controller):
    connection = await connect_as_controller(HOST, controller.port)  # the inter-broker principal
    yield connection
    connection.close()


async def test_controller_advertises_its_apis(controller, leader_connection):
    assert set(leader_connection.api_versions) == set(CONTROLLER_APIS)


async def test_alter_partition_shrinks_the_isr_and_pushes_metadata(controller, brokers, leader_connection):
    topic = await controller.create_topic("t", {0: [1, 2, 3]})
    forget_requests(brokers)
    response = await leader_connection.send(ApiKey.ALTER_PARTITION,
                                            alter_partition_request(topic.topic_id, 0, [1, 2]), version=2)
    assert response.error_code == ErrorCode.none
    (answer,) = response.topics[0].partitions
    assert (answer.error_code, answer.leader_id, answer.leader_epoch, list(answer.isr), answer.partition_epoch) == \
        (ErrorCode.none, 1, 0, [1, 2], 1)
    registration = controller.registration("t", 0)
    assert (registration.isr, registration.partition_epoch) == ((1, 2), 1)

    def metadata_has_new_isr(fake: FakeBroker) -> bool:
        pushed = fake.requests(UM)
        return bool(pushed) and pushed[-1].topic_states[0].partition_states[0].isr == [1, 2]

    await wait_until(lambda: all(metadata_has_new_isr(b) for b in brokers.values()), "UpdateMetadata with the ISR")
    assert all(fake.requests(LAI) == [] for fake in brokers.values())  # the leader learnt it from the answer


ERRORS = [
    ("stale partition epoch", {"partition_epoch": 0}, ErrorCode.invalid_update_version),
    ("old leader epoch", {"leader_epoch": 0}, ErrorCode.fenced_leader_epoch),
    ("not the leader", {"broker_id": 2}, ErrorCode.invalid_request),
    ("leader left out", {"new_isr": [2, 3]}, ErrorCode.invalid_request),
    ("unregistered member", {"new_isr": [1, 4]}, ErrorCode.invalid_request),  # 4 is not even a replica
]


@pytest.mark.parametrize(("changes", "error"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
async def test_alter_partition_errors_change_nothing(controller, leader_connection, changes, error):
    topic = await controller.create_topic("t", {0: [1, 2, 3]})
    await controller.elect_leader("t", 0, 1)  # leader epoch 1, partition epoch 1
    before = controller.registration("t", 0)
    request = {"new_isr": [1, 2], "leader_epoch": 1, "partition_epoch": 1} | changes
    body = alter_partition_request(topic.topic_id, 0, request.pop("new_isr"), **request)
    response = await leader_connection.send(ApiKey.ALTER_PARTITION, body, version=2)
    assert response.topics[0].partitions[0].error_code == error
    assert controller.registration("t", 0) == before


async def test_alter_partition_with_a_removed_broker_in_the_isr_is_ineligible(controller, leader_connection):
    topic = await controller.create_topic("t", {0: [1, 2, 3]})
    await controller.remove_broker(3)
    response = await leader_connection.send(
        ApiKey.ALTER_PARTITION, alter_partition_request(topic.topic_id, 0, [1, 3]), version=2)
    assert response.topics[0].partitions[0].error_code == ErrorCode.ineligible_replica


async def test_alter_partition_from_an_unregistered_broker_is_stale(controller, leader_connection):
    topic = await controller.create_topic("t", {0: [1, 2, 3]})
    response = await leader_connection.send(
        ApiKey.ALTER_PARTITION, alter_partition_request(topic.topic_id, 0, [1], broker_id=7), version=2)
    assert (response.error_code, response.topics) == (ErrorCode.stale_broker_epoch, ())


async def test_alter_partition_v3_is_served(controller, leader_connection):
    topic = await controller.create_topic("t", {0: [1, 2, 3]})
    body = {"broker_id": 1, "broker_epoch": -1, "topics": [{"topic_id": topic.topic_id, "partitions": [
        {"partition_index": 0, "leader_epoch": 0, "leader_recovery_state": 0, "partition_epoch": 0,
         "new_isr_with_epochs": [{"broker_id": 1, "broker_epoch": -1}, {"broker_id": 3, "broker_epoch": -1}]}]}]}
    response = await leader_connection.send(ApiKey.ALTER_PARTITION, body, version=3)
    assert list(response.topics[0].partitions[0].isr) == [1, 3]


async def test_alter_partition_needs_the_inter_broker_principal(controller):
    topic = await controller.create_topic("t", {0: [1, 2, 3]})
    anonymous = Connection(HOST, controller.port)
    await anonymous.connect()
    try:
        response = await anonymous.send(ApiKey.ALTER_PARTITION,
                                        alter_partition_request(topic.topic_id, 0, [1]), version=2)
    finally:
        anonymous.close()
    assert (response.error_code, response.topics) == (ErrorCode.cluster_authorization_failed, ())
    assert controller.registration("t", 0).isr == (1, 2, 3)


async def test_a_wrong_secret_does_not_authenticate(controller):
    with pytest.raises(KafkaError) as raised:
        await open_inter_broker_connection(HOST, controller.port, client_id="intruder", username="broker-1",
                                           secret="wrong", request_timeout_ms=5_000)
    assert raised.value.code == ErrorCode.sasl_authentication_failed


async def test_stop_closes_connections_and_the_listener(brokers):
    controller = ClusterController(config())
    await controller.start()
    await controller.add_broker(1, HOST, brokers[1].port)
    connection = await connect_as_controller(HOST, controller.port)
    port = controller.port
    await controller.stop()
    await wait_until(lambda: connection.closed, "the controller to close the connection")
    await wait_until(lambda: not brokers[1].connections, "the controller's connection to the broker to close")
    with pytest.raises(OSError):
        await asyncio.open_connection(HOST, port)


async def test_resync_of_an_unknown_broker_is_refused(controller):
    with pytest.raises(ControllerError) as raised:
        await controller.resync_broker(9)
    assert raised.value.error_code == ErrorCode.broker_not_available
