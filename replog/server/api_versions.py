"""ApiVersions (key 18), v0-3: the APIs and version ranges this server answers.

Each server (broker, controller) advertises exactly the APIs it has handlers for.
"""

from collections.abc import Iterable, Mapping

from kio.schema.errors import ErrorCode

from replog.protocol.apis import SUPPORTED_APIS, ApiKey, ApiSpec
from replog.protocol.messages import decode_request, encode_response

from .dispatch import RequestContext


def _api_keys(served: Iterable[int], api_specs: Mapping[int, ApiSpec]) -> list[dict]:
    specs = (api_specs[key] for key in sorted(served))
    return [{"api_key": s.key, "min_version": s.min_version, "max_version": s.max_version} for s in specs]


def handle(ctx: RequestContext, served: frozenset[int], api_specs: Mapping[int, ApiSpec] = SUPPORTED_APIS) -> list:
    decode_request(ApiKey.API_VERSIONS, ctx.api_version, ctx.frame, ctx.body_offset)
    body = {"error_code": ErrorCode.none, "api_keys": _api_keys(served, api_specs), "throttle_time": 0}
    return [encode_response(ApiKey.API_VERSIONS, ctx.api_version, body)]


def unsupported_version_body(served: frozenset[int], api_specs: Mapping[int, ApiSpec] = SUPPORTED_APIS) -> list:
    """KIP-511: a v0 body naming our versions, so a client that asked for too new a version can retry."""
    body = {"error_code": ErrorCode.unsupported_version, "api_keys": _api_keys(served, api_specs)}
    return [encode_response(ApiKey.API_VERSIONS, 0, body)]
