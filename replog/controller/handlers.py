"""The APIs the controller serves: ApiVersions and SASL (shared with the broker), and AlterPartition.

AlterPartition (key 56), v2-3: a partition leader proposes a new ISR (KIP-497). Only the inter-broker
principal may send it (Kafka's ControllerApis authorizes CLUSTER_ACTION); anyone else gets
CLUSTER_AUTHORIZATION_FAILED for the whole request.
"""

import functools

from kio.schema.errors import ErrorCode

from replog.broker.handlers import api_versions, sasl_authenticate, sasl_handshake
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response

from .cluster import alter_partition_error

CONTROLLER_APIS = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE,
                             ApiKey.ALTER_PARTITION})


def handle_alter_partition(ctx, controller) -> list:
    request = decode_request(ApiKey.ALTER_PARTITION, ctx.api_version, ctx.frame, ctx.body_offset)
    if not ctx.session.cluster_action:
        body = alter_partition_error(ErrorCode.cluster_authorization_failed)
    else:
        body = controller.alter_partition(request, ctx.api_version)
    return [encode_response(ApiKey.ALTER_PARTITION, ctx.api_version, body)]


def build_handlers(controller) -> dict:
    """`controller` must have `config.inter_broker_secret` (read by the SASL handlers) and `alter_partition`."""
    handlers = {
        ApiKey.API_VERSIONS: functools.partial(api_versions.handle, broker=controller, served=CONTROLLER_APIS),
        ApiKey.SASL_HANDSHAKE: functools.partial(sasl_handshake.handle, broker=controller),
        ApiKey.SASL_AUTHENTICATE: functools.partial(sasl_authenticate.handle, broker=controller),
        ApiKey.ALTER_PARTITION: functools.partial(handle_alter_partition, controller=controller),
    }
    assert set(handlers) == CONTROLLER_APIS
    return handlers


def unsupported_version_body() -> list:
    return api_versions.unsupported_version_body(CONTROLLER_APIS)
