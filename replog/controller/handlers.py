"""The APIs the controller serves: ApiVersions and SASL (shared with the broker), broker sessions,
AlterPartition, and the topic administration brokers forward.

Everything but ApiVersions, SASL, DescribeQuorum and DescribeCluster is a cluster action: only the inter-broker principal may send it (Kafka's
ControllerApis authorizes CLUSTER_ACTION); anyone else gets CLUSTER_AUTHORIZATION_FAILED.
- BrokerRegistration (62) and BrokerHeartbeat (63), KIP-631: a broker's session (controller/heartbeats.py).
- AlterPartition (56), v2-3: a partition leader proposes a new ISR (KIP-497).
- DescribeCluster (60), KIP-919: the cluster id, the active controller and the controllers (describe_cluster.py).
- CreateTopics (19) and DeleteTopics (20): a broker forwards its clients' requests unchanged, as KIP-590
  forwarding does, and relays the answer; topics are decided only here. So are configs, partitions and
  elections (admin_handlers.py) and ACLs (acl_handlers.py).
"""

import functools
import logging
import uuid
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from replog.protocol.apis import CONTROLLER_API_SPECS, ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.raft.shell import QUORUM_APIS
from replog.server import api_versions
from replog.server.dispatch import Handler, RequestContext
from replog.server.handlers import shared_handlers

from .acl_handlers import ACL_APIS, handle_create_acls, handle_delete_acls
from .admin_handlers import (
    ADMIN_APIS,
    handle_alter_configs,
    handle_alter_partition_reassignments,
    handle_alter_user_scram_credentials,
    handle_create_partitions,
    handle_elect_leaders,
    handle_list_partition_reassignments,
)
from .cluster import ClusterMetadata, ControllerError, TopicRegistration, alter_partition_error
from .describe_cluster import handle_describe_cluster
from .heartbeats import HeartbeatAnswer
from .propagation import PropagationError

log = logging.getLogger(__name__)

CONTROLLER_APIS = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE,
                             ApiKey.ALTER_PARTITION, ApiKey.BROKER_REGISTRATION, ApiKey.BROKER_HEARTBEAT,
                             ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS,
                             ApiKey.DESCRIBE_CLUSTER}) | QUORUM_APIS | ADMIN_APIS | ACL_APIS
CONFIG_SOURCE_TOPIC = 1  # DescribeConfigs' TOPIC_CONFIG source, as CreateTopics v5+ reports configs


class ControllerApis(Protocol):
    """What the handlers ask of the controller (ClusterController implements it)."""

    @property
    def metadata(self) -> ClusterMetadata: ...

    def alter_partition(self, request: Any, version: int) -> dict[str, Any]: ...

    def register_broker(self, broker_id: int, incarnation_id: uuid.UUID, host: str, port: int,
                        rack: str | None = None, cluster_id: str | None = None,
                        listeners: tuple[tuple[str, str, int, int], ...] = ()) -> int: ...

    def broker_heartbeat(self, broker_id: int, broker_epoch: int, *, want_fence: bool, want_shutdown: bool,
                         offline_log_dirs: Collection[uuid.UUID] = ()) -> HeartbeatAnswer: ...

    async def create_topic(self, name: str, assignment: Mapping[int, Sequence[int]] | None = None,
                           configs: Mapping[str, str] | None = None, *, partitions: int | None = None,
                           replication_factor: int | None = None,
                           validate_only: bool = False) -> TopicRegistration: ...

    async def delete_topic(self, name: str) -> TopicRegistration: ...


def handle_alter_partition(ctx: RequestContext, controller: ControllerApis) -> list:
    request = decode_request(ApiKey.ALTER_PARTITION, ctx.api_version, ctx.frame, ctx.body_offset)
    if not ctx.may_act_for_cluster:
        body = alter_partition_error(ErrorCode.cluster_authorization_failed)
    else:
        body = controller.alter_partition(request, ctx.api_version)
    return [encode_response(ApiKey.ALTER_PARTITION, ctx.api_version, body)]


def handle_broker_registration(ctx: RequestContext, controller: ControllerApis) -> list:
    request = decode_request(ApiKey.BROKER_REGISTRATION, ctx.api_version, ctx.frame, ctx.body_offset)
    body = {"throttle_time": 0, "error_code": ErrorCode.none, "broker_epoch": -1}
    listener = request.listeners[0] if request.listeners else None
    if not ctx.may_act_for_cluster:
        body["error_code"] = ErrorCode.cluster_authorization_failed
    elif listener is None or request.incarnation_id is None or request.broker_id < 0:
        body["error_code"] = ErrorCode.invalid_request
    else:
        try:
            body["broker_epoch"] = controller.register_broker(request.broker_id, request.incarnation_id,
                                                              listener.host, listener.port, request.rack,
                                                              request.cluster_id, listeners=tuple(
                                                                  (e.name, e.host, e.port, e.security_protocol)
                                                                  for e in request.listeners))
        except ControllerError as e:
            log.warning("registration of broker %d refused: %s", request.broker_id, e)
            body["error_code"] = e.error_code
    return [encode_response(ApiKey.BROKER_REGISTRATION, ctx.api_version, body)]


def handle_broker_heartbeat(ctx: RequestContext, controller: ControllerApis) -> list:
    request = decode_request(ApiKey.BROKER_HEARTBEAT, ctx.api_version, ctx.frame, ctx.body_offset)
    body = {"throttle_time": 0, "error_code": ErrorCode.none, "is_caught_up": False, "is_fenced": True,
            "should_shut_down": False}
    if not ctx.may_act_for_cluster:
        body["error_code"] = ErrorCode.cluster_authorization_failed
    else:
        try:
            answer = controller.broker_heartbeat(request.broker_id, request.broker_epoch,
                                                 want_fence=request.want_fence,
                                                 want_shutdown=request.want_shut_down,
                                                 # v1+ (KIP-858); v0 has no such field
                                                 offline_log_dirs=getattr(request, "offline_log_dirs", ()))
        except ControllerError as e:
            body["error_code"] = e.error_code
        else:
            body.update(is_caught_up=not answer.is_fenced, is_fenced=answer.is_fenced,
                        should_shut_down=answer.should_shut_down)
    return [encode_response(ApiKey.BROKER_HEARTBEAT, ctx.api_version, body)]


async def handle_create_topics(ctx: RequestContext, controller: ControllerApis) -> list:
    request = decode_request(ApiKey.CREATE_TOPICS, ctx.api_version, ctx.frame, ctx.body_offset)
    results = []
    seen: set[str] = set()
    for topic in request.topics:
        if not ctx.may_act_for_cluster:
            results.append(_create_error(topic.name, ErrorCode.cluster_authorization_failed, "not a broker"))
        elif topic.name in seen:
            results.append(_create_error(topic.name, ErrorCode.invalid_request, "topic named twice in one request"))
        else:
            seen.add(topic.name)
            results.append(await _create_topic(controller, topic, request.validate_only))
    body = {"throttle_time": 0, "topics": results}
    return [encode_response(ApiKey.CREATE_TOPICS, ctx.api_version, body)]


async def _create_topic(controller: ControllerApis, topic, validate_only: bool) -> dict:
    configs = {c.name: c.value for c in topic.configs if c.value is not None}
    assignment = None
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            return _create_error(topic.name, ErrorCode.invalid_request,
                                 "both a replica assignment and a partition count or replication factor")
        assignment = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
    try:
        created = await controller.create_topic(
            topic.name, assignment, configs,
            partitions=None if topic.num_partitions == -1 else topic.num_partitions,
            replication_factor=None if topic.replication_factor == -1 else topic.replication_factor,
            validate_only=validate_only)
    except ControllerError as e:
        return _create_error(topic.name, e.error_code, str(e))
    except PropagationError as e:
        # The topic exists (it is in the metadata log); some broker just has not confirmed it yet.
        log.warning("topic %s created, but: %s", topic.name, e)
        return _create_error(topic.name, ErrorCode.request_timed_out, str(e))
    return {
        "name": topic.name, "topic_id": created.topic_id, "error_code": ErrorCode.none, "error_message": None,
        "num_partitions": len(created.partitions),
        "replication_factor": len(created.partitions[0].replicas),
        "configs": [{"name": k, "value": v, "read_only": False, "config_source": CONFIG_SOURCE_TOPIC,
                     "is_sensitive": False} for k, v in sorted(configs.items())],
    }


def _create_error(name: str, code: ErrorCode, message: str) -> dict:
    return {"name": name, "topic_id": None, "error_code": code, "error_message": message,
            "num_partitions": -1, "replication_factor": -1, "configs": None}


async def handle_delete_topics(ctx: RequestContext, controller: ControllerApis) -> list:
    request = decode_request(ApiKey.DELETE_TOPICS, ctx.api_version, ctx.frame, ctx.body_offset)
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    results = []
    for name, topic_id in wanted:
        error, message = ErrorCode.none, None
        if name is None and topic_id is not None:
            topic = controller.metadata.topic_by_id(topic_id)
            name = None if topic is None else topic.name
        if not ctx.may_act_for_cluster:
            error, message = ErrorCode.cluster_authorization_failed, "not a broker"
        elif name is None:
            error, message = ErrorCode.unknown_topic_id, "no topic has that id"
        else:
            try:
                await controller.delete_topic(name)
            except ControllerError as e:
                error, message = e.error_code, str(e)
            except PropagationError as e:
                log.warning("topic %s deleted, but: %s", name, e)
        results.append({"name": name, "topic_id": topic_id, "error_code": error, "error_message": message})
    return [encode_response(ApiKey.DELETE_TOPICS, ctx.api_version, {"throttle_time": 0, "responses": results})]


def build_handlers(controller: ControllerApis, inter_broker_secret: str | None,
                   quorum_handlers: Mapping[int, Handler]) -> dict[int, Handler]:
    """quorum_handlers: the controller quorum's APIs (replog/raft/shell.py)."""
    handlers: dict[int, Handler] = {
        **shared_handlers(CONTROLLER_APIS, inter_broker_secret, CONTROLLER_API_SPECS),
        **quorum_handlers,
        ApiKey.ALTER_PARTITION: functools.partial(handle_alter_partition, controller=controller),
        ApiKey.BROKER_REGISTRATION: functools.partial(handle_broker_registration, controller=controller),
        ApiKey.BROKER_HEARTBEAT: functools.partial(handle_broker_heartbeat, controller=controller),
        ApiKey.CREATE_TOPICS: functools.partial(handle_create_topics, controller=controller),
        ApiKey.DELETE_TOPICS: functools.partial(handle_delete_topics, controller=controller),
        ApiKey.ALTER_CONFIGS: functools.partial(handle_alter_configs, target=controller),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: functools.partial(handle_alter_configs, target=controller),
        ApiKey.CREATE_PARTITIONS: functools.partial(handle_create_partitions, target=controller),
        ApiKey.ELECT_LEADERS: functools.partial(handle_elect_leaders, target=controller),
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: functools.partial(handle_alter_partition_reassignments,
                                                                target=controller),
        ApiKey.LIST_PARTITION_REASSIGNMENTS: functools.partial(handle_list_partition_reassignments,
                                                               target=controller),
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: functools.partial(handle_alter_user_scram_credentials,
                                                               target=controller),
        ApiKey.CREATE_ACLS: functools.partial(handle_create_acls, target=controller),
        ApiKey.DELETE_ACLS: functools.partial(handle_delete_acls, target=controller),
        ApiKey.DESCRIBE_CLUSTER: functools.partial(handle_describe_cluster, view=controller),
    }
    assert set(handlers) == CONTROLLER_APIS
    return handlers


def unsupported_version_body() -> list:
    return api_versions.unsupported_version_body(CONTROLLER_APIS, CONTROLLER_API_SPECS)
