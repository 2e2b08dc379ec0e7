"""Metadata (key 3), v1-12: brokers, controller, and per topic the partitions' leader, replicas and ISR.

Topics that do not exist are created when the client allows it (v4+ flag; always before v4) and the broker
has auto.create.topics.enable, as Kafka does.
"""

import asyncio

from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.protocol.topics import topic_name_error

from ..local_controller import TopicCreationError
from ..metadata import TopicMetadata

# A broker in a cluster knows no topic until the controller's first UpdateMetadata (after every restart).
# Answering before it would tell clients that every topic is unknown, and librdkafka then fails the messages
# it holds for them. Kafka's KRaft broker processes no client request before its initial metadata catch-up
# (BrokerServer.startup); replog must listen earlier (the controller pushes that metadata to the listener),
# so a Metadata request waits for it instead, bounded so that an unreachable controller cannot stall it.
FIRST_METADATA_WAIT_S = 10.0


def handle(ctx, broker):
    request = decode_request(ApiKey.METADATA, ctx.api_version, ctx.frame, ctx.body_offset)
    if broker.in_cluster and not broker.has_metadata.is_set():
        return _after_first_metadata(ctx, broker, request)
    return _respond(ctx, broker, request)


async def _after_first_metadata(ctx, broker, request) -> list:
    try:
        await asyncio.wait_for(broker.has_metadata.wait(), FIRST_METADATA_WAIT_S)
    except TimeoutError:
        pass  # answer with what is known
    return _respond(ctx, broker, request)


def _respond(ctx, broker, request) -> list:
    image = broker.image
    allow_auto_create = ctx.api_version < 4 or request.allow_auto_topic_creation
    if request.topics is None:
        names = sorted(image.topics)
    else:
        names = [t.name for t in request.topics if t.name is not None]
    topics = [_describe_topic(broker, name, allow_auto_create) for name in names]
    body = {
        "throttle_time": 0,
        "brokers": [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                    for b in image.brokers.values()],
        "cluster_id": image.cluster_id,
        "controller_id": image.controller_id,
        "topics": topics,
    }
    return [encode_response(ApiKey.METADATA, ctx.api_version, body)]


def _describe_topic(broker, name: str, allow_auto_create: bool) -> dict:
    topic = broker.image.topics.get(name)
    if topic is None:
        invalid = topic_name_error(name)
        if invalid is not None:
            return _topic_error(name, ErrorCode.invalid_topic_exception)
        # In a cluster only the controller creates topics (forwarding auto-creation to it is not built yet).
        if not (allow_auto_create and broker.config.auto_create_topics_enable and not broker.in_cluster):
            return _topic_error(name, ErrorCode.unknown_topic_or_partition)
        try:
            topic = broker.create_topic(name, broker.config.num_partitions,
                                        broker.config.default_replication_factor, {})
        except TopicCreationError as e:
            return _topic_error(name, e.error_code)
    return _topic_entry(broker, topic)


def _topic_error(name: str, code: ErrorCode) -> dict:
    return {"error_code": code, "name": name, "topic_id": None, "is_internal": False, "partitions": []}


def _topic_entry(broker, topic: TopicMetadata) -> dict:
    live = broker.image.brokers
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
    return {"error_code": ErrorCode.none, "name": topic.name, "topic_id": topic.topic_id, "is_internal": False,
            "partitions": partitions}
