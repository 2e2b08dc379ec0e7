"""CreateAcls (30), DescribeAcls (29) and DeleteAcls (31), v1-3, as decisions over an AclIndex: the bindings
a request names, what it changes, and the response body. The single node and the controller both use them;
only how a change is stored differs (a state file, or records in the metadata log).

Kafka's AclControlManager: each creation is judged on its own (INVALID_REQUEST with the reason), creating a
binding that exists already succeeds and changes nothing, and a DeleteAcls filter answers the bindings it
removed. v0 of these APIs (before pattern types) is gone from Kafka 4 (KIP-896) and from kio's schemas.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from .acls import (
    AclBinding,
    AclBindingFilter,
    InvalidAclError,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    binding_of,
    code_of,
)
from .authorizer import AclIndex


@dataclass(slots=True)
class AclChanges:
    """A request's outcome: the response body, and the bindings to add and remove if it is carried out."""

    body: dict
    added: list[AclBinding] = field(default_factory=list)
    removed: list[AclBinding] = field(default_factory=list)


def bindings_of_creations(request) -> list[AclBinding]:
    return [binding_of(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host, c.operation,
                       c.permission_type) for c in request.creations]


def filter_of(f) -> AclBindingFilter:
    """A DescribeAcls request or a DeleteAcls filter as an AclBindingFilter (unknown codes stay UNKNOWN)."""
    return AclBindingFilter(code_of(ResourceType, f.resource_type_filter), f.resource_name_filter,
                            code_of(PatternType, f.pattern_type_filter), f.principal_filter, f.host_filter,
                            code_of(Operation, f.operation), code_of(Permission, f.permission_type))


def decide_creations(index: AclIndex, bindings: Iterable[AclBinding]) -> AclChanges:
    results, added, seen = [], [], set()
    for binding in bindings:
        try:
            binding.validate()
        except InvalidAclError as e:
            results.append({"error_code": ErrorCode.invalid_request, "error_message": str(e)})
            continue
        results.append({"error_code": ErrorCode.none, "error_message": None})
        if binding not in seen and binding not in index:
            seen.add(binding)
            added.append(binding)
    return AclChanges({"throttle_time": 0, "results": results}, added=added)


def decide_deletions(index: AclIndex, filters: Iterable[AclBindingFilter]) -> AclChanges:
    filter_results, removed, seen = [], [], set()
    for binding_filter in filters:
        reason = binding_filter.invalid_reason()
        if reason is not None:
            filter_results.append({"error_code": ErrorCode.invalid_request, "error_message": reason,
                                   "matching_acls": []})
            continue
        matching = index.matching(binding_filter)
        filter_results.append({"error_code": ErrorCode.none, "error_message": None,
                               "matching_acls": [_matching_acl(b) for b in matching]})
        for binding in matching:
            if binding not in seen:
                seen.add(binding)
                removed.append(binding)
    return AclChanges({"throttle_time": 0, "filter_results": filter_results}, removed=removed)


def _matching_acl(b: AclBinding) -> dict:
    return {"error_code": ErrorCode.none, "error_message": None, "resource_type": int(b.resource_type),
            "resource_name": b.name, "pattern_type": int(b.pattern), "principal": b.principal, "host": b.host,
            "operation": int(b.operation), "permission_type": int(b.permission)}


def describe_body(index: AclIndex, binding_filter: AclBindingFilter) -> dict:
    reason = binding_filter.invalid_reason()
    if reason is not None:
        return error_describe_body(ErrorCode.invalid_request, reason)
    resources: dict[tuple[int, str, int], list[dict]] = {}
    for b in index.matching(binding_filter):
        resources.setdefault((int(b.resource_type), b.name, int(b.pattern)), []).append(
            {"principal": b.principal, "host": b.host, "operation": int(b.operation),
             "permission_type": int(b.permission)})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "resources": [
        {"resource_type": rtype, "resource_name": name, "pattern_type": pattern, "acls": acls}
        for (rtype, name, pattern), acls in resources.items()]}


def error_describe_body(error: ErrorCode, message: str | None) -> dict:
    return {"throttle_time": 0, "error_code": error, "error_message": message, "resources": []}


def error_create_body(count: int, error: ErrorCode, message: str | None) -> dict:
    return {"throttle_time": 0, "results": [{"error_code": error, "error_message": message}] * count}


def error_delete_body(count: int, error: ErrorCode, message: str | None) -> dict:
    return {"throttle_time": 0, "filter_results": [
        {"error_code": error, "error_message": message, "matching_acls": []}] * count}
