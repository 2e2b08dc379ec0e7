"""Metadata (key 3), v1-12: brokers, controller, and per topic the partitions' leader, replicas and ISR.

Topics that do not exist are created when the client allows it (v4+ flag; always before v4) and the broker
has auto.create.topics.enable, as Kafka does.
"""

import asyncio

from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.protocol.topics import OFFSETS_TOPIC, topic_name_error
from replog.security.acls import CLUSTER_NAME, Operation, ResourceType
from replog.server.dispatch import RequestContext

from ..local_controller import TopicCreationError
from ..metadata import MetadataImage, TopicMetadata
from .context import TopicAdmin

# A broker in a cluster knows no topic until the controller's first UpdateMetadata (after every restart).
# Answering before it would tell clients that every topic is unknown, and librdkafka then fails the messages
# it holds for them. Kafka's KRaft broker processes no client request before its initial metadata catch-up
# (BrokerServer.startup); replog must listen earlier (the controller pushes that metadata to the listener),
# so a Metadata request waits for it instead, bounded so that an unreachable controller cannot stall it.
FIRST_METADATA_WAIT_S = 10.0


def handle(ctx: RequestContext, topics: TopicAdmin):
    request = decode_request(ApiKey.METADATA, ctx.api_version, ctx.frame, ctx.body_offset)
    if topics.in_cluster and not topics.has_metadata.is_set():
        return _after_first_metadata(ctx, topics, request)
    return _respond(ctx, topics, request)


async def _after_first_metadata(ctx: RequestContext, topics: TopicAdmin, request) -> list:
    try:
        await asyncio.wait_for(topics.has_metadata.wait(), FIRST_METADATA_WAIT_S)
    except TimeoutError:
        pass  # answer with what is known
    return _respond(ctx, topics, request)


def _respond(ctx: RequestContext, topics: TopicAdmin, request) -> list:
    image = topics.image
    allow_auto_create = ctx.api_version < 4 or request.allow_auto_topic_creation
    if request.topics is None:
        # Topics the principal may not DESCRIBE are left out of "all topics", as Kafka hides them.
        names = sorted(topics.access.allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, image.topics))
        described = [_describe_topic(ctx, topics, name, allow_auto_create) for name in names]
    else:
        names = [t.name for t in request.topics if t.name is not None]
        describable = topics.access.allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, names)
        described = [_describe_topic(ctx, topics, name, allow_auto_create) if name in describable
                     else _topic_error(name, ErrorCode.topic_authorization_failed) for name in names]
    body = {
        "throttle_time": 0,
        # Each broker's address on the listener this client connected to (Kafka's per-listener metadata).
        "brokers": [{"node_id": b.node_id, "host": host, "port": port, "rack": b.rack}
                    for b in image.brokers.values() for host, port in [b.address_for(ctx.session.listener_name)]],
        "cluster_id": image.cluster_id,
        "controller_id": image.controller_id,
        "topics": described,
    }
    if getattr(request, "include_topic_authorized_operations", False):  # v8+ (KIP-430)
        for entry in described:
            if entry["error_code"] == ErrorCode.none:
                entry["topic_authorized_operations"] = topics.access.authorized_operations(
                    ctx, ResourceType.TOPIC, entry["name"])
    if getattr(request, "include_cluster_authorized_operations", False):  # v8-10
        body["cluster_authorized_operations"] = topics.access.authorized_operations(ctx, ResourceType.CLUSTER,
                                                                                    CLUSTER_NAME)
    return [encode_response(ApiKey.METADATA, ctx.api_version, body)]


def _describe_topic(ctx: RequestContext, topics: TopicAdmin, name: str, allow_auto_create: bool) -> dict:
    topic = topics.image.topics.get(name)
    if topic is None:
        invalid = topic_name_error(name)
        if invalid is not None:
            return _topic_error(name, ErrorCode.invalid_topic_exception)
        # In a cluster only the controller creates topics (forwarding auto-creation to it is not built yet).
        defaults = topics.defaults
        if not (allow_auto_create and defaults.auto_create and not topics.in_cluster):
            return _topic_error(name, ErrorCode.unknown_topic_or_partition)
        if not (topics.access.allows_cluster(ctx, Operation.CREATE)
                or topics.access.allows(ctx, Operation.CREATE, ResourceType.TOPIC, name)):
            return _topic_error(name, ErrorCode.topic_authorization_failed)  # auto-creation needs CREATE
        try:
            topic = topics.create_topic(name, defaults.num_partitions, defaults.replication_factor, {})
        except TopicCreationError as e:
            return _topic_error(name, e.error_code)
    return _topic_entry(topics.image, topic)


def _topic_error(name: str, code: ErrorCode) -> dict:
    return {"error_code": code, "name": name, "topic_id": None, "is_internal": False, "partitions": []}


def _topic_entry(image: MetadataImage, topic: TopicMetadata) -> dict:
    live = image.brokers
    partitions = []
    for index in sorted(topic.partitions):
        p = topic.partitions[index]
        leader_alive = p.leader in live
        partitions.append({
            "error_code": ErrorCode.none if leader_alive else ErrorCode.leader_not_available,
            "partition_index": index,
            "leader_id": p.leader if leader_alive else -1,
            "leader_epoch": p.leader_epoch,
            "replica_nodes": p.replicas,
            "isr_nodes": p.isr,
            "offline_replicas": [r for r in p.replicas if r not in live or r in p.offline_replicas],
        })
    return {"error_code": ErrorCode.none, "name": topic.name, "topic_id": topic.topic_id,
            "is_internal": topic.name == OFFSETS_TOPIC,
            "partitions": partitions}
