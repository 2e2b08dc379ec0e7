"""Every quorum message round-trips through Kafka's wire schemas (kio) at the versions KRaft speaks."""

import dataclasses

import pytest
from kio.schema.errors import ErrorCode

from replog.raft import codec
from replog.raft import messages as m
from replog.raft.messages import LogEntry, OffsetAndEpoch

REQUESTS = [
    m.VoteRequest("cluster-a", 7, 2, 6, 120, 3),
    m.BeginQuorumEpochRequest("cluster-a", 2, 7),
    m.EndQuorumEpochRequest("cluster-a", 2, 7, (3, 1)),
    m.FetchRequest("cluster-a", 3, 7, 120, 6, 500),
    m.FetchSnapshotRequest("cluster-a", 3, 7, OffsetAndEpoch(100, 5), 4096, 1 << 20),
    m.DescribeQuorumRequest(),
]

PRE_VOTE = m.VoteRequest("cluster-a", 8, 2, 6, 120, 3, pre_vote=True)
ENTRIES = (LogEntry(6, b"a"), LogEntry(6, b"b"), LogEntry(7, b"LeaderChange", control=True), LogEntry(7, b"c"))
PROGRESS = (m.ReplicaProgress(1, 10, 1000, 900), m.ReplicaProgress(2, 8, 999, -1))

RESPONSES = [
    m.VoteResponse(ErrorCode.none, -1, 7, True),
    m.VoteResponse(ErrorCode.fenced_leader_epoch, 1, 8, False),
    m.BeginQuorumEpochResponse(ErrorCode.none, 2, 7),
    m.EndQuorumEpochResponse(ErrorCode.inconsistent_voter_set, 2, 7),
    m.FetchResponse(ErrorCode.none, 2, 7, 118, 100, records=ENTRIES),
    m.FetchResponse(ErrorCode.none, 2, 7, 118, 100),
    m.FetchResponse(ErrorCode.none, 2, 7, 118, 100, diverging_epoch=OffsetAndEpoch(110, 5)),
    m.FetchResponse(ErrorCode.none, 2, 7, 118, 100, snapshot_id=OffsetAndEpoch(100, 5)),
    m.FetchResponse(ErrorCode.not_leader_or_follower, 1, 8, -1, 0),
    m.FetchSnapshotResponse(ErrorCode.none, 2, 7, OffsetAndEpoch(100, 5), 9000, 4096, b"chunk"),
    m.DescribeQuorumResponse(ErrorCode.none, 1, 7, 10, PROGRESS, (m.ReplicaProgress(100, 3, 5, 5),)),
]


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda r: type(r).__name__)
def test_requests_round_trip(request_):
    api_key, version, body = codec.encode_request(request_)
    assert version == codec.VERSIONS[api_key]
    assert codec.decode_request(api_key, version, body) == request_


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        (0, dataclasses.replace(PRE_VOTE, voter_id=-1, pre_vote=False)),  # v0: no VoterId, no PreVote
        (1, dataclasses.replace(PRE_VOTE, pre_vote=False)),  # v1 (KIP-853) adds VoterId
        (2, PRE_VOTE),  # v2 (KIP-996) adds PreVote
    ],
)
def test_vote_versions(version, expected):
    api_key, _, body = codec.encode_request(PRE_VOTE, version=version)
    assert codec.decode_request(api_key, version, body) == expected


@pytest.mark.parametrize("response", RESPONSES, ids=lambda r: type(r).__name__)
def test_responses_round_trip(response):
    api_key = codec.api_key_of(response)
    body = codec.encode_response(response, fetch_offset=120)
    assert codec.decode_response(api_key, codec.VERSIONS[api_key], body, fetch_offset=120) == response


@pytest.mark.parametrize("version", codec.DESCRIBE_QUORUM_VERSIONS)
def test_describe_quorum_every_version(version):
    response = RESPONSES[-1]
    body = codec.encode_response(response, version)
    decoded = codec.decode_response(codec.DESCRIBE_QUORUM, version, body)
    if version == 0:  # v0 has no fetch timestamps
        response = m.DescribeQuorumResponse(
            response.error_code, response.leader_id, response.leader_epoch, response.high_watermark,
            tuple(m.ReplicaProgress(r.replica_id, r.log_end_offset, -1, -1) for r in response.current_voters),
            tuple(m.ReplicaProgress(r.replica_id, r.log_end_offset, -1, -1) for r in response.observers))
    assert decoded == response
    api_key, _, request_body = codec.encode_request(m.DescribeQuorumRequest(), version)
    assert codec.decode_request(api_key, version, request_body) == m.DescribeQuorumRequest()


def test_entries_travel_as_batches_per_epoch_and_control_flag():
    data = codec.encode_entries(50, ENTRIES)
    assert codec.decode_entries(data, 50) == ENTRIES
    with pytest.raises(codec.CodecError, match="expected 51"):
        codec.decode_entries(data, 51)
    corrupt = bytearray(data)
    corrupt[-1] ^= 1
    with pytest.raises(codec.CodecError, match="CRC"):
        codec.decode_entries(bytes(corrupt), 50)


def test_a_request_for_another_topic_is_refused():
    api_key, version, body = codec.encode_request(REQUESTS[0])
    entity_body = body.replace(codec.METADATA_TOPIC.encode(), b"__other_metadata__")
    with pytest.raises(codec.CodecError, match="is not __cluster_metadata"):
        codec.decode_request(api_key, version, entity_body)
