"""Table tests of CreateAcls / DeleteAcls / DescribeAcls decisions (replog.security.acl_requests), of the
controller's ACL records (replay and snapshots rebuild the same bindings), and of the broker recognising a
standby's NOT_CONTROLLER in a forwarded answer."""

import pytest
from kio.schema.errors import ErrorCode

from replog.broker.controller_client import answers_not_controller
from replog.controller import records
from replog.controller.cluster import ClusterMetadata
from replog.protocol.apis import ApiKey
from replog.protocol.messages import encode_response
from replog.security import acl_requests
from replog.security.acls import (
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from replog.security.authorizer import AclIndex

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED


def acl(name="orders", op=Operation.READ, principal="User:alice", pattern=LITERAL, rtype=TOPIC,
        perm=Permission.ALLOW):
    return AclBinding(rtype, name, pattern, principal, "*", op, perm)


def any_filter(**fields):
    base = dict(resource_type=ResourceType.ANY, name=None, pattern=PatternType.ANY, principal=None, host=None,
                operation=Operation.ANY, permission=Permission.ANY)
    return AclBindingFilter(**{**base, **fields})


@pytest.mark.parametrize(
    ("existing", "created", "codes", "added"),
    [
        ((), (acl(),), [ErrorCode.none], [acl()]),
        ((acl(),), (acl(),), [ErrorCode.none], []),  # creating an existing binding succeeds, changes nothing
        ((), (acl(), acl()), [ErrorCode.none, ErrorCode.none], [acl()]),  # named twice, added once
        ((), (acl(rtype=GROUP, op=Operation.WRITE), acl(name="b")),
         [ErrorCode.invalid_request, ErrorCode.none], [acl(name="b")]),  # each creation judged on its own
        ((), (acl(pattern=PatternType.MATCH),), [ErrorCode.invalid_request], []),
    ],
)
def test_decide_creations(existing, created, codes, added):
    changes = acl_requests.decide_creations(AclIndex(existing), created)
    assert [r["error_code"] for r in changes.body["results"]] == codes
    assert changes.added == added and changes.removed == []


def test_decide_deletions_answers_each_filter_with_what_it_matched():
    index = AclIndex([acl(), acl(name="ord", pattern=PREFIXED), acl(principal="User:bob")])
    changes = acl_requests.decide_deletions(index, [
        any_filter(principal="User:alice"),
        any_filter(resource_type=TOPIC, name="orders", pattern=PatternType.MATCH),
        any_filter(operation=Operation.UNKNOWN),
    ])
    first, second, third = changes.body["filter_results"]
    assert [m["resource_name"] for m in first["matching_acls"]] == ["ord", "orders"]
    assert len(second["matching_acls"]) == 3  # the literal ones and the prefix that applies to orders
    assert third["error_code"] == ErrorCode.invalid_request and third["matching_acls"] == []
    assert sorted(changes.removed) == sorted(index)  # each binding removed once, though matched twice


def test_describe_groups_bindings_by_resource_pattern():
    index = AclIndex([acl(), acl(op=Operation.WRITE), acl(name="ord", pattern=PREFIXED)])
    body = acl_requests.describe_body(index, any_filter(resource_type=TOPIC))
    resources = {(r["resource_name"], r["pattern_type"]): len(r["acls"]) for r in body["resources"]}
    assert body["error_code"] == ErrorCode.none
    assert resources == {("orders", int(LITERAL)): 2, ("ord", int(PREFIXED)): 1}
    assert acl_requests.describe_body(index, any_filter(pattern=PatternType.UNKNOWN))["error_code"] == \
        ErrorCode.invalid_request


def test_acl_records_replay_and_snapshot_to_the_same_bindings():
    metadata = ClusterMetadata()
    bindings = [acl(), acl(name="ord", pattern=PREFIXED, perm=Permission.DENY), acl(rtype=GROUP, name="g")]
    records.replay([records.acl_record(b) for b in bindings] + [records.remove_acl_record(bindings[0])], metadata)
    assert sorted(metadata.acls) == sorted(bindings[1:])
    rebuilt = ClusterMetadata()
    records.replay(records.snapshot_records(7, metadata), rebuilt)
    assert sorted(rebuilt.acls) == sorted(bindings[1:])


def test_a_malformed_acl_record_refuses_to_replay():
    with pytest.raises(records.CorruptMetadataError):
        records.replay([{"type": "acl", "binding": [2, "t", 99, "User:a", "*", 3, 3]}], ClusterMetadata())


@pytest.mark.parametrize(("body", "expected"), [
    ({"throttle_time": 0, "results": [{"error_code": 0, "error_message": None},
                                      {"error_code": ErrorCode.not_controller, "error_message": "standby"}]}, True),
    ({"throttle_time": 0, "results": [{"error_code": ErrorCode.invalid_request, "error_message": "bad"}]}, False),
])
def test_a_forwarded_answer_that_says_not_controller_is_recognised(body, expected):
    encoded = encode_response(ApiKey.CREATE_ACLS, 3, body)
    assert answers_not_controller(ApiKey.CREATE_ACLS, 3, encoded) is expected
    assert answers_not_controller(ApiKey.CREATE_ACLS, 3, encoded[:3]) is False  # malformed: relayed as it is
