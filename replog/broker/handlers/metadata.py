"""Metadata (key 3), v1-12: brokers, controller, and per topic the partitions' leader, replicas and ISR.

Topics that do not exist are created when the client allows it (v4+ flag; always before v4) and the broker
has auto.create.topics.enable, as Kafka does, if the principal may CREATE on the cluster or on the topic (else
TOPIC_AUTHORIZATION_FAILED, as KafkaApis.handleTopicMetadataRequest). A single node creates them itself; a
broker in a cluster asks the controller with a CreateTopics of its own (Kafka's AutoTopicCreationManager) and
answers LEADER_NOT_AVAILABLE until the topic reaches it, so the client asks again.
"""

import asyncio
import logging

from kio.schema.errors import ErrorCode

from replog.client.errors import KafkaError
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, decode_response, encode_request, encode_response
from replog.protocol.topics import OFFSETS_TOPIC, topic_name_error
from replog.security.acls import CLUSTER_NAME, Operation, ResourceType
from replog.server.dispatch import RequestContext

from ..local_controller import TopicCreationError
from ..metadata import MetadataImage, TopicMetadata
from .context import TopicAdmin

log = logging.getLogger(__name__)
# A broker in a cluster knows no topic until the controller's first UpdateMetadata (after every restart).
# Answering before it would tell clients that every topic is unknown, and librdkafka then fails the messages
# it holds for them. Kafka's KRaft broker processes no client request before its initial metadata catch-up
# (BrokerServer.startup); replog must listen earlier (the controller pushes that metadata to the listener),
# so a Metadata request waits for it instead, bounded so that an unreachable controller cannot stall it.
FIRST_METADATA_WAIT_S = 10.0
AUTO_CREATE_VERSION = 7  # of CreateTopics, which every replog controller takes
AUTO_CREATE_TIMEOUT_MS = 10_000


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
    result = _respond(ctx, topics, request)
    return result if isinstance(result, list) else await result


def _respond(ctx: RequestContext, topics: TopicAdmin, request):
    """The response parts, or (in a cluster, when topics are to be auto-created) an awaitable of them."""
    image = topics.image
    allow_auto_create = ctx.api_version < 4 or request.allow_auto_topic_creation
    to_create: list[str] = []  # in a cluster: the controller is asked to create these
    if request.topics is None:
        # Topics the principal may not DESCRIBE are left out of "all topics", as Kafka hides them.
        names = sorted(topics.access.allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, image.topics))
        described = [_describe_topic(ctx, topics, name, allow_auto_create, to_create) for name in names]
    else:
        names = [t.name for t in request.topics if t.name is not None]
        describable = topics.access.allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, names)
        described = [_describe_topic(ctx, topics, name, allow_auto_create, to_create) if name in describable
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
    if to_create:
        return _encoded_after_creating(ctx, topics, body, to_create)
    return [encode_response(ApiKey.METADATA, ctx.api_version, body)]


async def _encoded_after_creating(ctx: RequestContext, topics: TopicAdmin, body: dict, names: list[str]) -> list:
    """Ask the controller to create the topics; each answers LEADER_NOT_AVAILABLE (being created), or the
    controller's reason it cannot be (an invalid replication factor, say)."""
    errors = await _create_on_controller(topics, list(dict.fromkeys(names)))
    for entry in body["topics"]:
        if entry["name"] in errors:
            entry["error_code"] = errors[entry["name"]]
    return [encode_response(ApiKey.METADATA, ctx.api_version, body)]


async def _create_on_controller(topics: TopicAdmin, names: list[str]) -> dict[str, ErrorCode]:
    assert topics.send_to_controller is not None
    defaults = topics.defaults
    request = {"topics": [{"name": name, "num_partitions": defaults.num_partitions,
                           "replication_factor": defaults.replication_factor, "assignments": [], "configs": []}
                          for name in names], "timeout": AUTO_CREATE_TIMEOUT_MS, "validate_only": False}
    try:
        answer = await topics.send_to_controller(ApiKey.CREATE_TOPICS, AUTO_CREATE_VERSION,
                                                 encode_request(ApiKey.CREATE_TOPICS, AUTO_CREATE_VERSION, request))
    except (KafkaError, OSError) as e:
        log.warning("auto-creating topics %s: the controller is unreachable: %s", names, e)
        return {name: ErrorCode.leader_not_available for name in names}  # the client asks again
    response = decode_response(ApiKey.CREATE_TOPICS, AUTO_CREATE_VERSION, answer, 0)
    being_created = (ErrorCode.none, ErrorCode.topic_already_exists)
    return {str(t.name): ErrorCode.leader_not_available if t.error_code in being_created else t.error_code
            for t in response.topics}


def _describe_topic(ctx: RequestContext, topics: TopicAdmin, name: str, allow_auto_create: bool,
                    to_create: list[str]) -> dict:
    topic = topics.image.topics.get(name)
    if topic is None:
        invalid = topic_name_error(name)
        if invalid is not None:
            return _topic_error(name, ErrorCode.invalid_topic_exception)
        defaults = topics.defaults
        if not (allow_auto_create and defaults.auto_create):
            return _topic_error(name, ErrorCode.unknown_topic_or_partition)
        if not (topics.access.allows_cluster(ctx, Operation.CREATE)
                or topics.access.allows(ctx, Operation.CREATE, ResourceType.TOPIC, name)):
            return _topic_error(name, ErrorCode.topic_authorization_failed)  # auto-creation needs CREATE
        if topics.in_cluster:
            if name == OFFSETS_TOPIC:  # made with its own settings when a group coordinator is first looked up
                return _topic_error(name, ErrorCode.unknown_topic_or_partition)
            to_create.append(name)
            return _topic_error(name, ErrorCode.leader_not_available)
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
