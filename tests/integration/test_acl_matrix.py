"""The ACL matrix: for each API, a principal without the ACL Kafka's KafkaApis asks for is refused with
Kafka's error, and the same request passes once that one binding exists (a real broker and controller,
StandardAuthorizer, SASL PLAIN users; tests/acl_cluster.py). Metadata and ListGroups hide what the principal
may not describe. Requests go over the wire as a client sends them, through the bundled client's Connection."""

import dataclasses

from replog.client import acl_admin
from replog.client.admin import NewTopic
from replog.client.connection import Connection
from replog.protocol.apis import ApiKey
from replog.security.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from tests.acl_cluster import PRODUCE_VERSION, acl_cluster, error_codes, produce_request

TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED = 29, 30, 31
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
OP = Operation
ALL_ACLS = AclBindingFilter(ResourceType.ANY, None, PatternType.ANY, None, None, Operation.ANY, Permission.ANY)
T, DOOMED, G = "orders", "doomed", "g1"


def allow(resource_type: ResourceType, name: str, operation: Operation, principal: str = "User:alice") -> AclBinding:
    return AclBinding(resource_type, name, PatternType.LITERAL, principal, "*", operation, Permission.ALLOW)


def _topic_partitions(name_key: str, partitions_key: str, partition: dict) -> list[dict]:
    return [{name_key: T, partitions_key: [partition]}]


@dataclasses.dataclass(frozen=True)
class Row:
    name: str
    api: ApiKey
    version: int
    request: dict
    needs: AclBinding  # the binding that turns the refusal into an answer
    refusal: int  # the error code a principal without it gets
    given: tuple[AclBinding, ...] = ()  # bindings the principal has in both cases


ROWS = [
    Row("produce", ApiKey.PRODUCE, PRODUCE_VERSION, produce_request(T),
        allow(TOPIC, T, OP.WRITE), TOPIC_AUTHORIZATION_FAILED),
    Row("fetch", ApiKey.FETCH, 12, {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                                    "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                                    "topics": _topic_partitions("topic", "partitions", {
                                        "partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}),
                                    "forgotten_topics_data": [], "rack_id": ""},
        allow(TOPIC, T, OP.READ), TOPIC_AUTHORIZATION_FAILED),
    Row("list offsets", ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": _topic_partitions(
        "name", "partitions", {"partition_index": 0, "timestamp": -1})},
        allow(TOPIC, T, OP.DESCRIBE), TOPIC_AUTHORIZATION_FAILED),
    Row("offset for leader epoch", ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -1, "topics": _topic_partitions(
        "topic", "partitions", {"partition": 0, "leader_epoch": 0})},
        allow(TOPIC, T, OP.READ), TOPIC_AUTHORIZATION_FAILED),  # READ implies the DESCRIBE asked for
    Row("metadata of a named topic", ApiKey.METADATA, 12, {"topics": [{"name": T, "topic_id": None}],
                                                          "allow_auto_topic_creation": False,
                                                          "include_topic_authorized_operations": False},
        allow(TOPIC, T, OP.DESCRIBE), TOPIC_AUTHORIZATION_FAILED),
    Row("create topics", ApiKey.CREATE_TOPICS, 7, {"topics": [{"name": "fresh", "num_partitions": 1,
                                                              "replication_factor": 1, "assignments": [],
                                                              "configs": []}],
                                                  "timeout": 10_000, "validate_only": True},
        allow(TOPIC, "fresh", OP.CREATE), TOPIC_AUTHORIZATION_FAILED),
    Row("create partitions", ApiKey.CREATE_PARTITIONS, 3, {"topics": [{"name": T, "count": 2, "assignments": None}],
                                                          "timeout": 10_000, "validate_only": True},
        allow(TOPIC, T, OP.ALTER), TOPIC_AUTHORIZATION_FAILED),
    Row("describe topic configs", ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": 2, "resource_name": T, "configuration_keys": None}], "include_synonyms": False,
        "include_documentation": False},
        allow(TOPIC, T, OP.ALTER_CONFIGS), TOPIC_AUTHORIZATION_FAILED),  # implies DESCRIBE_CONFIGS
    Row("describe broker configs", ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": 4, "resource_name": "1", "configuration_keys": None}], "include_synonyms": False,
        "include_documentation": False},
        allow(CLUSTER, CLUSTER_NAME, OP.DESCRIBE_CONFIGS), CLUSTER_AUTHORIZATION_FAILED),
    Row("alter topic configs", ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
        {"resource_type": 2, "resource_name": T, "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "86400000"}]}], "validate_only": True},
        allow(TOPIC, T, OP.ALTER_CONFIGS), TOPIC_AUTHORIZATION_FAILED),
    Row("delete records", ApiKey.DELETE_RECORDS, 2, {"topics": _topic_partitions(
        "name", "partitions", {"partition_index": 0, "offset": 0}), "timeout": 5000},
        allow(TOPIC, T, OP.DELETE), TOPIC_AUTHORIZATION_FAILED),
    Row("find coordinator", ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [G]},
        allow(GROUP, G, OP.DESCRIBE), GROUP_AUTHORIZATION_FAILED),
    Row("heartbeat", ApiKey.HEARTBEAT, 4, {"group_id": G, "generation_id": 1, "member_id": "m",
                                           "group_instance_id": None},
        allow(GROUP, G, OP.READ), GROUP_AUTHORIZATION_FAILED),
    Row("offset commit: the group", ApiKey.OFFSET_COMMIT, 8, {
        "group_id": G, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "topics": _topic_partitions("name", "partitions", {"partition_index": 0, "committed_offset": 0,
                                                           "committed_metadata": ""})},
        allow(GROUP, G, OP.READ), GROUP_AUTHORIZATION_FAILED, given=(allow(TOPIC, T, OP.READ),)),
    Row("offset commit: the topic", ApiKey.OFFSET_COMMIT, 8, {
        "group_id": G, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "topics": _topic_partitions("name", "partitions", {"partition_index": 0, "committed_offset": 0,
                                                           "committed_metadata": ""})},
        allow(TOPIC, T, OP.READ), TOPIC_AUTHORIZATION_FAILED, given=(allow(GROUP, G, OP.READ),)),
    Row("offset fetch", ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": G, "topics": None}], "require_stable": False},
        allow(GROUP, G, OP.DESCRIBE), GROUP_AUTHORIZATION_FAILED),
    Row("describe groups", ApiKey.DESCRIBE_GROUPS, 5, {"groups": [G], "include_authorized_operations": False},
        allow(GROUP, G, OP.DESCRIBE), GROUP_AUTHORIZATION_FAILED),
    Row("delete groups", ApiKey.DELETE_GROUPS, 2, {"groups_names": ["never-used"]},
        allow(GROUP, "never-used", OP.DELETE), GROUP_AUTHORIZATION_FAILED),
    Row("init producer id: idempotent write", ApiKey.INIT_PRODUCER_ID, 4, {
        "transactional_id": None, "transaction_timeout": 60_000, "producer_id": -1, "producer_epoch": -1},
        allow(CLUSTER, CLUSTER_NAME, OP.IDEMPOTENT_WRITE), CLUSTER_AUTHORIZATION_FAILED),
    Row("init producer id: write on a topic", ApiKey.INIT_PRODUCER_ID, 4, {
        "transactional_id": None, "transaction_timeout": 60_000, "producer_id": -1, "producer_epoch": -1},
        allow(TOPIC, T, OP.WRITE), CLUSTER_AUTHORIZATION_FAILED),
    Row("describe log dirs", ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None},
        allow(CLUSTER, CLUSTER_NAME, OP.DESCRIBE), CLUSTER_AUTHORIZATION_FAILED),
    Row("elect leaders", ApiKey.ELECT_LEADERS, 2, {"election_type": 0, "topic_partitions": [
        {"topic": T, "partitions": [0]}], "timeout": 5000},
        allow(CLUSTER, CLUSTER_NAME, OP.ALTER), CLUSTER_AUTHORIZATION_FAILED),
    Row("alter partition reassignments", ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {"timeout": 5000, "topics": [
        {"name": T, "partitions": [{"partition_index": 0, "replicas": None}]}]},  # a cancel: nothing to cancel
        allow(CLUSTER, CLUSTER_NAME, OP.ALTER), CLUSTER_AUTHORIZATION_FAILED),
    Row("list partition reassignments", ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout": 5000, "topics": None},
        allow(CLUSTER, CLUSTER_NAME, OP.DESCRIBE), CLUSTER_AUTHORIZATION_FAILED),
    Row("describe acls", ApiKey.DESCRIBE_ACLS, 3, {
        "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
        "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1},
        allow(CLUSTER, CLUSTER_NAME, OP.DESCRIBE), CLUSTER_AUTHORIZATION_FAILED),
    Row("create acls", ApiKey.CREATE_ACLS, 3, {"creations": [
        {"resource_type": 2, "resource_name": "x", "resource_pattern_type": 3, "principal": "User:bob", "host": "*",
         "operation": 3, "permission_type": 3}]},
        allow(CLUSTER, CLUSTER_NAME, OP.ALTER), CLUSTER_AUTHORIZATION_FAILED),
    Row("delete topics", ApiKey.DELETE_TOPICS, 6, {"topics": [{"name": DOOMED, "topic_id": None}], "timeout": 10_000},
        allow(TOPIC, DOOMED, OP.DELETE), TOPIC_AUTHORIZATION_FAILED),  # last: it really deletes
]


AUTO_CREATE = Row("metadata auto-creating a topic", ApiKey.METADATA, 12, {
    "topics": [{"name": "auto-made", "topic_id": None}], "allow_auto_topic_creation": True,
    "include_topic_authorized_operations": False},
    allow(CLUSTER, CLUSTER_NAME, OP.CREATE), TOPIC_AUTHORIZATION_FAILED, given=(allow(TOPIC, "auto-made", OP.DESCRIBE),))


async def replace_acls(admin, bindings) -> None:
    await acl_admin.delete_acls(admin, [ALL_ACLS])
    if bindings:
        await acl_admin.create_acls(admin, list(bindings))


async def check_rows(cluster, admin, rows: list[Row]) -> None:
    alice = await cluster.connection("alice")
    try:
        failures = []
        for row in rows:
            await replace_acls(admin, row.given)
            refused = error_codes(await alice.send(row.api, row.request, version=row.version))
            await replace_acls(admin, (*row.given, row.needs))
            answered = error_codes(await alice.send(row.api, row.request, version=row.version))
            if row.refusal not in refused or row.refusal in answered:
                failures.append(f"{row.name}: without the ACL {sorted(refused)}, with it {sorted(answered)}")
        assert not failures, "\n".join(failures)
    finally:
        alice.close()


async def test_each_api_refuses_without_its_acl_and_answers_with_it(tmp_path):
    async with acl_cluster(tmp_path) as cluster, cluster.admin() as admin:
        await admin.create_topics([NewTopic(T, 1, 1), NewTopic(DOOMED, 1, 1)])
        await check_rows(cluster, admin, ROWS)


async def test_auto_creation_in_a_cluster_needs_create_and_is_done_by_the_controller(tmp_path):
    """A broker with a controller creates no topic itself: with CREATE, Metadata asks the controller and answers
    LEADER_NOT_AVAILABLE until the topic reaches the broker; without it, TOPIC_AUTHORIZATION_FAILED."""
    async with acl_cluster(tmp_path) as cluster, cluster.admin() as admin:
        await check_rows(cluster, admin, [AUTO_CREATE])
        assert "auto-made" in cluster.controller.metadata.topics
        topic_level = dataclasses.replace(AUTO_CREATE, request={**AUTO_CREATE.request, "topics": [
            {"name": "auto-topic-acl", "topic_id": None}]}, needs=allow(TOPIC, "auto-topic-acl", OP.CREATE),
            given=(allow(TOPIC, "auto-topic-acl", OP.DESCRIBE),))
        await check_rows(cluster, admin, [topic_level])  # CREATE on the topic itself is enough too
        assert "auto-topic-acl" in cluster.controller.metadata.topics


async def test_a_single_node_keeps_its_acls_and_auto_creation_needs_create(tmp_path):
    """No controller: the node decides ACLs itself and keeps them in its state file across a restart."""
    async with acl_cluster(tmp_path, with_controller=False) as cluster, cluster.admin() as admin:
        await admin.create_topics([NewTopic(T, 1, 1), NewTopic(DOOMED, 1, 1)])
        await check_rows(cluster, admin, [AUTO_CREATE, *ROWS])
        kept = allow(TOPIC, T, OP.READ, principal="User:bob")
        await replace_acls(admin, [kept])
    async with acl_cluster(tmp_path, with_controller=False) as cluster, cluster.admin() as admin:
        assert await acl_admin.describe_acls(admin, ALL_ACLS) == [kept]


async def test_metadata_and_list_groups_hide_what_the_principal_may_not_describe(tmp_path):
    async with acl_cluster(tmp_path) as cluster, cluster.admin() as admin:
        await admin.create_topics([NewTopic(T, 1, 1), NewTopic("secret", 1, 1)])
        alice = await cluster.connection("alice")
        try:
            everything = {"topics": None, "allow_auto_topic_creation": False,
                          "include_topic_authorized_operations": False}
            listed = await alice.send(ApiKey.METADATA, everything, version=12)
            assert [t.name for t in listed.topics] == []
            await replace_acls(admin, [AclBinding(TOPIC, "ord", PatternType.PREFIXED, "User:alice", "*", OP.READ,
                                                  Permission.ALLOW)])
            listed = await alice.send(ApiKey.METADATA, everything, version=12)
            assert [t.name for t in listed.topics] == [T]  # a prefixed READ implies DESCRIBE, of orders only
            assert {T, "secret"} <= set(await admin.list_topics())  # the super user sees everything
            groups = await alice.send(ApiKey.LIST_GROUPS, {"states_filter": []}, version=4)
            assert groups.error_code == 0 and list(groups.groups) == []
        finally:
            alice.close()


async def test_a_deny_wins_over_an_allow_and_anonymous_gets_nothing(tmp_path):
    produce = produce_request(T)
    async with acl_cluster(tmp_path) as cluster, cluster.admin() as admin:
        await admin.create_topics([NewTopic(T, 1, 1)])
        await replace_acls(admin, [
            AclBinding(TOPIC, "*", PatternType.LITERAL, "User:*", "*", OP.ALL, Permission.ALLOW),
            AclBinding(TOPIC, T, PatternType.LITERAL, "User:bob", "*", OP.WRITE, Permission.DENY)])
        bob, alice = await cluster.connection("bob"), await cluster.connection("alice")
        try:
            refused = await bob.send(ApiKey.PRODUCE, produce, version=PRODUCE_VERSION)
            assert TOPIC_AUTHORIZATION_FAILED in error_codes(refused)
            assert error_codes(await alice.send(ApiKey.PRODUCE, produce, version=PRODUCE_VERSION)) == {0}
        finally:
            bob.close()
            alice.close()
        # Without SASL (the PLAINTEXT listener) a client is User:ANONYMOUS, which no binding left names.
        await replace_acls(admin, [])
        anonymous = Connection("127.0.0.1", cluster.broker.port)
        await anonymous.connect()
        try:
            assert TOPIC_AUTHORIZATION_FAILED in error_codes(
                await anonymous.send(ApiKey.PRODUCE, produce, version=PRODUCE_VERSION))
        finally:
            anonymous.close()


async def test_authorized_operations_are_reported_when_asked(tmp_path):
    """KIP-430: Metadata, DescribeCluster and DescribeGroups report the operations the principal may perform."""
    async with acl_cluster(tmp_path) as cluster, cluster.admin() as admin:
        await admin.create_topics([NewTopic(T, 1, 1)])
        await replace_acls(admin, [allow(TOPIC, T, OP.READ), allow(GROUP, G, OP.DELETE),
                                   allow(CLUSTER, CLUSTER_NAME, OP.IDEMPOTENT_WRITE)])
        alice = await cluster.connection("alice")
        try:
            metadata = await alice.send(ApiKey.METADATA, {
                "topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": True},
                version=12)
            assert [(t.name, t.topic_authorized_operations) for t in metadata.topics] == [
                (T, 1 << OP.READ | 1 << OP.DESCRIBE)]  # READ implies DESCRIBE
            described = await alice.send(ApiKey.DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": True,
                                                                   "endpoint_type": 1}, version=1)
            assert described.cluster_authorized_operations == 1 << OP.IDEMPOTENT_WRITE
            assert [b.port for b in described.brokers] == [cluster.sasl_port]  # the client's listener
            groups = await alice.send(ApiKey.DESCRIBE_GROUPS, {"groups": [G], "include_authorized_operations": True},
                                      version=5)
            assert groups.groups[0].authorized_operations == 1 << OP.DELETE | 1 << OP.DESCRIBE
        finally:
            alice.close()
