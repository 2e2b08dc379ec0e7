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
from collections.abc import Iterable
from dataclasses import dataclass

from sortedcontainers import SortedDict

from .acls import (
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

# An allowed operation that also grants these (Kafka's AclEntry.supportedOperations' implications).
_IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset({Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE,
                                   Operation.ALTER, Operation.ALL}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS, Operation.ALL}),
}


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
    """The bindings, indexed for the authorizer's lookups."""

    def __init__(self, bindings: Iterable[AclBinding] = ()) -> None:
        self._literal: dict[tuple[ResourceType, str], set[AclBinding]] = {}
        self._prefixed: dict[ResourceType, SortedDict] = {}  # name -> set of bindings
        self._count = 0
        self.replace_all(bindings)

    def __len__(self) -> int:
        return self._count

    def __contains__(self, binding: AclBinding) -> bool:
        bucket = self._bucket(binding, create=False)
        return bucket is not None and binding in bucket

    def replace_all(self, bindings: Iterable[AclBinding]) -> None:
        """Become exactly `bindings` (a full metadata update), in place: authorizers sharing it see the change."""
        self._literal, self._prefixed, self._count = {}, {}, 0
        for binding in bindings:
            self.add(binding)

    def __iter__(self):
        for bindings in self._literal.values():
            yield from bindings
        for by_name in self._prefixed.values():
            for bindings in by_name.values():
                yield from bindings

    def add(self, binding: AclBinding) -> bool:
        bucket = self._bucket(binding, create=True)
        if binding in bucket:
            return False
        bucket.add(binding)
        self._count += 1
        return True

    def remove(self, binding: AclBinding) -> bool:
        bucket = self._bucket(binding, create=False)
        if bucket is None or binding not in bucket:
            return False
        bucket.discard(binding)
        self._count -= 1
        if not bucket:
            if binding.pattern is PatternType.LITERAL:
                del self._literal[(binding.resource_type, binding.name)]
            else:
                del self._prefixed[binding.resource_type][binding.name]
        return True

    def _bucket(self, binding: AclBinding, *, create: bool) -> set[AclBinding] | None:
        if binding.pattern is PatternType.LITERAL:
            key = (binding.resource_type, binding.name)
            return self._literal.setdefault(key, set()) if create else self._literal.get(key)
        assert binding.pattern is PatternType.PREFIXED, binding
        by_name = self._prefixed.setdefault(binding.resource_type, SortedDict()) if create else \
            self._prefixed.get(binding.resource_type)
        if by_name is None:
            return None
        return by_name.setdefault(binding.name, set()) if create else by_name.get(binding.name)

    def applying_to(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        """Every binding whose pattern covers the resource: literal, wildcard and prefixes of its name."""
        found = [*self._literal.get((resource_type, name), ()), *self._literal.get((resource_type, WILDCARD_RESOURCE), ())]
        by_name = self._prefixed.get(resource_type)
        if by_name is not None:
            for prefix in _prefixes_in(by_name, name):
                found.extend(by_name[prefix])
        return found

    def matching(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        """The bindings a DescribeAcls or DeleteAcls filter selects, in a stable order."""
        if (binding_filter.pattern is PatternType.LITERAL and binding_filter.name is not None
                and binding_filter.resource_type is not ResourceType.ANY):
            candidates: Iterable[AclBinding] = self._literal.get((binding_filter.resource_type, binding_filter.name), ())
        elif binding_filter.pattern is PatternType.MATCH and binding_filter.name is not None \
                and binding_filter.resource_type is not ResourceType.ANY:
            candidates = self.applying_to(binding_filter.resource_type, binding_filter.name)
        else:
            candidates = self
        return sorted(b for b in candidates if binding_filter.matches(b))


def _prefixes_in(by_name: SortedDict, name: str):
    """The keys of `by_name` that are prefixes of `name`, longest first.

    A prefix of `name` sorts at or before it. Take the greatest key <= name: if it is a prefix, yield it and
    continue strictly below it; if not, no key between it and `name` exists, so every longer prefix of `name`
    than their common prefix is absent too, and the search continues at or below that common prefix."""
    keys = by_name.keys()
    index = by_name.bisect_right(name)
    while index > 0:
        key = keys[index - 1]
        if name.startswith(key):
            yield key
            index -= 1
        else:
            index = by_name.bisect_right(os.path.commonprefix([key, name]))


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
        granting = _IMPLIED_BY.get(operation, frozenset({operation, Operation.ALL}))
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
        granting = _IMPLIED_BY.get(operation, frozenset({operation, Operation.ALL}))
        for binding in self.acls.applying_to(resource_type, WILDCARD_RESOURCE):
            if (binding.permission is Permission.DENY and binding.principal in (principal, WILDCARD_PRINCIPAL)
                    and binding.host in (host, WILDCARD_HOST) and binding.operation in (operation, Operation.ALL)):
                return False
        return any(b.resource_type is resource_type and b.permission is Permission.ALLOW
                   and b.principal in (principal, WILDCARD_PRINCIPAL) and b.host in (host, WILDCARD_HOST)
                   and b.operation in granting for b in self.acls)

