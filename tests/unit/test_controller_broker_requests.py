"""The controller's requests to brokers, built from its state, and the errors read back from answers."""

from kio.schema.errors import ErrorCode

from replog.controller.broker_requests import (
    leader_and_isr_errors,
    leader_and_isr_request,
    stop_replica_errors,
    update_metadata_request,
)
from replog.controller.cluster import BrokerRegistration, ClusterMetadata
from replog.protocol import control


def cluster() -> ClusterMetadata:
    metadata = ClusterMetadata()
    for broker_id in (1, 2, 3):
        metadata.add_broker(BrokerRegistration(broker_id, "127.0.0.1", 9000 + broker_id))
    metadata.create_topic("t", {0: [1, 2], 1: [3, 1]}, {"retention.ms": "1000"})
    return metadata


def response_frame(body: bytes) -> bytearray:
    """A response frame as Connection.request returns it: correlation id, empty header tags (v1), body."""
    return bytearray(b"\x00\x00\x00\x07" + b"\x00" + body)


def test_leader_and_isr_names_only_live_leaders():
    metadata = cluster()
    metadata.remove_broker(3)  # leads partition 1
    request = leader_and_isr_request(3000, 4, metadata.brokers[1], metadata.topics["t"].partitions.values(),
                                     metadata)
    assert (request.controller_id, request.controller_epoch, request.broker_epoch) == (3000, 4, -1)
    assert [leader.broker_id for leader in request.live_leaders] == [1]
    assert request.topic_states[0].configs == {"retention.ms": "1000"}


def test_update_metadata_lists_replicas_of_unregistered_brokers_as_offline():
    metadata = cluster()
    metadata.remove_broker(3)
    request = update_metadata_request(3000, 4, metadata.brokers[1], metadata)
    offline = {p.partition_index: p.offline_replicas for p in request.topic_states[0].partition_states}
    assert offline == {0: [], 1: [3]}
    assert [b.id for b in request.live_brokers] == [1, 2]


def test_leader_and_isr_answer_missing_a_partition_is_an_error():
    metadata = cluster()
    request = leader_and_isr_request(3000, 1, metadata.brokers[1], metadata.topics["t"].partitions.values(),
                                     metadata)
    topic_id = metadata.topics["t"].topic_id
    partial = control.LeaderAndIsrResponse(ErrorCode.none, [control.LeaderAndIsrTopicError(
        topic_id, [control.LeaderAndIsrPartitionError(0, ErrorCode.none)])])
    frame = response_frame(control.encode_leader_and_isr_response(partial))
    assert leader_and_isr_errors(frame, request) == [(None, ErrorCode.unknown_server_error)]


def test_leader_and_isr_errors_name_the_partition_and_forgive_stale_ones():
    metadata = cluster()
    request = leader_and_isr_request(3000, 1, metadata.brokers[1], metadata.topics["t"].partitions.values(),
                                     metadata)
    topic_id = metadata.topics["t"].topic_id
    answer = control.LeaderAndIsrResponse(ErrorCode.none, [control.LeaderAndIsrTopicError(topic_id, [
        control.LeaderAndIsrPartitionError(0, ErrorCode.stale_controller_epoch),
        control.LeaderAndIsrPartitionError(1, ErrorCode.kafka_storage_error)])])
    frame = response_frame(control.encode_leader_and_isr_response(answer))
    assert leader_and_isr_errors(frame, request) == [("t-1", ErrorCode.kafka_storage_error)]


def test_stop_replica_errors():
    answer = control.StopReplicaResponse(ErrorCode.none, [
        control.StopReplicaPartitionError("t", 0, ErrorCode.none),
        control.StopReplicaPartitionError("t", 1, ErrorCode.kafka_storage_error)])
    assert stop_replica_errors(response_frame(control.encode_stop_replica_response(answer))) == \
        [("t-1", ErrorCode.kafka_storage_error)]
    refused = control.StopReplicaResponse(ErrorCode.stale_controller_epoch, [])
    assert stop_replica_errors(response_frame(control.encode_stop_replica_response(refused))) == \
        [(None, ErrorCode.stale_controller_epoch)]
