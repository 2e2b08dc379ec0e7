"""DescribeCluster on a controller (KIP-919): which endpoint types it answers, with which error, and the active
controller named only when it is among the listed controllers, as Kafka's computeDescribeClusterResponse."""

from dataclasses import dataclass, field

import pytest
from kio.schema.errors import ErrorCode

from replog.controller.describe_cluster import (
    ENDPOINT_TYPE_BROKER,
    ENDPOINT_TYPE_CONTROLLER,
    NO_CONTROLLER,
    describe_cluster_body,
)

VOTERS = {3001: ("127.0.0.1", 9094), 3000: ("127.0.0.1", 9093)}


@dataclass
class FakeQuorum:
    quorum_leader_id: int | None
    quorum_voters: dict = field(default_factory=lambda: dict(VOTERS))
    cluster_id: str = "replog-cluster"


def test_controller_endpoints_list_the_voters_by_id_and_name_the_leader():
    body = describe_cluster_body(FakeQuorum(3001), 1, ENDPOINT_TYPE_CONTROLLER)
    assert (body["error_code"], body["cluster_id"], body["controller_id"]) == (ErrorCode.none, "replog-cluster", 3001)
    assert body["endpoint_type"] == ENDPOINT_TYPE_CONTROLLER
    assert [(b["broker_id"], b["port"]) for b in body["brokers"]] == [(3000, 9093), (3001, 9094)]


@pytest.mark.parametrize(("leader", "expected"), [(None, NO_CONTROLLER), (3007, NO_CONTROLLER), (3000, 3000)])
def test_controller_id_is_minus_one_unless_the_leader_is_listed(leader, expected):
    assert describe_cluster_body(FakeQuorum(leader), 1, ENDPOINT_TYPE_CONTROLLER)["controller_id"] == expected


@pytest.mark.parametrize(("version", "endpoint_type", "error"), [
    (0, ENDPOINT_TYPE_BROKER, ErrorCode.invalid_request),  # v0 can only ask for brokers
    (1, ENDPOINT_TYPE_BROKER, ErrorCode.mismatched_endpoint_type),
    (1, 7, ErrorCode.unsupported_endpoint_type),
    (1, 0, ErrorCode.unsupported_endpoint_type),
])  # fmt: skip
def test_requests_for_other_endpoints_are_refused_as_kafka_refuses_them(version, endpoint_type, error):
    body = describe_cluster_body(FakeQuorum(3000), version, endpoint_type)
    assert body["error_code"] == error and body["brokers"] == [] and body["error_message"]
