"""ACLs: the admin calls behind `replog acls` (Kafka's kafka-acls): CreateAcls, DescribeAcls, DeleteAcls."""

from collections.abc import Sequence

from kio.schema.errors import ErrorCode

from ..protocol.apis import ApiKey
from ..security.acls import AclBinding, AclBindingFilter, binding_of
from .admin import Admin
from .errors import KafkaError


def _check(code: int, message: str | None) -> None:
    if code != ErrorCode.none:
        raise KafkaError(code, message or ErrorCode(code).name)


async def create_acls(admin: Admin, bindings: Sequence[AclBinding]) -> None:
    """Raises KafkaError for the first binding the cluster refused (e.g. INVALID_REQUEST)."""
    assert bindings
    request = {"creations": [
        {"resource_type": int(b.resource_type), "resource_name": b.name, "resource_pattern_type": int(b.pattern),
         "principal": b.principal, "host": b.host, "operation": int(b.operation),
         "permission_type": int(b.permission)} for b in bindings]}
    response = await admin.send_to_any_broker(ApiKey.CREATE_ACLS, request)
    for result in response.results:
        _check(int(result.error_code), result.error_message)


def _filter_fields(f: AclBindingFilter) -> dict:
    return {"resource_type_filter": int(f.resource_type), "resource_name_filter": f.name,
            "pattern_type_filter": int(f.pattern), "principal_filter": f.principal, "host_filter": f.host,
            "operation": int(f.operation), "permission_type": int(f.permission)}


async def describe_acls(admin: Admin, binding_filter: AclBindingFilter) -> list[AclBinding]:
    response = await admin.send_to_any_broker(ApiKey.DESCRIBE_ACLS, _filter_fields(binding_filter))
    _check(int(response.error_code), response.error_message)
    return [binding_of(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
                       a.permission_type) for r in response.resources for a in r.acls]


async def delete_acls(admin: Admin, filters: Sequence[AclBindingFilter]) -> list[AclBinding]:
    """The bindings deleted; raises KafkaError for the first filter the cluster refused."""
    assert filters
    response = await admin.send_to_any_broker(ApiKey.DELETE_ACLS, {"filters": [_filter_fields(f) for f in filters]})
    deleted = []
    for result in response.filter_results:
        _check(int(result.error_code), result.error_message)
        deleted += [binding_of(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation,
                               m.permission_type) for m in result.matching_acls]
    return deleted
