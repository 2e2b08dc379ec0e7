"""`replog acls`: Kafka's kafka-acls.sh — add, remove and list ACL bindings, with its flags and output.

--add makes a binding for every principal x host x operation x resource named; --producer and --consumer
are its shorthands (WRITE, DESCRIBE, CREATE on topics; READ, DESCRIBE on topics and READ on the group).
--remove deletes the bindings the same options match (every binding of the resources without principals)
and --list prints them, both taking the filter pattern types match and any as well.
"""

import argparse
import asyncio
import re
from collections.abc import Sequence

from replog.client import acl_admin
from replog.client.admin import Admin
from replog.client.security import load_command_config
from replog.security.acls import (
    CLUSTER_NAME,
    WILDCARD_HOST,
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

_OPERATIONS = ("Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction", "AlterConfigs",
               "DescribeConfigs", "IdempotentWrite", "CreateTokens", "DescribeTokens", "All")


def operation_of(name: str) -> Operation:
    """kafka-acls' names (Read, ClusterAction, ...), in any case, or Kafka's enum names (CLUSTER_ACTION)."""
    key = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", name.strip()).upper()
    if key not in Operation.__members__ or key in ("ANY", "UNKNOWN"):
        raise ValueError(f"unknown operation {name!r}; expected one of {', '.join(_OPERATIONS)}")
    return Operation[key]


def resources_of(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    resources = [(ResourceType.TOPIC, t) for t in args.topic or ()]
    resources += [(ResourceType.GROUP, g) for g in args.group or ()]
    resources += [(ResourceType.TRANSACTIONAL_ID, x) for x in args.transactional_id or ()]
    resources += [(ResourceType.DELEGATION_TOKEN, t) for t in args.delegation_token or ()]
    resources += [(ResourceType.USER, u) for u in args.user_principal or ()]
    if args.cluster:
        resources.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return resources


def _operations(args: argparse.Namespace, resource_type: ResourceType) -> list[Operation]:
    if args.producer:
        return {ResourceType.TOPIC: [Operation.WRITE, Operation.DESCRIBE, Operation.CREATE],
                ResourceType.TRANSACTIONAL_ID: [Operation.WRITE, Operation.DESCRIBE],
                ResourceType.CLUSTER: [Operation.IDEMPOTENT_WRITE]}.get(resource_type, [])
    if args.consumer:
        return {ResourceType.TOPIC: [Operation.READ, Operation.DESCRIBE],
                ResourceType.GROUP: [Operation.READ]}.get(resource_type, [])
    return [operation_of(op) for op in args.operation or ["All"]]


def bindings_to_add(args: argparse.Namespace) -> list[AclBinding]:
    pattern = PatternType[(args.resource_pattern_type or "literal").upper()]
    if pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise ValueError("--add takes --resource-pattern-type literal or prefixed")
    resources = resources_of(args)
    if args.producer and args.idempotent:
        resources.append((ResourceType.CLUSTER, CLUSTER_NAME))
    if not resources:
        raise ValueError("--add needs a resource: --topic, --group, --cluster, --transactional-id, "
                         "--delegation-token or --user-principal")
    entries = [(p, Permission.ALLOW, h) for p in args.allow_principal or () for h in args.allow_host or [WILDCARD_HOST]]
    entries += [(p, Permission.DENY, h) for p in args.deny_principal or () for h in args.deny_host or [WILDCARD_HOST]]
    if not entries:
        raise ValueError("--add needs --allow-principal or --deny-principal")
    bindings = []
    for resource_type, name in resources:
        resource_pattern = PatternType.LITERAL if resource_type is ResourceType.CLUSTER else pattern
        for principal, permission, host in entries:
            for operation in _operations(args, resource_type):
                binding = AclBinding(resource_type, name, resource_pattern, principal, host, operation, permission)
                binding.validate()  # refuse here, with Kafka's message, what the cluster would refuse
                bindings.append(binding)
    return list(dict.fromkeys(bindings))


def filters_of(args: argparse.Namespace, *, default_pattern: PatternType) -> list[AclBindingFilter]:
    """The filters --remove and --list use: per resource (or every resource), per principal and host named."""
    pattern = PatternType[args.resource_pattern_type.upper()] if args.resource_pattern_type else default_pattern
    resources: list[tuple[ResourceType, str | None]] = list(resources_of(args)) or [(ResourceType.ANY, None)]
    entries: list[tuple[str | None, Permission, str | None]] = [
        (p, Permission.ALLOW, h) for p in args.allow_principal or () for h in args.allow_host or [None]]
    entries += [(p, Permission.DENY, h) for p in args.deny_principal or () for h in args.deny_host or [None]]
    entries += [(p, Permission.ANY, None) for p in getattr(args, "principal", None) or ()]
    if not entries:
        entries = [(None, Permission.ANY, None)]
    operations = [operation_of(op) for op in args.operation] if args.operation else [Operation.ANY]
    return list(dict.fromkeys(
        AclBindingFilter(resource_type, name, pattern, principal, host, operation, permission)
        for resource_type, name in resources for principal, permission, host in entries for operation in operations))


def format_bindings(bindings: Sequence[AclBinding]) -> str:
    """kafka-acls' listing: a block per resource pattern, an entry per line."""
    by_resource: dict[tuple, list[AclBinding]] = {}
    for b in bindings:
        by_resource.setdefault((b.resource_type, b.name, b.pattern), []).append(b)
    blocks = []
    for (resource_type, name, pattern), entries in sorted(by_resource.items()):
        lines = [f"Current ACLs for resource `ResourcePattern(resourceType={resource_type.name}, name={name}, "
                 f"patternType={pattern.name})`: "]
        lines += [f" \t(principal={b.principal}, host={b.host}, operation={b.operation.name}, "
                  f"permissionType={b.permission.name})" for b in entries]
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


async def _acls(args: argparse.Namespace) -> int:
    async with Admin(args.bootstrap_server, security=load_command_config(args.command_config)) as admin:
        if args.add:
            bindings = bindings_to_add(args)
            print("Adding ACLs for resource(s):")
            print(format_bindings(bindings))
            await acl_admin.create_acls(admin, bindings)
        elif args.remove:
            removed = await acl_admin.delete_acls(admin, filters_of(args, default_pattern=PatternType.LITERAL))
            print("Removed ACLs:" if removed else "No ACLs matched.")
            if removed:
                print(format_bindings(removed))
        else:
            listed: list[AclBinding] = []
            for binding_filter in filters_of(args, default_pattern=PatternType.ANY):
                listed += await acl_admin.describe_acls(admin, binding_filter)
            print(format_bindings(list(dict.fromkeys(listed))))
    return 0


def add_acls_command(commands, bootstrap) -> None:
    """Register `acls` on the CLI's subparsers; bootstrap(parser) adds --bootstrap-server."""
    acls = commands.add_parser("acls", help="add, remove or list ACLs",
                               description="Add, remove or list ACL bindings, as kafka-acls.sh.")
    bootstrap(acls)
    action = acls.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="create bindings (one of --add, --remove, --list is required)")
    action.add_argument("--remove", action="store_true", help="delete the matching bindings (one of --add, --remove, --list is required)")
    action.add_argument("--list", action="store_true", help="print the matching bindings (one of --add, --remove, --list is required)")
    acls.add_argument("--topic", action="append", metavar="T", help="a topic (repeatable; default: none)")
    acls.add_argument("--group", action="append", metavar="G", help="a consumer group (repeatable; default: none)")
    acls.add_argument("--transactional-id", action="append", metavar="X",
                      help="a transactional id (repeatable; default: none)")
    acls.add_argument("--delegation-token", action="append", metavar="ID",
                      help="a delegation token (repeatable; default: none)")
    acls.add_argument("--user-principal", action="append", metavar="U",
                      help="a user, for CreateTokens and DescribeTokens (KIP-373; repeatable; default: none)")
    acls.add_argument("--cluster", action="store_true", help="the cluster resource (default: off)")
    acls.add_argument("--resource-pattern-type", choices=["literal", "prefixed", "match", "any"],
                      help="--add: literal or prefixed; --remove, --list also match (the bindings that apply to the "
                           "named resource) or any (default: literal for --add and --remove, any for --list)")
    acls.add_argument("--allow-principal", action="append", metavar="P", help="e.g. User:alice (repeatable; default: none)")
    acls.add_argument("--deny-principal", action="append", metavar="P", help="e.g. User:mallory (repeatable; default: none)")
    acls.add_argument("--principal", action="append", metavar="P", help="--list/--remove: only this principal's (default: every principal)")
    acls.add_argument("--allow-host", action="append", metavar="H", help="hosts the allow applies to (default: *)")
    acls.add_argument("--deny-host", action="append", metavar="H", help="hosts the deny applies to (default: *)")
    acls.add_argument("--operation", action="append", metavar="OP",
                      help=f"one of {', '.join(_OPERATIONS)} (repeatable; default: All)")
    acls.add_argument("--producer", action="store_true",
                      help="--add: WRITE, DESCRIBE, CREATE on the topics, WRITE, DESCRIBE on transactional ids (default: off)")
    acls.add_argument("--idempotent", action="store_true", help="with --producer: IDEMPOTENT_WRITE on the cluster (default: off)")
    acls.add_argument("--consumer", action="store_true", help="--add: READ, DESCRIBE on the topics and READ on the group (default: off)")
    acls.set_defaults(func=lambda a: asyncio.run(_acls(a)), resource_pattern_type=None)
