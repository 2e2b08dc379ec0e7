"""The authorizer: may this principal, from this host, perform this operation on this resource?

Kafka's StandardAuthorizer (KIP-801), as a pure object over the current set of ACL bindings:
- a super user (`super.users`, semicolon-separated principals) may do anything;
- the bindings that apply to a resource are the LITERAL ones on its name, the LITERAL ones on "*", and the
  PREFIXED ones whose name starts the resource's name (KIP-290);
- of those, the ones for the principal (or "User:*") and host (or "*") decide: any DENY for the operation (or
  ALL) refuses, whatever allows it; else an ALLOW for the operation, for ALL, or for an operation that implies
  it (READ, WRITE, DELETE or ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS) grants it;
- a resource with no binding at all is allowed only with `allow.everyone.if.no.acl.found=true`.

Lookups never scan every binding: LITERAL bindings are a dict by (type, name); PREFIXED ones a sorted set per
resource type, walked from the resource's name down only through names that can be its prefixes.
"""

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sortedcontainers import SortedList

from .acls import (
    CLUSTER_NAME,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

# The names Kafka's brokers accept for its ACL authorizers; replog's authorizer behaves as StandardAuthorizer.
AUTHORIZER_CLASS_NAMES = frozenset({"org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                                    "kafka.security.authorizer.AclAuthorizer"})

# The operations whose ALLOW grants each operation: itself, ALL, and those that imply it (Kafka's
# AclEntry.supportedOperations: READ, WRITE, DELETE or ALTER imply DESCRIBE; ALTER_CONFIGS implies
# DESCRIBE_CONFIGS).
_IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset({Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.ALTER_CONFIGS}),
}
_GRANTED_BY: dict[Operation, frozenset[Operation]] = {
    op: frozenset({op, Operation.ALL}) | _IMPLIED_BY.get(op, frozenset()) for op in Operation}


@dataclass(frozen=True, slots=True)
class AuthorizerConfig:
    enabled: bool  # authorizer.class.name set: without it every request is allowed, as a broker without one
    super_users: frozenset[str]
    allow_everyone_if_no_acl_found: bool

    @classmethod
    def from_properties(cls, class_name: str, super_users: str, allow_everyone_if_no_acl_found: bool) -> "AuthorizerConfig":
        class_name = class_name.strip()
        if class_name and class_name not in AUTHORIZER_CLASS_NAMES:
            raise ValueError(f"authorizer.class.name={class_name} is not an authorizer replog has; use "
                             f"{' or '.join(sorted(AUTHORIZER_CLASS_NAMES))}, or leave it empty for none")
        users = frozenset(u.strip() for u in super_users.split(";") if u.strip())
        for user in users:
            if ":" not in user:
                raise ValueError(f"super.users entry {user!r} is not a principal such as User:admin")
        return cls(bool(class_name), users, allow_everyone_if_no_acl_found)


NO_AUTHORIZER = AuthorizerConfig(False, frozenset(), True)


class AclIndex:
    """The bindings, indexed for the authorizer's lookups: by (resource type code, name) for each pattern type,
    and the prefixed names of each resource type in a sorted list."""

    def __init__(self, bindings: Iterable[AclBinding] = ()) -> None:
        self._literal: dict[tuple[int, str], set[AclBinding]] = {}
        self._prefixed: dict[tuple[int, str], set[AclBinding]] = {}
        self._prefixes: dict[int, SortedList] = {}  # the prefixed names of each resource type, sorted
        self._count = 0
        self.replace_all(bindings)

    def __len__(self) -> int:
        return self._count

    def __contains__(self, binding: AclBinding) -> bool:
        bucket = self._buckets(binding).get((int(binding.resource_type), binding.name))
        return bucket is not None and binding in bucket

    def replace_all(self, bindings: Iterable[AclBinding]) -> None:
        """Become exactly `bindings` (a full metadata update), in place: authorizers sharing it see the change."""
        self._literal, self._prefixed, self._prefixes, self._count = {}, {}, {}, 0
        for binding in bindings:
            self.add(binding)

    def __iter__(self):
        for buckets in (self._literal, self._prefixed):
            for bindings in buckets.values():
                yield from bindings

    def _buckets(self, binding: AclBinding) -> dict[tuple[int, str], set[AclBinding]]:
        if binding.pattern is PatternType.LITERAL:
            return self._literal
        assert binding.pattern is PatternType.PREFIXED, binding
        return self._prefixed

    def add(self, binding: AclBinding) -> bool:
        buckets, key = self._buckets(binding), (int(binding.resource_type), binding.name)
        bucket = buckets.get(key)
        if bucket is None:
            bucket = buckets[key] = set()
            if buckets is self._prefixed:
                self._prefixes.setdefault(key[0], SortedList()).add(binding.name)
        elif binding in bucket:
            return False
        bucket.add(binding)
        self._count += 1
        return True

    def remove(self, binding: AclBinding) -> bool:
        buckets, key = self._buckets(binding), (int(binding.resource_type), binding.name)
        bucket = buckets.get(key)
        if bucket is None or binding not in bucket:
            return False
        bucket.discard(binding)
        self._count -= 1
        if not bucket:
            del buckets[key]
            if buckets is self._prefixed:
                self._prefixes[key[0]].remove(binding.name)
        return True

    def applying_to(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        """Every binding whose pattern covers the resource: literal, wildcard and prefixes of its name."""
        code = int(resource_type)
        found = [*self._literal.get((code, name), ()), *self._literal.get((code, WILDCARD_RESOURCE), ())]
        prefixes = self._prefixes.get(code)
        if prefixes:
            for prefix in _prefixes_in(prefixes, name):
                found.extend(self._prefixed[(code, prefix)])
        return found

    def matching(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        """The bindings a DescribeAcls or DeleteAcls filter selects, in a stable order."""
        if (binding_filter.pattern is PatternType.LITERAL and binding_filter.name is not None
                and binding_filter.resource_type is not ResourceType.ANY):
            candidates: Iterable[AclBinding] = self._literal.get((int(binding_filter.resource_type),
                                                                  binding_filter.name), ())
        elif binding_filter.pattern is PatternType.MATCH and binding_filter.name is not None \
                and binding_filter.resource_type is not ResourceType.ANY:
            candidates = self.applying_to(binding_filter.resource_type, binding_filter.name)
        else:
            candidates = self
        return sorted(b for b in candidates if binding_filter.matches(b))


def _prefixes_in(prefixes: SortedList, name: str):
    """The entries of `prefixes` that are prefixes of `name`, longest first.

    A prefix of `name` sorts at or before it. Take the greatest entry <= name: if it is a prefix, yield it and
    continue strictly below it; if not, no entry between it and `name` exists, so every longer prefix of `name`
    than their common prefix is absent too, and the search continues at or below that common prefix."""
    index = prefixes.bisect_right(name)
    while index > 0:
        entry = prefixes[index - 1]
        if name.startswith(entry):
            yield entry
            index -= 1
        else:
            index = prefixes.bisect_right(os.path.commonprefix([entry, name]))


class Authorizer:
    def __init__(self, config: AuthorizerConfig, acls: AclIndex | None = None) -> None:
        """acls: the index to decide on, shared with whoever keeps it current (a broker's metadata image)."""
        self.config = config
        self.acls = AclIndex() if acls is None else acls

    @property
    def enabled(self) -> bool:
        return self.config.enabled

    def authorize(self, principal: str, host: str, operation: Operation, resource_type: ResourceType,
                  name: str) -> bool:
        if not self.config.enabled or principal in self.config.super_users:
            return True
        applying = self.acls.applying_to(resource_type, name)
        if not applying:
            return self.config.allow_everyone_if_no_acl_found
        granting = _GRANTED_BY[operation]
        allowed = False
        for binding in applying:
            if binding.principal not in (principal, WILDCARD_PRINCIPAL) or binding.host not in (host, WILDCARD_HOST):
                continue
            if binding.permission is Permission.DENY:
                if binding.operation in (operation, Operation.ALL):
                    return False  # a DENY wins over any ALLOW; it applies to its own operation, not implied ones
            elif binding.operation in granting:
                allowed = True
        return allowed

    def authorize_any(self, principal: str, host: str, operation: Operation, resource_type: ResourceType) -> bool:
        """Whether some resource of the type could be allowed (Kafka's authorizeByResourceType, KIP-679): an
        ALLOW for the principal on any name and no DENY on the wildcard. Used for InitProducerId without
        IDEMPOTENT_WRITE, which a WRITE on any topic also grants."""
        if not self.config.enabled or principal in self.config.super_users:
            return True
        granting = _GRANTED_BY[operation]
        for binding in self.acls.applying_to(resource_type, WILDCARD_RESOURCE):
            if (binding.permission is Permission.DENY and binding.principal in (principal, WILDCARD_PRINCIPAL)
                    and binding.host in (host, WILDCARD_HOST) and binding.operation in (operation, Operation.ALL)):
                return False
        return any(b.resource_type is resource_type and b.permission is Permission.ALLOW
                   and b.principal in (principal, WILDCARD_PRINCIPAL) and b.host in (host, WILDCARD_HOST)
                   and b.operation in granting for b in self.acls)


def cluster_action_grants(authorizer: Authorizer) -> Callable[[str, str], bool]:
    """(principal, host) -> whether the authorizer's current ACLs allow CLUSTER_ACTION on the cluster."""
    def grants(principal: str, host: str) -> bool:
        return authorizer.authorize(principal, host, Operation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
    return grants
