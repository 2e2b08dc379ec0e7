"""AlterConfigs (key 33) v0-2 and IncrementalAlterConfigs (key 44) v0-1 (KIP-339). In a cluster the
controller decides (forwarded, KIP-590) and propagates the result with UpdateMetadata; a single node decides
with the same rules (replog/log/dynamic_configs.py) and applies at once."""

import dataclasses
import logging

from kio.schema.errors import ErrorCode

from replog.client.errors import KafkaError
from replog.log.dynamic_configs import InvalidConfigError, ResourceType, resources_of_request
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.security.acls import Operation
from replog.server.dispatch import RequestContext

from .context import ConfigAdmin
from .forward_permitted import forward_permitted

log = logging.getLogger(__name__)


def _body(resources, outcomes: list[tuple[ErrorCode, str | None]]) -> dict:
    responses = [{"error_code": error, "error_message": message, "resource_type": r.resource_type,
                  "resource_name": r.resource_name} for r, (error, message) in zip(resources, outcomes, strict=True)]
    return {"throttle_time": 0, "responses": responses}


def handle(ctx: RequestContext, admin: ConfigAdmin):
    api_key = ctx.header.api_key
    request = decode_request(api_key, ctx.api_version, ctx.frame, ctx.body_offset)
    refusals = {i: refusal for i, r in enumerate(request.resources)
                if (refusal := admin.access.config_refusal(
                    ctx, Operation.ALTER_CONFIGS,
                    topic=r.resource_name if r.resource_type == ResourceType.TOPIC else None)) is not None}
    if admin.forward_to_controller is not None:
        return _forward(ctx, admin, request, refusals)
    permitted = dataclasses.replace(request, resources=tuple(r for i, r in enumerate(request.resources)
                                                             if i not in refusals))
    try:
        resources = resources_of_request(permitted, incremental=api_key == ApiKey.INCREMENTAL_ALTER_CONFIGS)
    except InvalidConfigError as e:
        outcomes = [(ErrorCode.invalid_request, str(e))] * len(permitted.resources)
    else:
        outcomes = admin.local.alter_configs(resources, incremental=api_key == ApiKey.INCREMENTAL_ALTER_CONFIGS,
                                             validate_only=request.validate_only)
    decided = iter(outcomes)
    outcomes = [(refusals[i], None) if i in refusals else next(decided) for i in range(len(request.resources))]
    return [encode_response(api_key, ctx.api_version, _body(request.resources, outcomes))]


async def _forward(ctx: RequestContext, admin: ConfigAdmin, request, refusals: dict[int, ErrorCode]) -> list:
    assert admin.forward_to_controller is not None
    refused = [r for i, r in enumerate(request.resources) if i in refusals]
    try:
        return [await forward_permitted(
            ctx, admin.forward_to_controller, request, request_field="resources",
            permitted=[r for i, r in enumerate(request.resources) if i not in refusals], response_field="responses",
            refusals=_body(refused, [(refusals[i], None) for i in sorted(refusals)])["responses"],
            empty_response={"throttle_time": 0})]
    except (KafkaError, OSError) as e:
        log.warning("forwarding %s to the controller failed: %s", ApiKey(ctx.header.api_key).name, e)
        outcomes = [(ErrorCode.request_timed_out, f"controller unreachable: {e}")] * len(request.resources)
        return [encode_response(ctx.header.api_key, ctx.api_version, _body(request.resources, outcomes))]
