"""Third-party witnesses of the ACL surface (issue 17): confluent-kafka's AdminClient creates, describes and
deletes bindings; a confluent-kafka producer and consumer are refused with TOPIC_AUTHORIZATION_FAILED (and the
group with GROUP_AUTHORIZATION_FAILED) until the ACLs they need exist; kafka-python's KafkaAdminClient creates
and describes bindings; and the bindings survive a controller restart, replayed from the metadata log."""

import asyncio
import time
import uuid

import pytest

from replog.client import acl_admin
from replog.client.admin import NewTopic as ReplogNewTopic
from replog.security.acls import AclBinding as ReplogBinding
from replog.security.acls import AclBindingFilter as ReplogFilter
from replog.security.acls import Operation, PatternType, Permission, ResourceType
from tests.acl_cluster import acl_cluster

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
)
from confluent_kafka.admin import ResourceType as CResourceType  # noqa: E402

TIMEOUT_S = 30
EVERY_ACL = ReplogFilter(ResourceType.ANY, None, PatternType.ANY, None, None, Operation.ANY, Permission.ANY)


def binding(restype, name, operation, principal="User:alice", pattern=ResourcePatternType.LITERAL):
    return AclBinding(restype, name, pattern, principal, "*", operation, AclPermissionType.ALLOW)


def create_acls(admin: AdminClient, bindings: list[AclBinding]) -> None:
    for future in admin.create_acls(bindings).values():
        future.result(TIMEOUT_S)


def produce_error(config: dict, topic: str) -> KafkaError | None:
    """The delivery error of one message (None: delivered)."""
    outcome: list = []
    producer = Producer({**config, "message.timeout.ms": 10_000, "enable.idempotence": False})
    producer.produce(topic, b"payload", on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(TIMEOUT_S)
    assert outcome, "no delivery report"
    return outcome[0]


def consume_error(config: dict, topic: str, group: str) -> KafkaError | None:
    """The first error a subscribed consumer reports, or None once it has read a message."""
    consumer = Consumer({**config, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            return message.error()
        raise AssertionError("the consumer neither read nor failed")
    finally:
        consumer.close()


async def test_confluent_admin_producer_and_consumer_under_acls(tmp_path):
    topic, group = f"orders-{uuid.uuid4().hex[:6]}", "billing"
    async with acl_cluster(tmp_path) as cluster:
        admin = AdminClient(cluster.confluent_config("admin"))
        for future in admin.create_topics([confluent_kafka.admin.NewTopic(topic, 1, 1)]).values():
            await asyncio.to_thread(future.result, TIMEOUT_S)
        alice = cluster.confluent_config("alice")

        error = await asyncio.to_thread(produce_error, alice, topic)
        assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        await asyncio.to_thread(create_acls, admin, [binding(CResourceType.TOPIC, "orders-",
                                                              AclOperation.WRITE,
                                                              pattern=ResourcePatternType.PREFIXED)])
        assert await asyncio.to_thread(produce_error, alice, topic) is None

        error = await asyncio.to_thread(consume_error, alice, topic, group)
        assert error is not None and error.code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                                      KafkaError.GROUP_AUTHORIZATION_FAILED)
        await asyncio.to_thread(create_acls, admin, [binding(CResourceType.TOPIC, topic, AclOperation.READ),
                                                     binding(CResourceType.GROUP, group, AclOperation.READ)])
        assert await asyncio.to_thread(consume_error, alice, topic, group) is None

        described = await asyncio.to_thread(admin.describe_acls(AclBindingFilter(
            CResourceType.TOPIC, topic, ResourcePatternType.MATCH, None, None, AclOperation.ANY,
            AclPermissionType.ANY)).result, TIMEOUT_S)
        assert {(b.name, b.resource_pattern_type, b.operation) for b in described} == {
            ("orders-", ResourcePatternType.PREFIXED, AclOperation.WRITE),
            (topic, ResourcePatternType.LITERAL, AclOperation.READ)}

        deleted = admin.delete_acls([AclBindingFilter(CResourceType.ANY, None, ResourcePatternType.ANY, "User:alice",
                                                      None, AclOperation.READ, AclPermissionType.ANY)])
        removed = await asyncio.to_thread(next(iter(deleted.values())).result, TIMEOUT_S)
        assert {(b.restype, b.name) for b in removed} == {(CResourceType.TOPIC, topic), (CResourceType.GROUP, group)}

        refused = admin.create_acls([binding(CResourceType.GROUP, group, AclOperation.WRITE)])  # not a group op
        with pytest.raises(KafkaException) as failure:
            await asyncio.to_thread(next(iter(refused.values())).result, TIMEOUT_S)
        assert failure.value.args[0].code() == KafkaError.INVALID_REQUEST

        # Without ALTER on the cluster. (librdkafka drops DescribeAcls' top-level error, so a refused listing
        # reads as an empty one there; the ACL matrix checks that refusal on the wire.)
        not_admin = AdminClient(alice)
        refused = not_admin.create_acls([binding(CResourceType.TOPIC, topic, AclOperation.ALL)])
        with pytest.raises(KafkaException) as failure:
            await asyncio.to_thread(next(iter(refused.values())).result, TIMEOUT_S)
        assert failure.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED


async def test_kafka_python_admin_creates_and_describes_acls(tmp_path):
    kafka_admin = pytest.importorskip("kafka.admin")
    async with acl_cluster(tmp_path) as cluster:
        client = kafka_admin.KafkaAdminClient(
            bootstrap_servers=cluster.bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
            sasl_plain_username="admin", sasl_plain_password="admin-secret")
        try:
            acl = kafka_admin.ACL("User:bob", "*", kafka_admin.ACLOperation.READ, kafka_admin.ACLPermissionType.ALLOW,
                                  kafka_admin.ResourcePattern(kafka_admin.ResourceType.TOPIC, "t"))
            result = await asyncio.to_thread(client.create_acls, [acl])
            assert result["failed"] == [] and len(result["succeeded"]) == 1
            acls, error = await asyncio.to_thread(client.describe_acls, kafka_admin.ACLFilter(
                None, None, kafka_admin.ACLOperation.ANY, kafka_admin.ACLPermissionType.ANY,
                kafka_admin.ResourcePatternFilter(kafka_admin.ResourceType.ANY, None,
                                                  kafka_admin.ACLResourcePatternType.ANY)))
            assert [(a.principal, a.resource_pattern.resource_name) for a in acls] == [("User:bob", "t")]
        finally:
            client.close()


async def test_acls_survive_a_controller_restart(tmp_path):
    kept = ReplogBinding(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*", Operation.WRITE,
                         Permission.ALLOW)
    async with acl_cluster(tmp_path) as cluster:
        async with cluster.admin() as admin:
            await admin.create_topics([ReplogNewTopic("orders", 1, 1)])
            await acl_admin.create_acls(admin, [kept])
        await cluster.restart_controller()
        assert list(cluster.controller.metadata.acls) == [kept]  # replayed from the metadata log
        async with cluster.admin() as admin:
            assert await acl_admin.describe_acls(admin, EVERY_ACL) == [kept]  # and pushed to the broker again
            gone = ReplogFilter(ResourceType.TOPIC, "orders", PatternType.LITERAL, None, None, Operation.ANY,
                                Permission.ANY)
            assert await acl_admin.delete_acls(admin, [gone]) == [kept]
        assert list(cluster.controller.metadata.acls) == []
        error = await asyncio.to_thread(produce_error, cluster.confluent_config("alice"), "orders")
        assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


async def test_confluent_producer_auto_creates_a_topic_in_a_cluster_only_with_create(tmp_path):
    """librdkafka's producer asks Metadata to create the topic it writes to (allow.auto.create.topics): the broker
    refuses without CREATE on the cluster or the topic, and with it the controller creates the topic."""
    refused_topic, created_topic = f"auto-{uuid.uuid4().hex[:6]}", f"auto-{uuid.uuid4().hex[:6]}"
    async with acl_cluster(tmp_path) as cluster:
        admin = AdminClient(cluster.confluent_config("admin"))
        await asyncio.to_thread(create_acls, admin, [
            binding(CResourceType.TOPIC, "auto-", AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED),
            binding(CResourceType.TOPIC, created_topic, AclOperation.CREATE)])
        alice = cluster.confluent_config("alice")
        error = await asyncio.to_thread(produce_error, alice, refused_topic)
        assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert refused_topic not in cluster.controller.metadata.topics
        assert await asyncio.to_thread(produce_error, alice, created_topic) is None
        assert created_topic in cluster.controller.metadata.topics


async def test_kafka_python_admin_manages_user_and_delegation_token_acls(tmp_path):
    """KIP-373's USER resource (CreateTokens, DescribeTokens) and DELEGATION_TOKEN (Describe), which
    confluent-kafka's AdminClient cannot name: created, listed, refused for an operation the type lacks, and
    deleted, through kafka-python."""
    kafka_admin = pytest.importorskip("kafka.admin")
    async with acl_cluster(tmp_path) as cluster:
        client = kafka_admin.KafkaAdminClient(
            bootstrap_servers=cluster.bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
            sasl_plain_username="admin", sasl_plain_password="admin-secret")

        def acl(resource_type, name, operation):
            return kafka_admin.ACL("User:alice", "*", operation, kafka_admin.ACLPermissionType.ALLOW,
                                   kafka_admin.ResourcePattern(resource_type, name))

        user, token = kafka_admin.ResourceType.USER, kafka_admin.ResourceType.DELEGATION_TOKEN
        try:
            result = await asyncio.to_thread(client.create_acls, [
                acl(user, "bob", kafka_admin.ACLOperation.CREATE_TOKENS),
                acl(user, "bob", kafka_admin.ACLOperation.DESCRIBE_TOKENS),
                acl(token, "token-1", kafka_admin.ACLOperation.DESCRIBE)])
            assert result["failed"] == [] and len(result["succeeded"]) == 3
            refused = await asyncio.to_thread(client.create_acls, [acl(user, "bob", kafka_admin.ACLOperation.READ)])
            assert [error.errno for error in refused["failed"]] == [42] and refused["succeeded"] == []  # INVALID_REQUEST
            acls, _ = await asyncio.to_thread(client.describe_acls, kafka_admin.ACLFilter(
                None, None, kafka_admin.ACLOperation.ANY, kafka_admin.ACLPermissionType.ANY,
                kafka_admin.ResourcePatternFilter(user, None, kafka_admin.ACLResourcePatternType.ANY)))
            assert sorted(a.operation.name for a in acls) == ["CREATE_TOKENS", "DESCRIBE_TOKENS"]
            deleted = await asyncio.to_thread(client.delete_acls, [kafka_admin.ACLFilter(
                None, None, kafka_admin.ACLOperation.ANY, kafka_admin.ACLPermissionType.ANY,
                kafka_admin.ResourcePatternFilter(token, "token-1", kafka_admin.ACLResourcePatternType.LITERAL))])
            assert [len(matches) for _, matches, _ in deleted] == [1]
            async with cluster.admin() as own:
                left = await acl_admin.describe_acls(own, EVERY_ACL)
            assert {(b.resource_type, b.operation) for b in left} == {
                (ResourceType.USER, Operation.CREATE_TOKENS), (ResourceType.USER, Operation.DESCRIBE_TOKENS)}
        finally:
            client.close()
