"""CreateTopics (key 19), v2-7. A single node decides itself; in a cluster the controller does (forwarded)."""

import logging

from kio.schema.errors import ErrorCode

from replog.client.errors import KafkaError
from replog.log.dynamic_configs import topic_configs_error
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.protocol.topics import topic_name_error
from replog.security.acls import Operation, ResourceType
from replog.server.dispatch import RequestContext

from ..local_controller import TopicCreationError
from .context import TopicAdmin
from .forward_permitted import forward_permitted

log = logging.getLogger(__name__)

CONFIG_SOURCE_TOPIC = 1  # DescribeConfigs' TOPIC_CONFIG source
# Kafka's ReplicationControlManager.MAX_PARTITIONS_PER_BATCH: one request may ask for at most this many
# partitions in all, else every topic in it fails with POLICY_VIOLATION (validateTotalNumberOfPartitions).
# Without it a 5-byte num_partitions of 2**31 - 1 stalls the event loop building the partition map.
MAX_PARTITIONS_PER_REQUEST = 10_000


async def _forward(ctx: RequestContext, topics: TopicAdmin, request, creatable: set[str]) -> list:
    assert topics.forward_to_controller is not None
    refused = [_error(t.name, ErrorCode.topic_authorization_failed, "Authorization failed.")
               for t in request.topics if t.name not in creatable]
    try:
        return [await forward_permitted(
            ctx, topics.forward_to_controller, request, request_field="topics",
            permitted=[t for t in request.topics if t.name in creatable], response_field="topics",
            refusals=refused, empty_response={"throttle_time": 0})]
    except (KafkaError, OSError) as e:
        log.warning("forwarding CreateTopics to the controller failed: %s", e)
        results = [_error(t.name, ErrorCode.request_timed_out, f"controller unreachable: {e}") for t in request.topics]
        return [encode_response(ApiKey.CREATE_TOPICS, ctx.api_version, {"throttle_time": 0, "topics": results})]


def handle(ctx: RequestContext, topics: TopicAdmin):
    request = decode_request(ApiKey.CREATE_TOPICS, ctx.api_version, ctx.frame, ctx.body_offset)
    if _requested_partitions(request, topics.defaults.num_partitions) > MAX_PARTITIONS_PER_REQUEST:
        results = [_error(t.name, ErrorCode.policy_violation, "Excessively large number of partitions per request.")
                   for t in request.topics]
        return [encode_response(ApiKey.CREATE_TOPICS, ctx.api_version, {"throttle_time": 0, "topics": results})]
    creatable = _creatable(ctx, topics, request)
    if topics.in_cluster:
        return _forward(ctx, topics, request, creatable)
    seen: set[str] = set()
    results = []
    for topic in request.topics:
        if topic.name not in creatable:
            results.append(_error(topic.name, ErrorCode.topic_authorization_failed, "Authorization failed."))
            continue
        if topic.name in seen:
            results.append(_error(topic.name, ErrorCode.invalid_request, "topic named twice in one request"))
            continue
        seen.add(topic.name)
        results.append(_create(topics, topic, request.validate_only))
    body = {"throttle_time": 0, "topics": results}
    return [encode_response(ApiKey.CREATE_TOPICS, ctx.api_version, body)]


def _creatable(ctx: RequestContext, topics: TopicAdmin, request) -> set[str]:
    """The topics the principal may create: all with CREATE on the cluster, else those with CREATE on them."""
    names = [t.name for t in request.topics]
    if topics.access.allows_cluster(ctx, Operation.CREATE):
        return set(names)
    return topics.access.allowed(ctx, Operation.CREATE, ResourceType.TOPIC, names)


def _requested_partitions(request, default_partitions: int) -> int:
    """As Kafka counts them: the default for -1, an assignment's size, nothing for invalid counts."""
    total = 0
    for topic in request.topics:
        if topic.assignments:
            total += len(topic.assignments)
        elif topic.num_partitions == -1:
            total += default_partitions
        elif topic.num_partitions > 0:
            total += topic.num_partitions
    return total


def _create(topics: TopicAdmin, topic, validate_only: bool) -> dict:
    invalid = topic_name_error(topic.name)
    if invalid is not None:
        return _error(topic.name, ErrorCode.invalid_topic_exception, invalid)
    if topic.assignments:
        return _error(topic.name, ErrorCode.invalid_request, "manual replica assignment is not supported yet")
    configs = {c.name: c.value for c in topic.configs if c.value is not None}
    defaults = topics.defaults
    config_error = topic_configs_error(configs, defaults.log_config)
    if config_error is not None:
        return _error(topic.name, ErrorCode.invalid_config, config_error)
    partitions = defaults.num_partitions if topic.num_partitions == -1 else topic.num_partitions
    replication = defaults.replication_factor if topic.replication_factor == -1 else topic.replication_factor
    try:
        created = topics.create_topic(topic.name, partitions, replication, configs, validate_only=validate_only)
    except TopicCreationError as e:
        return _error(topic.name, e.error_code, str(e))
    return {
        "name": topic.name, "topic_id": created.topic_id, "error_code": ErrorCode.none, "error_message": None,
        "num_partitions": partitions, "replication_factor": replication,
        "configs": [{"name": k, "value": v, "read_only": False, "config_source": CONFIG_SOURCE_TOPIC,
                     "is_sensitive": False} for k, v in sorted(configs.items())],
    }


def _error(name: str, code: ErrorCode, message: str) -> dict:
    return {"name": name, "topic_id": None, "error_code": code, "error_message": message,
            "num_partitions": -1, "replication_factor": -1, "configs": None}
