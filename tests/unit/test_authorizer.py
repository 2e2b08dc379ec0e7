"""Table tests of the authorizer's decisions (replog.security.authorizer) and of ACL filters (acls.py)."""

import pytest

from replog.broker.config import config_from_properties
from replog.security.acls import (
    AclBinding,
    AclBindingFilter,
    InvalidAclError,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from replog.security.authorizer import AclIndex, Authorizer, AuthorizerConfig

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
USER, TOKEN = ResourceType.USER, ResourceType.DELEGATION_TOKEN
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
Op = Operation
ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"


def acl(name="orders", op=Op.READ, perm=ALLOW, principal=ALICE, host="*", pattern=LITERAL, rtype=TOPIC):
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def authorizer(*bindings, super_users=(), allow_if_none=False):
    return Authorizer(AuthorizerConfig(True, frozenset(super_users), allow_if_none), AclIndex(bindings))


@pytest.mark.parametrize(
    ("bindings", "principal", "op", "name", "expected"),
    [
        # the literal name, the wildcard name and any principal
        ((acl(),), ALICE, Op.READ, "orders", True),
        ((acl(),), BOB, Op.READ, "orders", False),
        ((acl(),), ALICE, Op.WRITE, "orders", False),
        ((acl(name="*"),), ALICE, Op.READ, "anything", True),
        ((acl(principal="User:*"),), BOB, Op.READ, "orders", True),
        ((acl(),), ALICE, Op.READ, "orders2", False),  # a literal name is not a prefix
        # prefixed patterns (KIP-290)
        ((acl(name="ord", pattern=PREFIXED),), ALICE, Op.READ, "orders", True),
        ((acl(name="orders", pattern=PREFIXED),), ALICE, Op.READ, "orders", True),
        ((acl(name="ordersx", pattern=PREFIXED),), ALICE, Op.READ, "orders", False),
        ((acl(name="b", pattern=PREFIXED), acl(name="orc", pattern=PREFIXED)), ALICE, Op.READ, "orders", False),
        ((acl(name="o", pattern=PREFIXED), acl(name="orc", pattern=PREFIXED)), ALICE, Op.READ, "orders", True),
        # implications: READ, WRITE, DELETE, ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS
        ((acl(op=Op.READ),), ALICE, Op.DESCRIBE, "orders", True),
        ((acl(op=Op.WRITE),), ALICE, Op.DESCRIBE, "orders", True),
        ((acl(op=Op.DELETE),), ALICE, Op.DESCRIBE, "orders", True),
        ((acl(op=Op.ALTER),), ALICE, Op.DESCRIBE, "orders", True),
        ((acl(op=Op.CREATE),), ALICE, Op.DESCRIBE, "orders", False),
        ((acl(op=Op.ALTER_CONFIGS),), ALICE, Op.DESCRIBE_CONFIGS, "orders", True),
        ((acl(op=Op.DESCRIBE),), ALICE, Op.READ, "orders", False),
        ((acl(op=Op.ALL),), ALICE, Op.DELETE, "orders", True),
        # deny precedence, whatever the pattern that allows
        ((acl(), acl(perm=DENY)), ALICE, Op.READ, "orders", False),
        ((acl(name="*"), acl(name="ord", pattern=PREFIXED, perm=DENY)), ALICE, Op.READ, "orders", False),
        ((acl(op=Op.ALL), acl(op=Op.WRITE, perm=DENY)), ALICE, Op.READ, "orders", True),
        ((acl(op=Op.READ), acl(op=Op.ALL, perm=DENY)), ALICE, Op.READ, "orders", False),
        ((acl(), acl(perm=DENY, principal="User:*")), ALICE, Op.READ, "orders", False),
        # a DENY applies to its own operation, not to the ones it would imply as an ALLOW
        ((acl(op=Op.DESCRIBE), acl(op=Op.READ, perm=DENY)), ALICE, Op.DESCRIBE, "orders", True),
        # a resource with bindings, none for this principal: refused
        ((acl(principal=BOB),), ALICE, Op.READ, "orders", False),
    ],
)
def test_authorize(bindings, principal, op, name, expected):
    assert authorizer(*bindings).authorize(principal, HOST, op, TOPIC, name) is expected


@pytest.mark.parametrize(
    ("bindings", "op", "resource_type", "name", "expected"),
    [
        # No implication between the token operations (Kafka's AclAuthorizer implies only DESCRIBE and
        # DESCRIBE_CONFIGS); ALL grants both.
        ((acl(rtype=USER, name="bob", op=Op.CREATE_TOKENS),), Op.CREATE_TOKENS, USER, "bob", True),
        ((acl(rtype=USER, name="bob", op=Op.CREATE_TOKENS),), Op.DESCRIBE_TOKENS, USER, "bob", False),
        ((acl(rtype=USER, name="bob", op=Op.ALL),), Op.DESCRIBE_TOKENS, USER, "bob", True),
        ((acl(rtype=USER, name="svc-", op=Op.DESCRIBE_TOKENS, pattern=PREFIXED),), Op.DESCRIBE_TOKENS, USER,
         "svc-orders", True),
        # A user named like a topic is another resource.
        ((acl(name="bob", op=Op.ALL),), Op.CREATE_TOKENS, USER, "bob", False),
        ((acl(rtype=TOKEN, name="t1", op=Op.DESCRIBE),), Op.DESCRIBE, TOKEN, "t1", True),
        ((acl(rtype=TOKEN, name="t1", op=Op.DESCRIBE, perm=DENY), acl(rtype=TOKEN, name="*", op=Op.ALL)),
         Op.DESCRIBE, TOKEN, "t1", False),
    ],
)
def test_authorize_user_and_delegation_token_resources(bindings, op, resource_type, name, expected):
    assert authorizer(*bindings).authorize(ALICE, HOST, op, resource_type, name) is expected


@pytest.mark.parametrize(
    ("host", "client_host", "expected"),
    [("*", HOST, True), (HOST, HOST, True), ("10.0.0.2", HOST, False)],
)
def test_host_matching(host, client_host, expected):
    assert authorizer(acl(host=host)).authorize(ALICE, client_host, Op.READ, TOPIC, "orders") is expected


@pytest.mark.parametrize(
    ("allow_if_none", "bindings", "expected"),
    [
        (False, (), False),  # allow.everyone.if.no.acl.found=false (the default): nothing without an ACL
        (True, (), True),
        (True, (acl(principal=BOB),), False),  # the resource has an ACL: the fallback no longer applies
        (True, (acl(name="other"),), True),  # an ACL on another resource does not count
    ],
)
def test_allow_everyone_if_no_acl_found(allow_if_none, bindings, expected):
    a = authorizer(*bindings, allow_if_none=allow_if_none)
    assert a.authorize(ALICE, HOST, Op.READ, TOPIC, "orders") is expected


def test_super_users_and_a_disabled_authorizer_allow_everything():
    assert authorizer(acl(perm=DENY, op=Op.ALL), super_users={"User:admin"}).authorize(
        "User:admin", HOST, Op.DELETE, TOPIC, "orders")
    assert Authorizer(AuthorizerConfig(False, frozenset(), False)).authorize(ALICE, HOST, Op.WRITE, CLUSTER,
                                                                             "kafka-cluster")


def test_resource_types_are_separate():
    a = authorizer(acl(rtype=GROUP, name="orders"))
    assert a.authorize(ALICE, HOST, Op.READ, GROUP, "orders")
    assert not a.authorize(ALICE, HOST, Op.READ, TOPIC, "orders")


@pytest.mark.parametrize(
    ("class_name", "super_users", "error"),
    [
        ("", "", None),
        ("org.apache.kafka.metadata.authorizer.StandardAuthorizer", "User:admin; User:ops", None),
        ("kafka.security.authorizer.AclAuthorizer", "", None),
        ("com.example.MyAuthorizer", "", "not an authorizer replog has"),
        ("kafka.security.authorizer.AclAuthorizer", "admin", "not a principal"),
    ],
)
def test_authorizer_config(class_name, super_users, error):
    if error is None:
        config = AuthorizerConfig.from_properties(class_name, super_users, False)
        assert config.enabled is bool(class_name)
        assert config.super_users == frozenset(u.strip() for u in super_users.split(";") if u)
    else:
        with pytest.raises(ValueError, match=error):
            AuthorizerConfig.from_properties(class_name, super_users, False)


def test_authorize_any_topic_for_idempotent_producers():
    assert authorizer(acl(op=Op.WRITE)).authorize_any(ALICE, HOST, Op.WRITE, TOPIC)
    assert not authorizer(acl(op=Op.READ)).authorize_any(ALICE, HOST, Op.WRITE, TOPIC)
    assert not authorizer(acl(op=Op.WRITE), acl(name="*", op=Op.WRITE, perm=DENY)).authorize_any(
        ALICE, HOST, Op.WRITE, TOPIC)


def test_index_add_remove_and_prefix_walk():
    names = ["a", "ab", "abc", "abd", "b", "orc", "ord", "order", "orders-eu", "z"]
    index = AclIndex(acl(name=n, pattern=PREFIXED) for n in names)
    assert index.add(acl(name="ord", pattern=PREFIXED)) is False  # already there
    found = sorted(b.name for b in index.applying_to(TOPIC, "orders"))
    assert found == ["ord", "order"]
    assert index.remove(acl(name="ord", pattern=PREFIXED)) is True
    assert index.remove(acl(name="ord", pattern=PREFIXED)) is False
    assert sorted(b.name for b in index.applying_to(TOPIC, "orders")) == ["order"]
    assert len(index) == len(names) - 1


def _filter(rtype=ResourceType.ANY, name=None, pattern=PatternType.ANY, principal=None, host=None,
            op=Op.ANY, perm=Permission.ANY):
    return AclBindingFilter(rtype, name, pattern, principal, host, op, perm)


@pytest.mark.parametrize(
    ("binding_filter", "expected"),
    [
        (_filter(), ["*", "orders", "ord"]),
        (_filter(rtype=TOPIC, name="orders", pattern=LITERAL), ["orders"]),
        (_filter(name="ord"), ["ord"]),  # ANY pattern type with a name: that exact name, either pattern
        (_filter(rtype=TOPIC, name="orders", pattern=PatternType.MATCH), ["*", "orders", "ord"]),
        (_filter(rtype=TOPIC, name="other", pattern=PatternType.MATCH), ["*"]),
        (_filter(pattern=PREFIXED), ["ord"]),
        (_filter(principal=BOB), []),
        (_filter(op=Op.WRITE), ["orders"]),
        (_filter(perm=DENY), ["ord"]),
        (_filter(rtype=GROUP), []),
    ],
)
def test_filters(binding_filter, expected):
    index = AclIndex([acl(name="*"), acl(name="orders", op=Op.WRITE), acl(name="ord", pattern=PREFIXED, perm=DENY)])
    assert sorted(b.name for b in index.matching(binding_filter)) == sorted(expected)


@pytest.mark.parametrize(
    ("binding", "error"),
    [
        (acl(), None),
        (acl(rtype=CLUSTER, name="kafka-cluster", op=Op.ALTER), None),
        (acl(rtype=CLUSTER, name="other", op=Op.ALTER), "only valid name"),
        (acl(rtype=GROUP, op=Op.WRITE), "Invalid operation"),
        (acl(name=""), "should not be empty"),
        (acl(principal="alice"), "Could not parse principal"),
        (acl(pattern=PatternType.MATCH), "Invalid patternType"),
        (acl(perm=Permission.ANY), "Invalid permission"),
        (acl(rtype=ResourceType.ANY), "Invalid resource type"),
        # KIP-373's USER resource takes CreateTokens and DescribeTokens; a DELEGATION_TOKEN takes Describe
        (acl(rtype=USER, name="bob", op=Op.CREATE_TOKENS), None),
        (acl(rtype=USER, name="svc-", op=Op.DESCRIBE_TOKENS, pattern=PREFIXED), None),
        (acl(rtype=USER, name="bob", op=Op.ALL), None),
        (acl(rtype=USER, name="bob", op=Op.READ), "Invalid operation READ for USER"),
        (acl(rtype=TOKEN, name="token-id", op=Op.DESCRIBE), None),
        (acl(rtype=TOKEN, name="token-id", op=Op.ALTER), "Invalid operation ALTER for DELEGATION_TOKEN"),
        (acl(rtype=TOKEN, name="token-id", op=Op.CREATE_TOKENS), "Invalid operation"),
    ],
)
def test_binding_validation(binding, error):
    if error is None:
        binding.validate()
    else:
        with pytest.raises(InvalidAclError, match=error):
            binding.validate()


def test_a_broker_with_an_unknown_authorizer_refuses_to_start():
    with pytest.raises(ValueError, match="not an authorizer replog has"):
        config_from_properties({"authorizer.class.name": "kafka.security.auth.SimpleAclAuthorizer"})
    config = config_from_properties({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                                     "super.users": "User:admin", "allow.everyone.if.no.acl.found": "true"})
    assert config.authorizer_config() == AuthorizerConfig(True, frozenset({"User:admin"}), True)
    assert config_from_properties({}).authorizer_config().enabled is False
