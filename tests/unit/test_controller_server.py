"""ClusterController in-process with the real protocol: fake brokers register, heartbeat and record what it
pushes, partition leaders talk AlterPartition to it over authenticated connections, and a restarted
controller replays its metadata log. Sessions use a fake clock; test_controller_sessions.py has the
fencing and controlled-shutdown cases.

The helpers above the tests are shared with test_controller_sessions.py."""

import asyncio
import uuid
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from replog.client.connection import Connection
from replog.client.errors import KafkaError
from replog.controller.broker_requests import EPOCH_DURING_DELETE
from replog.controller.channel import ChannelConfig
from replog.controller.cluster import ControllerError
from replog.controller.handlers import CONTROLLER_APIS
from replog.controller.heartbeats import HeartbeatAnswer
from replog.controller.propagation import PropagationError
from replog.controller.server import (
    FIRST_CONTROLLER_EPOCH,
    ClusterController,
    ControllerConfig,
)
from replog.protocol.apis import ApiKey, response_header_version
from replog.protocol.headers import decode_response_header
from replog.protocol.messages import decode_request, encode_request
from replog.raft import codec
from replog.raft.messages import DescribeQuorumRequest
from replog.server.inter_broker import open_inter_broker_connection

from .test_controller_fakes import HOST, SECRET, FakeBroker, FakeClock, connect_as_controller, wait_until

LAI, UM, SR = ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA
FAST = ChannelConfig(retry_backoff_ms=5, retry_backoff_max_ms=20)
CONTROLLER_ID = 3000
SESSION_MS = 9_000


# ------------------------------------------------------------------------------------------- helpers


def config(log_dir: Path, **overrides) -> ControllerConfig:
    values = {"inter_broker_secret": SECRET, "metadata_log_dir": log_dir, "controller_id": CONTROLLER_ID,
              "channel": FAST, "propagation_timeout_ms": 5_000, "broker_session_timeout_ms": SESSION_MS}
    return ControllerConfig(**(values | overrides))


class Controllers:
    """Starts controllers on a fake clock, each with brokers that register and get unfenced; stops them all."""

    def __init__(self, log_dir: Path, clock: FakeClock) -> None:
        self.log_dir = log_dir
        self.clock = clock
        self.started: list[ClusterController] = []

    async def start(self, *joining: FakeBroker, log_dir: Path | None = None, connect=None,
                    **overrides) -> ClusterController:
        controller = ClusterController(config(log_dir or self.log_dir, **overrides), connect=connect,
                                       clock_ms=self.clock)
        await controller.start()
        self.started.append(controller)
        for fake in joining:
            join(controller, fake)
        await controller.settle()
        return controller

    async def stop_all(self) -> None:
        for controller in self.started:
            await controller.stop()


def join(controller: ClusterController, fake: FakeBroker, incarnation: uuid.UUID | None = None) -> int:
    """Register the broker and unfence it with its first heartbeat, as a starting broker does."""
    epoch = controller.register_broker(fake.broker_id, incarnation or uuid.uuid4(), HOST, fake.port)
    assert heartbeat(controller, fake.broker_id) == HeartbeatAnswer(is_fenced=False, should_shut_down=False)
    return epoch


def epoch_of(controller: ClusterController, broker_id: int) -> int:
    return controller.metadata.brokers[broker_id].epoch


def heartbeat(controller: ClusterController, broker_id: int, *, want_fence: bool = False,
              want_shutdown: bool = False) -> HeartbeatAnswer:
    """A heartbeat with the broker's current epoch."""
    return controller.broker_heartbeat(broker_id, epoch_of(controller, broker_id), want_fence=want_fence,
                                       want_shutdown=want_shutdown)


def let_sessions_expire(controller: ClusterController, clock: FakeClock, *silent: int) -> list[int]:
    """A session timeout passes in which every unfenced broker but `silent` heartbeats; then the periodic
    check runs. Returns the brokers it fenced. No await in between: the background check cannot interleave."""
    clock.advance(SESSION_MS + 1)
    for broker in list(controller.metadata.brokers.values()):
        if broker.broker_id not in silent and broker.is_active:
            heartbeat(controller, broker.broker_id)
    return controller.fence_expired_brokers()


def forget_requests(brokers) -> None:
    for fake in brokers.values():
        fake.received.clear()


def apis(fake: FakeBroker) -> list[ApiKey]:
    return [key for key, _ in fake.received]


def partition_states(request) -> dict[tuple[str, int], object]:
    return {(t.topic_name, p.partition_index): p for t in request.topic_states for p in t.partition_states}


def live_broker_ids(update_metadata) -> list[int]:
    return [b.id for b in update_metadata.live_brokers]


def alter_partition_request(topic_id: uuid.UUID, index: int, new_isr: list[int], *, broker_id: int = 1,
                            broker_epoch: int, leader_epoch: int = 0, partition_epoch: int = 0,
                            leader_recovery_state: int = 0) -> dict:
    """An AlterPartition v2 body."""
    return {"broker_id": broker_id, "broker_epoch": broker_epoch, "topics": [{"topic_id": topic_id, "partitions": [
        {"partition_index": index, "leader_epoch": leader_epoch, "new_isr": new_isr,
         "leader_recovery_state": leader_recovery_state, "partition_epoch": partition_epoch}]}]}


def decoded(api_key: ApiKey, version: int, body: dict):
    """A request as the controller's handler sees it: encoded, then decoded with kio."""
    return decode_request(api_key, version, encode_request(api_key, version, body), 0)


# ------------------------------------------------------------------------------------------ fixtures


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def brokers():
    fakes = {i: await FakeBroker(i).start() for i in (1, 2, 3)}
    yield fakes
    for fake in fakes.values():
        await fake.stop()


@pytest.fixture
async def controllers(tmp_path, clock):
    started = Controllers(tmp_path / "metadata", clock)
    yield started
    await started.stop_all()


@pytest.fixture
async def controller(controllers, brokers):
    return await controllers.start(*brokers.values())


# ------------------------------------------------------------------------------------ propagation


async def test_unfenced_brokers_get_metadata_naming_every_live_broker(controller, brokers):
    for broker_id, fake in brokers.items():
        last = fake.requests(UM)[-1]
        assert (last.controller_id, last.controller_epoch, last.type) == (CONTROLLER_ID, FIRST_CONTROLLER_EPOCH, 2)
        assert last.broker_epoch == epoch_of(controller, broker_id)
        assert [(b.id, b.endpoints[0].host, b.endpoints[0].port) for b in last.live_brokers] == \
            [(i, HOST, brokers[i].port) for i in (1, 2, 3)]
        assert fake.requests(LAI) == []  # no partitions yet
    assert controller.metadata.active_broker_ids() == [1, 2, 3]


async def test_create_topic_tells_each_replica_and_every_broker(controller, brokers):
    forget_requests(brokers)
    topic = await controller.create_topic("orders", {0: [1, 2], 1: [2, 3]}, {"min.insync.replicas": "2"})
    assert [apis(brokers[i]) for i in (1, 2, 3)] == [[LAI, UM]] * 3  # LeaderAndIsr first, on every broker
    (to_2,) = brokers[2].requests(LAI)
    assert (to_2.controller_id, to_2.controller_epoch) == (CONTROLLER_ID, FIRST_CONTROLLER_EPOCH)
    assert to_2.broker_epoch == epoch_of(controller, 2)
    assert [(t.topic_name, t.topic_id, t.configs) for t in to_2.topic_states] == \
        [("orders", topic.topic_id, {"min.insync.replicas": "2"})]
    states = partition_states(to_2)
    assert set(states) == {("orders", 0), ("orders", 1)}
    p1 = states[("orders", 1)]
    assert (p1.leader, p1.isr, p1.replicas, p1.leader_epoch, p1.partition_epoch, p1.is_new) == \
        (2, [2, 3], [2, 3], 0, 0, True)
    assert sorted((leader.broker_id, leader.port) for leader in to_2.live_leaders) == \
        [(1, brokers[1].port), (2, brokers[2].port)]
    (to_3,) = brokers[3].requests(LAI)
    assert set(partition_states(to_3)) == {("orders", 1)}
    assert [leader.broker_id for leader in to_3.live_leaders] == [2]
    (metadata,) = brokers[1].requests(UM)
    assert [(t.topic_name, len(t.partition_states)) for t in metadata.topic_states] == [("orders", 2)]


@pytest.mark.parametrize(("partitions", "replication_factor", "error"), [
    (0, None, ErrorCode.invalid_partitions),
    (None, 0, ErrorCode.invalid_replication_factor),
], ids=["zero partitions", "zero replicas"])
async def test_create_topic_refuses_zero_partitions_or_replicas_instead_of_taking_the_default(
        controller, brokers, partitions, replication_factor, error):
    with pytest.raises(ControllerError) as refused:
        await controller.create_topic("zero", partitions=partitions, replication_factor=replication_factor)
    assert refused.value.error_code == error
    assert "zero" not in controller.metadata.topics


async def test_a_partition_error_is_raised_with_broker_and_partition(controller, brokers, clock):
    await controller.create_topic("t", {0: [1, 2], 1: [2, 1]})
    brokers[2].partition_error[("t", 0)] = ErrorCode.kafka_storage_error
    assert let_sessions_expire(controller, clock, 1) == [1]  # broker 2 takes over t-0
    with pytest.raises(PropagationError) as raised:
        await controller.settle()
    assert [(f.broker_id, f.api, f.partition, f.error) for f in raised.value.failures] == \
        [(2, "LEADER_AND_ISR", "t-0", "KAFKA_STORAGE_ERROR")]
    assert controller.registration("t", 0).leader == 2  # decided; the broker must be fixed or resynced


async def test_a_stale_partition_answer_means_the_broker_already_has_it(controller, brokers, clock):
    await controller.create_topic("t", {0: [1, 2]})
    assert let_sessions_expire(controller, clock, 2) == [2]
    await controller.settle()
    brokers[2].partition_error[("t", 0)] = ErrorCode.stale_controller_epoch
    forget_requests(brokers)
    heartbeat(controller, 2)  # back: resynced
    await controller.settle()  # no error: the broker has this state already
    assert partition_states(brokers[2].requests(LAI)[0])[("t", 0)].isr == [1]


async def test_a_stale_controller_epoch_for_the_whole_request_is_raised(controller, brokers):
    brokers[3].request_error[UM] = ErrorCode.stale_controller_epoch
    with pytest.raises(PropagationError) as raised:
        await controller.create_topic("t", {0: [1]})
    assert [(f.broker_id, f.api, f.partition, f.error) for f in raised.value.failures] == \
        [(3, "UPDATE_METADATA", None, "STALE_CONTROLLER_EPOCH")]


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
    with pytest.raises(ControllerError) as raised:
        await controller.delete_topic("gone")
    assert raised.value.error_code == ErrorCode.unknown_topic_or_partition


async def test_a_broker_back_from_silence_is_resynced_with_all_its_partitions(controller, brokers, clock):
    await controller.create_topic("a", {0: [1, 2], 1: [2, 3]})
    await controller.create_topic("b", {0: [3, 2]})
    assert let_sessions_expire(controller, clock, 2) == [2]
    await controller.settle()
    forget_requests(brokers)
    assert heartbeat(controller, 2) == HeartbeatAnswer(is_fenced=False, should_shut_down=False)
    await controller.settle()
    assert apis(brokers[1]) == apis(brokers[3]) == [UM]  # nothing changed for them but broker 2's liveness
    assert apis(brokers[2]) == [LAI, UM]
    resync = partition_states(brokers[2].requests(LAI)[0])
    assert set(resync) == {("a", 0), ("a", 1), ("b", 0)}
    assert (resync[("a", 1)].leader, resync[("a", 1)].isr) == (3, [3])  # what it missed while fenced
    assert live_broker_ids(brokers[1].requests(UM)[-1]) == [1, 2, 3]


async def test_a_restarted_broker_on_a_new_port_is_resynced_by_its_registration(controller, brokers, clock):
    await controller.create_topic("t", {0: [1, 2]})
    old_epoch = epoch_of(controller, 2)
    await brokers[2].stop()
    assert let_sessions_expire(controller, clock, 2) == [2]
    restarted = brokers[2] = await FakeBroker(2).start()
    epoch = controller.register_broker(2, uuid.uuid4(), HOST, restarted.port)
    assert epoch > old_epoch
    await controller.settle()
    assert apis(restarted) == [LAI, UM]  # registered, still fenced: its partitions and the metadata
    assert set(partition_states(restarted.requests(LAI)[0])) == {("t", 0)}
    assert restarted.requests(LAI)[0].broker_epoch == epoch
    assert live_broker_ids(restarted.requests(UM)[0]) == [1, 3]  # not itself: it is fenced
    heartbeat(controller, 2)
    await controller.settle()
    ports = {b.id: b.endpoints[0].port for b in brokers[1].requests(UM)[-1].live_brokers}
    assert ports[2] == restarted.port


async def test_a_fenced_broker_leaves_metadata_and_cannot_get_replicas(controller, brokers, clock):
    assert let_sessions_expire(controller, clock, 3) == [3]
    await controller.settle()
    assert live_broker_ids(brokers[1].requests(UM)[-1]) == [1, 2]
    forget_requests(brokers)
    with pytest.raises(ControllerError) as raised:
        await controller.create_topic("t", {0: [3]})
    assert raised.value.error_code == ErrorCode.invalid_replica_assignment
    assert "t" not in controller.metadata.topics
    assert all(fake.received == [] for fake in brokers.values())


async def test_a_silent_broker_times_out_and_is_caught_up_when_it_returns(controllers, brokers):
    controller = await controllers.start(brokers[1], propagation_timeout_ms=200)
    port = brokers[1].port
    await brokers[1].stop()
    forget_requests(brokers)
    with pytest.raises(PropagationError) as raised:
        await controller.create_topic("t", {0: [1]})
    assert {(f.api, f.error) for f in raised.value.failures} == \
        {("LEADER_AND_ISR", "no answer within 200 ms"), ("UPDATE_METADATA", "no answer within 200 ms")}
    await brokers[1].start(port)
    await wait_until(lambda: apis(brokers[1]) == [LAI, UM], "the queued requests to arrive")


# ----------------------------------------------------------------------------------- controller restart


async def test_a_restarted_controller_replays_its_log_and_takes_the_next_epoch(controllers, brokers, clock):
    first = await controllers.start(*brokers.values())
    await first.create_topic("a", {0: [1, 2, 3], 1: [2, 3, 1]}, {"retention.ms": "60000"})
    await first.create_topic("gone", {0: [1]})
    await first.delete_topic("gone")
    assert let_sessions_expire(first, clock, 3) == [3]
    topic = first.metadata.topics["a"]
    response = first.alter_partition(decoded(ApiKey.ALTER_PARTITION, 2, alter_partition_request(
        topic.topic_id, 0, [1], broker_epoch=epoch_of(first, 1), partition_epoch=1)), 2)
    assert response["topics"][0]["partitions"][0]["error_code"] == ErrorCode.none
    await first.settle()
    before = {p.partition: p for p in topic.partitions.values()}
    registered = dict(first.metadata.brokers)
    assert registered[3].fenced and not registered[1].fenced
    await first.stop()
    forget_requests(brokers)

    second = await controllers.start()  # the same metadata log directory
    assert second.controller_epoch == FIRST_CONTROLLER_EPOCH + 1
    assert second.metadata.brokers == registered  # epochs, incarnations, addresses, fenced flags
    assert set(second.metadata.topics) == {"a"}
    replayed = second.metadata.topics["a"]
    assert (replayed.topic_id, replayed.configs) == (topic.topic_id, {"retention.ms": "60000"})
    assert replayed.partitions == before  # leaders, ISRs, both epochs
    assert (before[0].isr, before[0].partition_epoch) == ((1,), 2)

    # The unfenced brokers are resynced under the new epoch; the fenced one hears nothing until it returns.
    assert apis(brokers[3]) == []
    for broker_id in (1, 2):
        assert apis(brokers[broker_id]) == [LAI, UM]
        (resync,) = brokers[broker_id].requests(LAI)
        assert set(partition_states(resync)) == {("a", 0), ("a", 1)}
        assert resync.controller_epoch == FIRST_CONTROLLER_EPOCH + 1
        assert resync.broker_epoch == registered[broker_id].epoch
        assert brokers[broker_id].requests(UM)[0].controller_epoch == FIRST_CONTROLLER_EPOCH + 1
    # Sessions go on with the same broker epochs.
    assert heartbeat(second, 1) == HeartbeatAnswer(is_fenced=False, should_shut_down=False)
    assert heartbeat(second, 3) == HeartbeatAnswer(is_fenced=False, should_shut_down=False)  # back
    await second.settle()
    forget_requests(brokers)
    await second.create_topic("b", {0: [1, 2]})
    for fake in brokers.values():
        for _, request in fake.received:
            assert request.controller_epoch == FIRST_CONTROLLER_EPOCH + 1
    lai = brokers[1].requests(LAI)[-1]
    assert partition_states(lai)[("b", 0)].controller_epoch == FIRST_CONTROLLER_EPOCH + 1
    # New registrations get epochs above every earlier one: offsets continue across the restart.
    assert second.register_broker(4, uuid.uuid4(), HOST, 9) > max(b.epoch for b in registered.values())


async def test_a_third_start_takes_a_third_epoch(controllers, brokers):
    first = await controllers.start(brokers[1])
    await first.stop()
    second = await controllers.start()
    await second.stop()
    third = await controllers.start()
    assert third.controller_epoch == FIRST_CONTROLLER_EPOCH + 2
    assert not third.metadata.brokers[1].fenced


async def test_a_running_controller_snapshots_its_metadata_and_a_restart_replays_the_snapshot(
        controllers, brokers, tmp_path):
    # KIP-630: a snapshot once metadata.log.max.record.bytes.between.snapshots have committed since the last.
    first = await controllers.start(*brokers.values(), metadata_snapshot_max_bytes=2_000)
    quorum_dir = tmp_path / "metadata" / "__cluster_metadata-0"
    snapshots_at_start = sorted(quorum_dir.glob("*.checkpoint"))
    for i in range(10):
        await first.create_topic(f"t{i}", {0: [1, 2, 3]})
    await wait_until(lambda: sorted(quorum_dir.glob("*.checkpoint")) != snapshots_at_start, "a new snapshot")
    topics, registered = dict(first.metadata.topics), dict(first.metadata.brokers)
    await first.stop()
    second = await controllers.start()
    assert second.metadata.topics == topics and second.metadata.brokers == registered


async def test_controllers_with_other_log_dirs_start_afresh(controllers, brokers, tmp_path):
    first = await controllers.start(brokers[1])
    await first.create_topic("t", {0: [1]})
    other = await controllers.start(log_dir=tmp_path / "other")
    assert (other.controller_epoch, other.metadata.brokers, other.metadata.topics) == (FIRST_CONTROLLER_EPOCH, {}, {})


# ------------------------------------------------------------------------------ AlterPartition over the wire


@pytest.fixture
async def leader_connection(controller):
    connection = await connect_as_controller(HOST, controller.port)  # the inter-broker principal
    yield connection
    connection.close()


async def test_controller_advertises_its_apis(controller, leader_connection):
    assert set(leader_connection.api_versions) == set(CONTROLLER_APIS)


async def test_the_controller_describes_its_quorum_of_one_on_its_listener(controller, leader_connection):
    # KIP-595 DescribeQuorum, as kafka-metadata-quorum asks it: the controller leads its quorum of one, in the
    # controller epoch, with everything committed.
    api_key, version, body = codec.encode_request(DescribeQuorumRequest())
    frame = await leader_connection.request(api_key, version, [body])
    _, offset = decode_response_header(frame, response_header_version(api_key, version))
    described = codec.decode_response(api_key, version, bytes(frame[offset:]))
    assert (described.error_code, described.leader_id, described.leader_epoch) == (
        ErrorCode.none, CONTROLLER_ID, controller.controller_epoch)
    assert [voter.replica_id for voter in described.current_voters] == [CONTROLLER_ID]
    assert described.high_watermark == described.current_voters[0].log_end_offset > 0


async def test_alter_partition_shrinks_the_isr_and_pushes_metadata(controller, brokers, leader_connection):
    topic = await controller.create_topic("t", {0: [1, 2, 3]})
    forget_requests(brokers)
    response = await leader_connection.send(ApiKey.ALTER_PARTITION, alter_partition_request(
        topic.topic_id, 0, [1, 2], broker_epoch=epoch_of(controller, 1)), version=2)
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


@pytest.fixture
async def led_by_1_at_epoch_1(controller, brokers, clock):
    """Topic t-0 with replicas [2, 1, 3]: broker 2 fenced and back, so 1 leads with ISR (1, 3), both epochs 1."""
    topic = await controller.create_topic("t", {0: [2, 1, 3]})
    assert let_sessions_expire(controller, clock, 2) == [2]
    heartbeat(controller, 2)
    await controller.settle()
    registration = controller.registration("t", 0)
    assert (registration.leader, registration.isr, registration.leader_epoch, registration.partition_epoch) == \
        (1, (1, 3), 1, 1)
    return topic


ERRORS = [
    ("stale partition epoch", {"partition_epoch": 0}, ErrorCode.invalid_update_version),
    ("old leader epoch", {"leader_epoch": 0}, ErrorCode.fenced_leader_epoch),
    ("not the leader", {"broker_id": 3}, ErrorCode.invalid_request),
    ("leader left out", {"new_isr": [2, 3]}, ErrorCode.invalid_request),
    ("not a replica", {"new_isr": [1, 4]}, ErrorCode.invalid_request),
    ("recovering with others", {"leader_recovery_state": 1}, ErrorCode.invalid_request),
]


@pytest.mark.parametrize(("changes", "error"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
async def test_alter_partition_errors_change_nothing(controller, led_by_1_at_epoch_1, leader_connection,
                                                     changes, error):
    before = controller.registration("t", 0)
    request = {"new_isr": [1, 2], "leader_epoch": 1, "partition_epoch": 1, "broker_id": 1} | changes
    body = alter_partition_request(led_by_1_at_epoch_1.topic_id, 0, request.pop("new_isr"),
                                   broker_epoch=epoch_of(controller, request["broker_id"]), **request)
    response = await leader_connection.send(ApiKey.ALTER_PARTITION, body, version=2)
    assert response.error_code == ErrorCode.none
    assert response.topics[0].partitions[0].error_code == error
    assert controller.registration("t", 0) == before


async def test_alter_partition_accepts_a_returned_broker(controller, led_by_1_at_epoch_1, leader_connection):
    # The same request as above without the faults: the errors come from the faults alone.
    body = alter_partition_request(led_by_1_at_epoch_1.topic_id, 0, [1, 2], broker_epoch=epoch_of(controller, 1),
                                   leader_epoch=1, partition_epoch=1)
    response = await leader_connection.send(ApiKey.ALTER_PARTITION, body, version=2)
    assert response.topics[0].partitions[0].error_code == ErrorCode.none
    assert (controller.registration("t", 0).isr, controller.registration("t", 0).partition_epoch) == ((1, 2), 2)


@pytest.mark.parametrize(("broker_id", "broker_epoch"), [(7, 0), (1, -1), (1, "other")])
async def test_alter_partition_from_an_unknown_broker_or_epoch_is_stale(controller, leader_connection, broker_id,
                                                                       broker_epoch):
    topic = await controller.create_topic("t", {0: [1, 2, 3]})
    if broker_epoch == "other":
        broker_epoch = epoch_of(controller, 2)
    response = await leader_connection.send(ApiKey.ALTER_PARTITION, alter_partition_request(
        topic.topic_id, 0, [1], broker_id=broker_id, broker_epoch=broker_epoch), version=2)
    assert (response.error_code, response.topics) == (ErrorCode.stale_broker_epoch, ())
    assert controller.registration("t", 0).isr == (1, 2, 3)


async def test_alter_partition_v3_is_served(controller, leader_connection):
    topic = await controller.create_topic("t", {0: [1, 2, 3]})
    body = {"broker_id": 1, "broker_epoch": epoch_of(controller, 1), "topics": [{"topic_id": topic.topic_id,
            "partitions": [{"partition_index": 0, "leader_epoch": 0, "leader_recovery_state": 0, "partition_epoch": 0,
                            "new_isr_with_epochs": [{"broker_id": 1, "broker_epoch": epoch_of(controller, 1)},
                                                    {"broker_id": 3, "broker_epoch": epoch_of(controller, 3)}]}]}]}
    response = await leader_connection.send(ApiKey.ALTER_PARTITION, body, version=3)
    assert response.topics[0].partitions[0].error_code == ErrorCode.none
    assert list(response.topics[0].partitions[0].isr) == [1, 3]


async def test_alter_partition_needs_the_inter_broker_principal(controller):
    topic = await controller.create_topic("t", {0: [1, 2, 3]})
    anonymous = Connection(HOST, controller.port)
    await anonymous.connect()
    try:
        response = await anonymous.send(ApiKey.ALTER_PARTITION, alter_partition_request(
            topic.topic_id, 0, [1], broker_epoch=epoch_of(controller, 1)), version=2)
    finally:
        anonymous.close()
    assert (response.error_code, response.topics) == (ErrorCode.cluster_authorization_failed, ())
    assert controller.registration("t", 0).isr == (1, 2, 3)


async def test_a_wrong_secret_does_not_authenticate(controller):
    with pytest.raises(KafkaError) as raised:
        await open_inter_broker_connection(HOST, controller.port, client_id="intruder", username="broker-1",
                                           secret="wrong", request_timeout_ms=5_000)
    assert raised.value.code == ErrorCode.sasl_authentication_failed


# ------------------------------------------------------------------- broker sessions over the wire


def registration_body(broker_id: int, port: int, *, incarnation: uuid.UUID | None = None,
                      cluster_id: str = "replog-cluster") -> dict:
    return {"broker_id": broker_id, "cluster_id": cluster_id, "incarnation_id": incarnation or uuid.uuid4(),
            "listeners": [{"name": "PLAINTEXT", "host": HOST, "port": port, "security_protocol": 0}],
            "features": [], "rack": "rack-a"}


def heartbeat_body(broker_id: int, broker_epoch: int, *, want_fence: bool = False,
                   want_shut_down: bool = False) -> dict:
    return {"broker_id": broker_id, "broker_epoch": broker_epoch, "current_metadata_offset": -1,
            "want_fence": want_fence, "want_shut_down": want_shut_down}


async def test_a_broker_registers_and_heartbeats_over_the_wire(controller, leader_connection, brokers):
    fourth = await FakeBroker(4).start()
    try:
        response = await leader_connection.send(ApiKey.BROKER_REGISTRATION, registration_body(4, fourth.port),
                                                version=0)
        assert response.error_code == ErrorCode.none
        assert response.broker_epoch == epoch_of(controller, 4) >= 0
        registered = controller.metadata.brokers[4]
        assert (registered.port, registered.rack, registered.fenced) == (fourth.port, "rack-a", True)

        answer = await leader_connection.send(ApiKey.BROKER_HEARTBEAT, heartbeat_body(4, response.broker_epoch,
                                                                                      want_fence=True), version=0)
        assert (answer.error_code, answer.is_fenced, answer.is_caught_up, answer.should_shut_down) == \
            (ErrorCode.none, True, False, False)
        answer = await leader_connection.send(ApiKey.BROKER_HEARTBEAT, heartbeat_body(4, response.broker_epoch),
                                              version=0)
        assert (answer.error_code, answer.is_fenced, answer.is_caught_up, answer.should_shut_down) == \
            (ErrorCode.none, False, True, False)
        assert not controller.metadata.brokers[4].fenced
        await controller.settle()
        assert live_broker_ids(brokers[1].requests(UM)[-1]) == [1, 2, 3, 4]

        answer = await leader_connection.send(ApiKey.BROKER_HEARTBEAT, heartbeat_body(4, response.broker_epoch - 1),
                                              version=0)
        assert answer.error_code == ErrorCode.stale_broker_epoch
        refused = await leader_connection.send(
            ApiKey.BROKER_REGISTRATION, registration_body(4, fourth.port, cluster_id="elsewhere"), version=0)
        assert (refused.error_code, refused.broker_epoch) == (ErrorCode.inconsistent_cluster_id, -1)
        refused = await leader_connection.send(ApiKey.BROKER_REGISTRATION, registration_body(4, fourth.port),
                                               version=0)  # another process while the session is alive
        assert refused.error_code == ErrorCode.duplicate_broker_registration
        assert epoch_of(controller, 4) == response.broker_epoch
    finally:
        await fourth.stop()


async def test_sessions_need_the_inter_broker_principal(controller):
    anonymous = Connection(HOST, controller.port)
    await anonymous.connect()
    try:
        response = await anonymous.send(ApiKey.BROKER_REGISTRATION, registration_body(4, 9), version=0)
        assert (response.error_code, response.broker_epoch) == (ErrorCode.cluster_authorization_failed, -1)
        answer = await anonymous.send(ApiKey.BROKER_HEARTBEAT,
                                      heartbeat_body(1, epoch_of(controller, 1), want_fence=True), version=0)
        assert answer.error_code == ErrorCode.cluster_authorization_failed
    finally:
        anonymous.close()
    assert 4 not in controller.metadata.brokers
    assert not controller.metadata.brokers[1].fenced  # the heartbeat's want_fence was not obeyed


# ------------------------------------------------------------------- topic administration over the wire


def create_topics_body(*topics: dict, validate_only: bool = False) -> dict:
    defaults = {"num_partitions": -1, "replication_factor": -1, "assignments": [], "configs": []}
    return {"topics": [defaults | t for t in topics], "timeout": 5_000, "validate_only": validate_only}


async def test_create_topics_over_the_wire(controller, brokers, leader_connection, clock):
    response = await leader_connection.send(ApiKey.CREATE_TOPICS, create_topics_body(
        {"name": "counted", "num_partitions": 3, "replication_factor": 2,
         "configs": [{"name": "retention.ms", "value": "1000"}]},
        {"name": "assigned", "assignments": [{"partition_index": 0, "broker_ids": [3, 1]}]},
        {"name": "defaults"},
        {"name": "too-many-replicas", "num_partitions": 1, "replication_factor": 4},
        {"name": "both", "num_partitions": 1, "assignments": [{"partition_index": 0, "broker_ids": [1]}]},
        {"name": "bad/name", "num_partitions": 1, "replication_factor": 1},
    ), version=7)
    results = {t.name: t for t in response.topics}
    counted = results["counted"]
    assert (counted.error_code, counted.num_partitions, counted.replication_factor) == (ErrorCode.none, 3, 2)
    assert counted.topic_id == controller.metadata.topics["counted"].topic_id
    assert [(c.name, c.value) for c in counted.configs] == [("retention.ms", "1000")]
    assert controller.metadata.topics["counted"].configs == {"retention.ms": "1000"}
    assert controller.registration("assigned", 0).replicas == (3, 1)
    assert (results["defaults"].num_partitions, results["defaults"].replication_factor) == (1, 1)  # the config's
    assert results["too-many-replicas"].error_code == ErrorCode.invalid_replication_factor
    assert results["both"].error_code == ErrorCode.invalid_request
    assert results["bad/name"].error_code == ErrorCode.invalid_topic_exception
    assert set(controller.metadata.topics) == {"counted", "assigned", "defaults"}
    # The answer came after the replicas had the topic.
    for replica in (3, 1):
        assert any(("assigned", 0) in partition_states(r) for r in brokers[replica].requests(LAI))

    again = await leader_connection.send(ApiKey.CREATE_TOPICS, create_topics_body(
        {"name": "counted", "num_partitions": 1, "replication_factor": 1},
        {"name": "checked", "num_partitions": 1, "replication_factor": 3}, validate_only=True), version=7)
    assert [(t.name, t.error_code) for t in again.topics] == \
        [("counted", ErrorCode.topic_already_exists), ("checked", ErrorCode.none)]
    assert "checked" not in controller.metadata.topics  # validate_only

    assert let_sessions_expire(controller, clock, 3) == [3]
    fewer = await leader_connection.send(ApiKey.CREATE_TOPICS, create_topics_body(
        {"name": "three", "num_partitions": 1, "replication_factor": 3}), version=7)
    assert fewer.topics[0].error_code == ErrorCode.invalid_replication_factor  # only 2 active brokers


async def test_delete_topics_over_the_wire(controller, brokers, leader_connection):
    by_name = await controller.create_topic("by-name", {0: [1, 2]})
    by_id = await controller.create_topic("by-id", {0: [3]})
    unknown_id = uuid.uuid4()
    response = await leader_connection.send(ApiKey.DELETE_TOPICS, {"topics": [
        {"name": "by-name", "topic_id": None}, {"name": None, "topic_id": by_id.topic_id},
        {"name": None, "topic_id": unknown_id}, {"name": "never", "topic_id": None}], "timeout": 5_000}, version=6)
    assert [(r.name, r.topic_id, r.error_code) for r in response.responses] == [
        ("by-name", None, ErrorCode.none), ("by-id", by_id.topic_id, ErrorCode.none),
        (None, unknown_id, ErrorCode.unknown_topic_id),
        ("never", None, ErrorCode.unknown_topic_or_partition)]
    assert controller.metadata.topics == {}
    assert by_name.name in {t.topic_name for t in brokers[1].requests(SR)[-1].topic_states}

    await controller.create_topic("old-style", {0: [1]})
    response = await leader_connection.send(ApiKey.DELETE_TOPICS, {"topic_names": ["old-style"], "timeout": 5_000},
                                            version=4)
    assert [(r.name, r.error_code) for r in response.responses] == [("old-style", ErrorCode.none)]
    assert controller.metadata.topics == {}


async def test_topic_administration_needs_the_inter_broker_principal(controller):
    await controller.create_topic("kept", {0: [1]})
    anonymous = Connection(HOST, controller.port)
    await anonymous.connect()
    try:
        created = await anonymous.send(ApiKey.CREATE_TOPICS, create_topics_body(
            {"name": "new", "num_partitions": 1, "replication_factor": 1}), version=7)
        deleted = await anonymous.send(ApiKey.DELETE_TOPICS, {"topics": [{"name": "kept", "topic_id": None}],
                                                              "timeout": 5_000}, version=6)
    finally:
        anonymous.close()
    assert [(t.name, t.error_code) for t in created.topics] == [("new", ErrorCode.cluster_authorization_failed)]
    assert [(r.name, r.error_code) for r in deleted.responses] == [("kept", ErrorCode.cluster_authorization_failed)]
    assert set(controller.metadata.topics) == {"kept"}


# ------------------------------------------------------------------------------------------------- stop


async def test_stop_closes_connections_and_the_listener(controllers, brokers):
    controller = await controllers.start(brokers[1])
    connection = await connect_as_controller(HOST, controller.port)
    port = controller.port
    await controller.stop()
    await wait_until(lambda: connection.closed, "the controller to close the connection")
    await wait_until(lambda: not brokers[1].connections, "the controller's connection to the broker to close")
    with pytest.raises(OSError):
        await asyncio.open_connection(HOST, port)


async def test_stop_ends_the_sender_of_a_fenced_broker_whose_connect_failed_as_it_was_cancelled(controllers, clock):
    # Python 3.11's asyncio.wait_for, which Connection.connect uses, returns the inner outcome instead of
    # raising CancelledError when both arrive together; the sender must not go on retrying after that.
    loop = asyncio.get_running_loop()
    attempts: list[asyncio.Future] = []

    async def connect(host: str, port: int) -> Connection:
        attempt = loop.create_future()
        attempts.append(attempt)
        return await asyncio.wait_for(attempt, 10)

    controller = await controllers.start(connect=connect)
    controller.register_broker(1, uuid.uuid4(), HOST, 9)
    heartbeat(controller, 1)
    await wait_until(lambda: attempts, "the channel to connect to broker 1")
    attempts[-1].set_exception(ConnectionRefusedError(111, "refused"))
    assert let_sessions_expire(controller, clock, 1) == [1]  # out of the channel: its sender is cancelled
    await asyncio.wait_for(controller.stop(), 5)
    assert len(attempts) == 1
