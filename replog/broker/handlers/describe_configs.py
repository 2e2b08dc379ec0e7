"""DescribeConfigs (key 32), v1-4: topic and broker configs with sources and synonyms, from this broker's
metadata image (topic overrides and dynamic broker configs arrive with UpdateMetadata) and its static
configuration. kio has no v0 schema (Kafka 4 removed it)."""

from kio.schema.errors import ErrorCode

from replog.log.dynamic_configs import ResourceType
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.security.acls import Operation
from replog.server.dispatch import RequestContext

from ..config_describe import describe_broker, describe_topic
from .context import ConfigAdmin


def handle(ctx: RequestContext, admin: ConfigAdmin) -> list:
    request = decode_request(ApiKey.DESCRIBE_CONFIGS, ctx.api_version, ctx.frame, ctx.body_offset)
    include_synonyms = bool(getattr(request, "include_synonyms", False))  # v1+
    results = []
    for resource in request.resources:
        keys = None if resource.configuration_keys is None else set(resource.configuration_keys)
        error, message, entries = ErrorCode.none, None, []
        is_topic = resource.resource_type == ResourceType.TOPIC
        refusal = admin.access.config_refusal(ctx, Operation.DESCRIBE_CONFIGS,
                                              topic=resource.resource_name if is_topic else None)
        if refusal is not None:
            error = refusal
        elif is_topic:
            topic = admin.image.topics.get(resource.resource_name)
            if topic is None:
                error, message = ErrorCode.unknown_topic_or_partition, f"Topic {resource.resource_name} does not exist"
            else:
                entries = describe_topic(topic.configs, admin.static, admin.image.broker_configs, keys=keys,
                                         include_synonyms=include_synonyms)
        elif resource.resource_type == ResourceType.BROKER:
            error, message, entries = describe_broker(resource.resource_name, admin.static,
                                                      admin.image.broker_configs, keys=keys,
                                                      include_synonyms=include_synonyms)
        else:
            error, message = ErrorCode.invalid_request, f"Unsupported resource type {resource.resource_type}"
        results.append({"error_code": error, "error_message": message, "resource_type": resource.resource_type,
                        "resource_name": resource.resource_name, "configs": entries})
    return [encode_response(ApiKey.DESCRIBE_CONFIGS, ctx.api_version, {"throttle_time": 0, "results": results})]
