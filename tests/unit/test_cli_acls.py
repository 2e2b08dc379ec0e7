"""`replog acls` option handling (replog.cli_acls): the bindings --add makes, the filters --remove and --list
send, and kafka-acls' listing format."""

import pytest

from replog.cli import build_parser
from replog.cli_acls import bindings_to_add, filters_of, format_bindings, operation_of
from replog.security.acls import CLUSTER_NAME, AclBinding, Operation, PatternType, Permission, ResourceType


def args(*argv):
    return build_parser().parse_args(["acls", "--bootstrap-server", "b:9092", *argv])


@pytest.mark.parametrize(("name", "operation"), [("Read", Operation.READ), ("ClusterAction", Operation.CLUSTER_ACTION),
                                                 ("describe_configs", Operation.DESCRIBE_CONFIGS),
                                                 ("ALL", Operation.ALL)])
def test_operation_names(name, operation):
    assert operation_of(name) is operation


@pytest.mark.parametrize("name", ["Any", "Fly", ""])
def test_unknown_operation_names_are_refused(name):
    with pytest.raises(ValueError, match="unknown operation"):
        operation_of(name)


def test_add_makes_every_principal_host_operation_and_resource():
    made = bindings_to_add(args("--add", "--allow-principal", "User:alice", "--allow-host", "10.0.0.1",
                                "--deny-principal", "User:bob", "--operation", "Read", "--operation", "Write",
                                "--topic", "orders", "--resource-pattern-type", "prefixed"))
    assert len(made) == 4
    assert AclBinding(ResourceType.TOPIC, "orders", PatternType.PREFIXED, "User:alice", "10.0.0.1", Operation.WRITE,
                      Permission.ALLOW) in made
    assert AclBinding(ResourceType.TOPIC, "orders", PatternType.PREFIXED, "User:bob", "*", Operation.READ,
                      Permission.DENY) in made


def test_producer_and_consumer_shorthands():
    producer = bindings_to_add(args("--add", "--allow-principal", "User:p", "--producer", "--idempotent",
                                    "--topic", "t"))
    assert {(b.resource_type, b.operation) for b in producer} == {
        (ResourceType.TOPIC, Operation.WRITE), (ResourceType.TOPIC, Operation.DESCRIBE),
        (ResourceType.TOPIC, Operation.CREATE), (ResourceType.CLUSTER, Operation.IDEMPOTENT_WRITE)}
    consumer = bindings_to_add(args("--add", "--allow-principal", "User:c", "--consumer", "--topic", "t",
                                    "--group", "g"))
    assert {(b.resource_type, b.operation) for b in consumer} == {
        (ResourceType.TOPIC, Operation.READ), (ResourceType.TOPIC, Operation.DESCRIBE),
        (ResourceType.GROUP, Operation.READ)}


def test_add_user_and_delegation_token_resources_as_kafka_acls():
    made = bindings_to_add(args("--add", "--allow-principal", "User:alice", "--operation", "CreateTokens",
                                "--operation", "DescribeTokens", "--user-principal", "bob"))
    assert made == [AclBinding(ResourceType.USER, "bob", PatternType.LITERAL, "User:alice", "*", op, Permission.ALLOW)
                    for op in (Operation.CREATE_TOKENS, Operation.DESCRIBE_TOKENS)]
    made = bindings_to_add(args("--add", "--allow-principal", "User:alice", "--operation", "Describe",
                                "--delegation-token", "token-1"))
    assert made == [AclBinding(ResourceType.DELEGATION_TOKEN, "token-1", PatternType.LITERAL, "User:alice", "*",
                               Operation.DESCRIBE, Permission.ALLOW)]
    with pytest.raises(ValueError, match="Invalid operation READ for USER"):
        bindings_to_add(args("--add", "--allow-principal", "User:a", "--operation", "Read", "--user-principal", "b"))
    listed = filters_of(args("--list", "--user-principal", "bob"), default_pattern=PatternType.ANY)
    assert [(f.resource_type, f.name) for f in listed] == [(ResourceType.USER, "bob")]


@pytest.mark.parametrize(("argv", "error"), [
    (("--add", "--topic", "t"), "--allow-principal or --deny-principal"),
    (("--add", "--allow-principal", "User:a"), "needs a resource"),
    (("--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"), "literal or prefixed"),
    (("--add", "--allow-principal", "User:a", "--group", "g", "--operation", "Write"), "Invalid operation"),
    (("--add", "--allow-principal", "alice", "--topic", "t"), "Could not parse principal"),
])
def test_add_refuses_what_kafka_acls_refuses(argv, error):
    with pytest.raises(ValueError, match=error):
        bindings_to_add(args(*argv))


def test_list_and_remove_filters():
    listed = filters_of(args("--list"), default_pattern=PatternType.ANY)
    assert [(f.resource_type, f.name, f.pattern, f.principal) for f in listed] == [
        (ResourceType.ANY, None, PatternType.ANY, None)]
    removed = filters_of(args("--remove", "--cluster", "--allow-principal", "User:a", "--operation", "Alter"),
                         default_pattern=PatternType.LITERAL)
    assert [(f.resource_type, f.name, f.principal, f.permission, f.operation) for f in removed] == [
        (ResourceType.CLUSTER, CLUSTER_NAME, "User:a", Permission.ALLOW, Operation.ALTER)]
    matched = filters_of(args("--list", "--topic", "orders", "--resource-pattern-type", "match"),
                         default_pattern=PatternType.ANY)
    assert matched[0].pattern is PatternType.MATCH


def test_listing_format_is_kafka_acls():
    text = format_bindings([AclBinding(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*",
                                       Operation.WRITE, Permission.ALLOW)])
    assert text == ("Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`: \n"
                    " \t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)\n")
