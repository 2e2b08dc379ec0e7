"""CreateAcls (30) and DeleteAcls (31), v1-3, which brokers forward (KIP-590) once their authorizer has let the
client ALTER the cluster: the controller decides (security/acl_requests.py), logs an acl or remove_acl record
per binding, applies them as replay does, and sends every broker a full UpdateMetadata with the new bindings.
Like the other forwarded requests, only the inter-broker principal may send them."""

import logging

from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.security import acl_requests
from replog.server.dispatch import RequestContext

from . import records
from .admin import AdminTarget
from .propagation import PropagationError

log = logging.getLogger(__name__)

ACL_APIS = frozenset({ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS})


def _refusal(ctx: RequestContext, target: AdminTarget) -> tuple[ErrorCode, str] | None:
    if not ctx.may_act_for_cluster:
        return ErrorCode.cluster_authorization_failed, "not a broker"
    if not target.active:
        return ErrorCode.not_controller, "not the active controller"
    return None


async def handle_create_acls(ctx: RequestContext, target: AdminTarget) -> list:
    request = decode_request(ApiKey.CREATE_ACLS, ctx.api_version, ctx.frame, ctx.body_offset)
    refusal = _refusal(ctx, target)
    if refusal is not None:
        body = acl_requests.error_create_body(len(request.creations), *refusal)
    else:
        changes = acl_requests.decide_creations(target.metadata.acls, acl_requests.bindings_of_creations(request))
        await _commit(target, [records.acl_record(b) for b in changes.added])
        body = changes.body
    return [encode_response(ApiKey.CREATE_ACLS, ctx.api_version, body)]


async def handle_delete_acls(ctx: RequestContext, target: AdminTarget) -> list:
    request = decode_request(ApiKey.DELETE_ACLS, ctx.api_version, ctx.frame, ctx.body_offset)
    refusal = _refusal(ctx, target)
    if refusal is not None:
        body = acl_requests.error_delete_body(len(request.filters), *refusal)
    else:
        filters = [acl_requests.filter_of(f) for f in request.filters]
        changes = acl_requests.decide_deletions(target.metadata.acls, filters)
        await _commit(target, [records.remove_acl_record(b) for b in changes.removed])
        body = changes.body
    return [encode_response(ApiKey.DELETE_ACLS, ctx.api_version, body)]


async def _commit(target: AdminTarget, new_records: list[records.Record]) -> None:
    if not new_records:
        return
    target.commit_records(new_records)
    log.info("ACLs changed: %d record(s)", len(new_records))
    try:
        await target.propagator.wait(target.propagator.update_metadata())
    except PropagationError as e:
        # Committed: a broker that missed it gets the bindings with the next full UpdateMetadata.
        log.warning("ACL change committed but not yet applied everywhere: %s", e)
