"""AlterConfigs (key 33) v0-2 and IncrementalAlterConfigs (key 44) v0-1 (KIP-339). In a cluster the
controller decides (forwarded, KIP-590) and propagates the result with UpdateMetadata; a single node decides
with the same rules (replog/log/dynamic_configs.py) and applies at once."""

import logging

from kio.schema.errors import ErrorCode

from replog.client.errors import KafkaError
from replog.log.dynamic_configs import InvalidConfigError, resources_of_request
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.server.dispatch import RequestContext

from .context import ConfigAdmin

log = logging.getLogger(__name__)


def _body(request, outcomes: list[tuple[ErrorCode, str | None]]) -> dict:
    responses = [{"error_code": error, "error_message": message, "resource_type": r.resource_type,
                  "resource_name": r.resource_name} for r, (error, message) in zip(request.resources, outcomes,
                                                                                      strict=True)]
    return {"throttle_time": 0, "responses": responses}


def handle(ctx: RequestContext, admin: ConfigAdmin):
    api_key = ctx.header.api_key
    request = decode_request(api_key, ctx.api_version, ctx.frame, ctx.body_offset)
    if admin.forward_to_controller is not None:
        return _forward(ctx, admin, request)
    try:
        resources = resources_of_request(request, incremental=api_key == ApiKey.INCREMENTAL_ALTER_CONFIGS)
    except InvalidConfigError as e:
        outcomes = [(ErrorCode.invalid_request, str(e))] * len(request.resources)
    else:
        outcomes = admin.local.alter_configs(resources, incremental=api_key == ApiKey.INCREMENTAL_ALTER_CONFIGS,
                                             validate_only=request.validate_only)
    return [encode_response(api_key, ctx.api_version, _body(request, outcomes))]


async def _forward(ctx: RequestContext, admin: ConfigAdmin, request) -> list:
    try:
        return [await admin.forward_to_controller(ctx)]
    except (KafkaError, OSError) as e:
        log.warning("forwarding %s to the controller failed: %s", ApiKey(ctx.header.api_key).name, e)
        outcomes = [(ErrorCode.request_timed_out, f"controller unreachable: {e}")] * len(request.resources)
        return [encode_response(ctx.header.api_key, ctx.api_version, _body(request, outcomes))]
