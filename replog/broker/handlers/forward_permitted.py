"""Forwarding (KIP-590) a request of which the principal may touch only some resources: the controller gets
the request without the others, and the client gets the controller's answers plus the refusals.

Kafka forwards the whole request in an Envelope and its controller authorizes each resource; replog's
broker authorizes before forwarding (it holds the same ACLs), so the controller sees only permitted work.
"""

import dataclasses
from collections.abc import Sequence
from typing import Any

from replog.protocol.messages import decode_response, encode, encode_response
from replog.server.dispatch import RequestContext

from .context import ForwardToController


async def forward_permitted(ctx: RequestContext, forward: ForwardToController, request: Any, *,
                            request_field: str, permitted: Sequence[Any], response_field: str,
                            refusals: list[dict], empty_response: dict) -> bytes:
    """request_field: the request's list of resources, of which `permitted` stay; response_field: the
    response's list of answers, to which `refusals` (one answer dict per refused resource) are added.
    empty_response: the response's other fields, for when nothing is left to forward."""
    api_key, version = ctx.header.api_key, ctx.api_version
    if not refusals:
        return await forward(ctx)
    if not permitted:
        return encode_response(api_key, version, {**empty_response, response_field: refusals})
    body = encode(dataclasses.replace(request, **{request_field: tuple(permitted)}))
    answer = decode_response(api_key, version, await forward(ctx, body), 0)
    merged = {f.name: getattr(answer, f.name) for f in dataclasses.fields(answer)}
    merged[response_field] = [*getattr(answer, response_field), *refusals]
    return encode_response(api_key, version, merged)
