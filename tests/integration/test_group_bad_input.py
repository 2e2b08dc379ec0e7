"""Bad group requests on real sockets (issue 15, item 7): each gets its Kafka error code, and the broker keeps
serving the group."""

import time

import pytest
from kio.schema.errors import ErrorCode

from replog.harness.broker_process import BrokerProcess
from replog.protocol.apis import ApiKey
from replog.protocol.records import build_batch
from tests.integration.test_bad_input import assert_broker_alive, create_topic, produce
from tests.raw_wire import RawConnection

GROUP = "bad-input"
TOPIC = "t"
METADATA_LIMIT = 1000
# ConsumerProtocol subscription v0 of topic "t", no user data.
SUBSCRIPTION = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"


@pytest.fixture
def port(tmp_path):
    process = BrokerProcess(tmp_path / "logs", output=tmp_path / "broker.out", overrides={
        "group.initial.rebalance.delay.ms": "0", "group.max.size": "2",
        "group.max.member.metadata.bytes": str(METADATA_LIMIT)})
    process.start()
    try:
        yield process.port
    finally:
        process.stop()


@pytest.fixture
def conn(port):
    connection = RawConnection(port)
    create_topic(connection, TOPIC)
    deadline = time.monotonic() + 10
    while True:  # the offsets topic is created by the first FindCoordinator, then loaded
        response = connection.call(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [GROUP]})
        if response.coordinators[0].error_code == ErrorCode.none or time.monotonic() > deadline:
            break
    assert response.coordinators[0].port == port
    yield connection
    connection.close()


def join(conn: RawConnection, member_id: str = "", metadata: bytes = SUBSCRIPTION, session_ms: int = 10_000):
    request = {"group_id": GROUP, "session_timeout": session_ms, "rebalance_timeout": 10_000,
               "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer",
               "protocols": [{"name": "range", "metadata": metadata}], "reason": None}
    deadline = time.monotonic() + 10
    while True:
        response = conn.call(ApiKey.JOIN_GROUP, 9, request)
        if response.error_code != ErrorCode.coordinator_load_in_progress or time.monotonic() > deadline:
            return response


def stable_member(conn: RawConnection) -> tuple[str, int]:
    """A one-member Stable group: (member id, generation)."""
    first = join(conn)
    assert first.error_code == ErrorCode.member_id_required
    joined = join(conn, first.member_id)
    assert joined.error_code == ErrorCode.none and joined.leader == joined.member_id
    synced = conn.call(ApiKey.SYNC_GROUP, 5, {
        "group_id": GROUP, "generation_id": joined.generation_id, "member_id": joined.member_id,
        "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
        "assignments": [{"member_id": joined.member_id, "assignment": b"assigned"}]})
    assert synced.error_code == ErrorCode.none and synced.assignment == b"assigned"
    return joined.member_id, joined.generation_id


def commit(conn: RawConnection, generation: int, member_id: str, group: str = GROUP) -> ErrorCode:
    response = conn.call(ApiKey.OFFSET_COMMIT, 9, {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member_id,
        "group_instance_id": None, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1,
             "committed_metadata": None}]}]})
    return response.topics[0].partitions[0].error_code


def heartbeat(conn: RawConnection, generation: int, member_id: str, group: str = GROUP) -> ErrorCode:
    return conn.call(ApiKey.HEARTBEAT, 4, {"group_id": group, "generation_id": generation,
                                           "member_id": member_id, "group_instance_id": None}).error_code


def test_stale_generation_and_unknown_member_are_refused(conn, port):
    member, generation = stable_member(conn)
    assert commit(conn, generation - 1, member) == ErrorCode.illegal_generation
    assert heartbeat(conn, generation + 1, member) == ErrorCode.illegal_generation
    assert commit(conn, generation, "someone-else") == ErrorCode.unknown_member_id
    assert heartbeat(conn, generation, "someone-else") == ErrorCode.unknown_member_id
    assert commit(conn, generation, member) == ErrorCode.none  # the member itself still commits
    assert heartbeat(conn, generation, member) == ErrorCode.none
    assert_broker_alive(port)


def test_unknown_group_answers(conn):
    assert heartbeat(conn, 1, "m", group="nobody") == ErrorCode.unknown_member_id
    assert commit(conn, 1, "m", group="nobody") == ErrorCode.illegal_generation
    deleted = conn.call(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["nobody"]})
    assert deleted.results[0].error_code == ErrorCode.group_id_not_found
    offset_delete = conn.call(ApiKey.OFFSET_DELETE, 0, {"group_id": "nobody", "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 0}]}]})
    assert offset_delete.error_code == ErrorCode.group_id_not_found
    described = conn.call(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["nobody"],
                                                       "include_authorized_operations": False})
    assert (described.groups[0].error_code, described.groups[0].group_state) == (ErrorCode.none, "Dead")
    fetched = conn.call(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": "nobody", "topics": [
        {"name": TOPIC, "partition_indexes": [0]}]}], "require_stable": False})
    partition = fetched.groups[0].topics[0].partitions[0]
    assert (fetched.groups[0].error_code, partition.committed_offset) == (ErrorCode.none, -1)


def test_oversized_metadata_bad_session_timeout_and_full_group_are_refused(conn, port):
    assert join(conn, metadata=b"x" * (METADATA_LIMIT + 1)).error_code == ErrorCode.invalid_request
    assert join(conn, session_ms=1).error_code == ErrorCode.invalid_session_timeout
    stable_member(conn)
    # A flood of first joins: each parks a KIP-394 member id; at most group.max.size (2) may wait at once.
    assert [join(conn).error_code for _ in range(3)] == [
        ErrorCode.member_id_required, ErrorCode.member_id_required, ErrorCode.group_max_size_reached]
    assert_broker_alive(port)


def test_transaction_coordinator_key_is_refused_with_a_message(conn):
    response = conn.call(ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["tx"]})
    (answer,) = response.coordinators
    assert answer.error_code == ErrorCode.invalid_request and "transaction" in answer.error_message


def test_commit_for_an_unknown_topic_is_refused(conn):
    response = conn.call(ApiKey.OFFSET_COMMIT, 2, {
        "group_id": "simple", "generation_id_or_member_epoch": -1, "member_id": "", "retention_time": -1,
        "topics": [{"name": "no-such-topic", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                              "committed_metadata": ""}]}]})
    assert response.topics[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition


def test_clients_cannot_write_to_the_offsets_topic(conn):
    """Kafka refuses appends to internal topics from clients: a record the coordinator could not decode would
    keep the partition's groups from loading."""
    batch = build_batch([(b"not a group key", b"junk", [], 0)])
    answer = produce(conn, "__consumer_offsets", 0, bytearray(batch))
    assert answer.error_code == ErrorCode.invalid_topic_exception
