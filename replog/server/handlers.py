"""The handlers every server has: ApiVersions for the APIs it serves, and SASL/PLAIN for the inter-broker
principal."""

import functools
from collections.abc import Mapping

from replog.protocol.apis import SUPPORTED_APIS, ApiKey, ApiSpec

from . import api_versions, sasl_authenticate, sasl_handshake
from .dispatch import Handler


def shared_handlers(served: frozenset[int], inter_broker_secret: str | None,
                    api_specs: Mapping[int, ApiSpec] = SUPPORTED_APIS) -> dict[int, Handler]:
    """served: every API key the server answers (these three among them); api_specs: their version ranges."""
    assert {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE} <= served
    return {
        ApiKey.API_VERSIONS: functools.partial(api_versions.handle, served=served, api_specs=api_specs),
        ApiKey.SASL_HANDSHAKE: functools.partial(sasl_handshake.handle, inter_broker_secret=inter_broker_secret),
        ApiKey.SASL_AUTHENTICATE: sasl_authenticate.handle,
    }
