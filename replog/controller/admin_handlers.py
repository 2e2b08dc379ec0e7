"""The controller's handlers for the admin requests brokers forward (KIP-590): AlterConfigs (33) v0-2,
IncrementalAlterConfigs (44) v0-1, CreatePartitions (37) v0-3, ElectLeaders (43) v0-2,
AlterPartitionReassignments (45) v0-1, ListPartitionReassignments (46) v0 and AlterUserScramCredentials (51) v0.
Like CreateTopics, only the inter-broker principal may send them; the broker relays the answer to its client
unchanged."""

import logging
from collections import Counter

from kio.schema.errors import ErrorCode

from replog.log.dynamic_configs import InvalidConfigError, resources_of_request
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_response
from replog.server.dispatch import RequestContext
from replog.server.scram_credentials import changes_of_request

from . import admin, reassignment_ops, scram
from .cluster import ControllerError
from .elections import ElectionType
from .propagation import PropagationError

log = logging.getLogger(__name__)

ADMIN_APIS = frozenset({ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.CREATE_PARTITIONS,
                        ApiKey.ELECT_LEADERS, ApiKey.ALTER_PARTITION_REASSIGNMENTS,
                        ApiKey.LIST_PARTITION_REASSIGNMENTS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS})


def config_responses(resources, outcomes) -> list[dict]:
    return [{"error_code": o.error_code, "error_message": o.message, "resource_type": r.resource_type,
             "resource_name": r.resource_name} for r, o in zip(resources, outcomes, strict=True)]


async def handle_alter_configs(ctx: RequestContext, target: admin.AdminTarget) -> list:
    api_key = ctx.header.api_key
    incremental = api_key == ApiKey.INCREMENTAL_ALTER_CONFIGS
    request = decode_request(api_key, ctx.api_version, ctx.frame, ctx.body_offset)
    if not ctx.may_act_for_cluster:
        outcomes = [admin.Outcome(ErrorCode.cluster_authorization_failed, "not a broker")] * len(request.resources)
    elif not target.active:
        outcomes = [admin.Outcome(ErrorCode.not_controller, "not the active controller")] * len(request.resources)
    else:
        try:
            resources = resources_of_request(request, incremental=incremental)
        except InvalidConfigError as e:
            outcomes = [admin.Outcome(ErrorCode.invalid_request, str(e))] * len(request.resources)
        else:
            outcomes = await admin.alter_configs(target, resources, incremental=incremental,
                                                 validate_only=request.validate_only)
    body = {"throttle_time": 0, "responses": config_responses(request.resources, outcomes)}
    return [encode_response(api_key, ctx.api_version, body)]


async def handle_create_partitions(ctx: RequestContext, target: admin.AdminTarget) -> list:
    request = decode_request(ApiKey.CREATE_PARTITIONS, ctx.api_version, ctx.frame, ctx.body_offset)
    names = Counter(t.name for t in request.topics)
    results = []
    for topic in request.topics:
        error, message = ErrorCode.none, None
        if not ctx.may_act_for_cluster:
            error, message = ErrorCode.cluster_authorization_failed, "not a broker"
        elif names[topic.name] > 1:
            error, message = ErrorCode.invalid_request, "Duplicate topic in request."
        else:
            assignment = None if topic.assignments is None else [list(a.broker_ids) for a in topic.assignments]
            try:
                await admin.create_partitions(target, topic.name, topic.count, assignment,
                                              validate_only=request.validate_only)
            except ControllerError as e:
                error, message = e.error_code, str(e).split(": ", 1)[-1]
            except PropagationError as e:
                log.warning("partitions of %s created, but: %s", topic.name, e)
                error, message = ErrorCode.request_timed_out, str(e)
        results.append({"name": topic.name, "error_code": error, "error_message": message})
    return [encode_response(ApiKey.CREATE_PARTITIONS, ctx.api_version, {"throttle_time": 0, "results": results})]


async def handle_elect_leaders(ctx: RequestContext, target: admin.AdminTarget) -> list:
    """ElectLeaders (43) v0-2; v0 has no election type (preferred only)."""
    request = decode_request(ApiKey.ELECT_LEADERS, ctx.api_version, ctx.frame, ctx.body_offset)
    election_type = getattr(request, "election_type", ElectionType.PREFERRED)
    requested = None if request.topic_partitions is None else [
        (t.topic, p) for t in request.topic_partitions for p in t.partitions]
    error, answers = ErrorCode.none, {}
    if not ctx.may_act_for_cluster:
        error = ErrorCode.cluster_authorization_failed
    elif not target.active:
        error = ErrorCode.not_controller
    elif election_type not in ElectionType.__members__.values():
        error = ErrorCode.invalid_request
    else:
        answers = await admin.elect_leaders(target, ElectionType(election_type), requested)
    if error != ErrorCode.none:  # every requested partition carries the request-wide error
        answers = {key: (error, None) for key in requested or ()}
    return [encode_response(ApiKey.ELECT_LEADERS, ctx.api_version, election_response(error, answers))]


def election_response(error: ErrorCode, answers: dict) -> dict:
    by_topic: dict[str, list[dict]] = {}
    for (topic, partition), (code, message) in answers.items():
        by_topic.setdefault(topic, []).append({"partition_id": partition, "error_code": code,
                                               "error_message": message})
    return {"throttle_time": 0, "error_code": error, "replica_election_results": [
        {"topic": topic, "partition_result": results} for topic, results in by_topic.items()]}


async def handle_alter_partition_reassignments(ctx: RequestContext, target: admin.AdminTarget) -> list:
    """A request-wide refusal goes in the top-level error with every partition echoing it, as Kafka's
    ControllerApis does."""
    request = decode_request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, ctx.api_version, ctx.frame, ctx.body_offset)
    requested = [(t.name, p.partition_index, None if p.replicas is None else list(p.replicas))
                 for t in request.topics for p in t.partitions]
    allow_rf_change = getattr(request, "allow_replication_factor_change", True)  # v1+ (KIP-860)
    error, message = ErrorCode.none, None
    if not ctx.may_act_for_cluster:
        error, message = ErrorCode.cluster_authorization_failed, "not a broker"
    elif not target.active:
        error, message = ErrorCode.not_controller, "not the active controller"
    if error != ErrorCode.none:
        outcomes = [admin.Outcome(error, message)] * len(requested)
    else:
        outcomes = await reassignment_ops.alter_partition_reassignments(target, requested, allow_rf_change)
    by_topic: dict[str, list[dict]] = {}
    for (topic, partition, _), outcome in zip(requested, outcomes, strict=True):
        by_topic.setdefault(topic, []).append({"partition_index": partition, "error_code": outcome.error_code,
                                               "error_message": outcome.message})
    body = {"throttle_time": 0, "allow_replication_factor_change": allow_rf_change, "error_code": error,
            "error_message": message,
            "responses": [{"name": name, "partitions": partitions} for name, partitions in by_topic.items()]}
    return [encode_response(ApiKey.ALTER_PARTITION_REASSIGNMENTS, ctx.api_version, body)]


async def handle_list_partition_reassignments(ctx: RequestContext, target: admin.AdminTarget) -> list:
    request = decode_request(ApiKey.LIST_PARTITION_REASSIGNMENTS, ctx.api_version, ctx.frame, ctx.body_offset)
    error, message, ongoing = ErrorCode.none, None, []
    if not ctx.may_act_for_cluster:
        error, message = ErrorCode.cluster_authorization_failed, "not a broker"
    elif not target.active:
        error, message = ErrorCode.not_controller, "not the active controller"
    else:
        requested = None if request.topics is None else [(t.name, list(t.partition_indexes)) for t in request.topics]
        ongoing = reassignment_ops.list_partition_reassignments(target.metadata, requested)
    by_topic: dict[str, list[dict]] = {}
    for p in ongoing:
        by_topic.setdefault(p.topic, []).append({
            "partition_index": p.partition, "replicas": list(p.replicas),
            "adding_replicas": list(p.adding_replicas), "removing_replicas": list(p.removing_replicas)})
    body = {"throttle_time": 0, "error_code": error, "error_message": message,
            "topics": [{"name": name, "partitions": partitions} for name, partitions in by_topic.items()]}
    return [encode_response(ApiKey.LIST_PARTITION_REASSIGNMENTS, ctx.api_version, body)]


async def handle_alter_user_scram_credentials(ctx: RequestContext, target: admin.AdminTarget) -> list:
    request = decode_request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ctx.api_version, ctx.frame, ctx.body_offset)
    deletions, upsertions = changes_of_request(request)
    error = None
    if not ctx.may_act_for_cluster:
        error = (ErrorCode.cluster_authorization_failed, "not a broker")
    elif not target.active:
        error = (ErrorCode.not_controller, "not the active controller")
    if error is not None:
        users = dict.fromkeys(c.name for c in (*deletions, *upsertions))
        results = [{"user": user, "error_code": error[0], "error_message": error[1]} for user in users]
    else:
        results = [{"user": r.user, "error_code": r.error_code, "error_message": r.error_message}
                   for r in await scram.alter_credentials(target, deletions, upsertions)]
    body = {"throttle_time": 0, "results": results}
    return [encode_response(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ctx.api_version, body)]
