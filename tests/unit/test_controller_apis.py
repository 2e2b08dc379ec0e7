"""The controller's APIs over authenticated connections: ApiVersions and DescribeQuorum, AlterPartition from
partition leaders, BrokerRegistration and BrokerHeartbeat, and the CreateTopics / DeleteTopics brokers
forward; each needs the inter-broker principal."""

import uuid

import pytest
from kio.schema.errors import ErrorCode

from replog.client.connection import Connection
from replog.client.errors import KafkaError
from replog.controller.handlers import CONTROLLER_APIS
from replog.protocol.apis import ApiKey, response_header_version
from replog.protocol.headers import decode_response_header
from replog.raft import codec
from replog.raft.messages import DescribeQuorumRequest
from replog.server.inter_broker import open_inter_broker_connection

from .controller_fixtures import (  # noqa: F401 (fixtures)
    CONTROLLER_ID,
    LAI,
    SR,
    UM,
    alter_partition_request,
    brokers,
    clock,
    controller,
    controllers,
    epoch_of,
    forget_requests,
    heartbeat,
    let_sessions_expire,
    live_broker_ids,
    partition_states,
)
from .test_controller_fakes import HOST, FakeBroker, connect_as_controller, wait_until


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
