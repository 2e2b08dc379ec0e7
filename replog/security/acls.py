"""ACL bindings and binding filters with Kafka's codes and matching rules (org.apache.kafka.common.acl).

A binding says: this principal, from this host, is ALLOWed or DENIed this operation on the resources this
pattern names (a LITERAL name, "*" for every name, or a PREFIXED name: KIP-290). A filter is what DescribeAcls
and DeleteAcls send: every field may be ANY (or null), and the pattern type MATCH finds the bindings that
would apply to one concrete resource name. The codes are the int8 values on the wire.
"""

import enum
from dataclasses import dataclass

WILDCARD_RESOURCE = "*"  # a LITERAL binding on "*" applies to every resource of its type
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name, as Kafka's


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# The resource types replog stores ACLs for, and which operations each can carry (Kafka's
# AclEntry.supportedOperations, plus ALL; an ACL naming another operation for the type is refused with
# INVALID_REQUEST). DELEGATION_TOKEN and USER (KIP-48, KIP-373) guard the delegation-token APIs, which replog
# does not have: their ACLs are stored, listed and deleted as Kafka's are, so tools that manage them work.
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[Operation]] = {
    ResourceType.TOPIC: frozenset({Operation.ALL, Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DELETE,
                                   Operation.ALTER, Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS,
                                   Operation.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({Operation.ALL, Operation.READ, Operation.DELETE, Operation.DESCRIBE}),
    ResourceType.CLUSTER: frozenset({Operation.ALL, Operation.CREATE, Operation.CLUSTER_ACTION,
                                     Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS,
                                     Operation.IDEMPOTENT_WRITE, Operation.ALTER, Operation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({Operation.ALL, Operation.DESCRIBE, Operation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({Operation.ALL, Operation.DESCRIBE}),
    ResourceType.USER: frozenset({Operation.ALL, Operation.CREATE_TOKENS, Operation.DESCRIBE_TOKENS}),
}


class InvalidAclError(ValueError):
    """A binding CreateAcls cannot store (Kafka answers INVALID_REQUEST with this message)."""


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    resource_type: ResourceType
    name: str
    pattern: PatternType  # LITERAL or PREFIXED
    principal: str  # "User:alice", or "User:*"
    host: str  # an IP address, or "*"
    operation: Operation
    permission: Permission  # ALLOW or DENY

    def validate(self) -> None:
        """Refuse what Kafka's AclControlManager.validateNewAcl refuses."""
        if self.resource_type not in SUPPORTED_OPERATIONS:
            raise InvalidAclError(f"Invalid resource type {self.resource_type.name}")
        if self.pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAclError(f"Invalid patternType {self.pattern.name}")
        if not self.name:
            raise InvalidAclError("Resource name should not be empty")
        if self.resource_type is ResourceType.CLUSTER and (self.name != CLUSTER_NAME
                                                           or self.pattern is not PatternType.LITERAL):
            raise InvalidAclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        if self.operation not in SUPPORTED_OPERATIONS[self.resource_type]:
            raise InvalidAclError(f"Invalid operation {self.operation.name} for {self.resource_type.name}")
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            raise InvalidAclError(f"Invalid permission type {self.permission.name}")
        if ":" not in self.principal or not self.principal.split(":", 1)[1]:
            raise InvalidAclError(f"Could not parse principal from '{self.principal}' (no colon is present "
                                  "separating the principal type from the principal name)")
        if not self.host:
            raise InvalidAclError("Host should not be empty")

    def to_json(self) -> list:
        return [int(self.resource_type), self.name, int(self.pattern), self.principal, self.host,
                int(self.operation), int(self.permission)]

    @classmethod
    def from_json(cls, fields: list) -> "AclBinding":
        rtype, name, pattern, principal, host, operation, permission = fields
        return cls(ResourceType(rtype), str(name), PatternType(pattern), str(principal), str(host),
                   Operation(operation), Permission(permission))


def binding_of(resource_type: int, name: str, pattern: int, principal: str, host: str, operation: int,
               permission: int) -> AclBinding:
    """A binding from wire codes; an unknown code becomes UNKNOWN, which validate() refuses."""
    return AclBinding(code_of(ResourceType, resource_type), name, code_of(PatternType, pattern), principal, host,
                      code_of(Operation, operation), code_of(Permission, permission))


def code_of(kind, value: int):
    """The enum member of a wire code; an unknown code is the kind's UNKNOWN."""
    try:
        return kind(value)
    except ValueError:
        return kind.UNKNOWN


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """None in name, principal or host matches anything, as ANY does in the enums (Kafka's AclBindingFilter)."""

    resource_type: ResourceType
    name: str | None
    pattern: PatternType
    principal: str | None
    host: str | None
    operation: Operation
    permission: Permission

    def invalid_reason(self) -> str | None:
        """Why the filter cannot match anything well-defined (Kafka's findIndefiniteField), else None."""
        for kind, value in (("resource type", self.resource_type), ("pattern type", self.pattern),
                            ("operation", self.operation), ("permission type", self.permission)):
            if value.name == "UNKNOWN":
                return f"Filter has an unknown {kind}"
        return None

    def matches(self, binding: AclBinding) -> bool:
        return (self._matches_pattern(binding)
                and (self.principal is None or self.principal == binding.principal)
                and (self.host is None or self.host == binding.host)
                and self.operation in (Operation.ANY, binding.operation)
                and self.permission in (Permission.ANY, binding.permission))

    def _matches_pattern(self, binding: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, binding.resource_type):
            return False
        if self.pattern is PatternType.MATCH:
            # KIP-290: the bindings that would apply to the resource named `name`.
            if self.name is None:
                return True
            if binding.pattern is PatternType.LITERAL:
                return binding.name in (self.name, WILDCARD_RESOURCE)
            return self.name.startswith(binding.name)
        if self.pattern not in (PatternType.ANY, binding.pattern):
            return False
        return self.name is None or self.name == binding.name
