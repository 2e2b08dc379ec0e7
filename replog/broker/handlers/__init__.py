"""One module per API; `build_handlers` binds each to the broker it serves."""

import functools

from replog.protocol.apis import ApiKey
from replog.server.handlers import shared_handlers

from . import (
    create_topics,
    delete_topics,
    fetch,
    init_producer_id,
    leader_and_isr,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    produce,
    stop_replica,
    update_metadata,
)

_MODULES = {
    ApiKey.METADATA: metadata,
    ApiKey.PRODUCE: produce,
    ApiKey.FETCH: fetch,
    ApiKey.LIST_OFFSETS: list_offsets,
    ApiKey.CREATE_TOPICS: create_topics,
    ApiKey.DELETE_TOPICS: delete_topics,
    ApiKey.INIT_PRODUCER_ID: init_producer_id,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch,
    ApiKey.LEADER_AND_ISR: leader_and_isr,
    ApiKey.UPDATE_METADATA: update_metadata,
    ApiKey.STOP_REPLICA: stop_replica,
}
BROKER_APIS = frozenset(_MODULES) | {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE}


def build_handlers(broker) -> dict:
    handlers = {key: functools.partial(module.handle, broker=broker) for key, module in _MODULES.items()}
    handlers.update(shared_handlers(BROKER_APIS, broker.config.inter_broker_secret))
    return handlers
