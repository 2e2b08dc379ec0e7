"""Third-party admin clients as witnesses of the admin surface (issue 16): confluent-kafka's AdminClient and
kafka-python's KafkaAdminClient describe and change topic and broker configs and add partitions, against a
single broker and against a 3-broker cluster run by a controller; bad input gets Kafka's error codes."""

import asyncio

import pytest

from replog.client import cluster_admin
from replog.client.admin import Admin
from replog.client.errors import KafkaError
from replog.harness.local_cluster import LocalCluster
from replog.log.checkpoint import OffsetCheckpointFile
from replog.log.log_manager import LOG_START_OFFSET_CHECKPOINT
from replog.protocol.apis import ApiKey

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

TIMEOUT = 30


def admin_of(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create(admin: AdminClient, topic: str, partitions: int = 1, replication: int = 1) -> None:
    for future in admin.create_topics([NewTopic(topic, partitions, replication)]).values():
        future.result(TIMEOUT)


def describe(admin: AdminClient, resource_type: str, name: str) -> dict:
    """librdkafka always asks for synonyms (DescribeConfigs v1+ include_synonyms)."""
    resource = ConfigResource(resource_type, name)
    return admin.describe_configs([resource])[resource].result(TIMEOUT)


def incremental(admin: AdminClient, resource_type: str, name: str, *ops: tuple[str, str | None, AlterConfigOpType],
                validate_only: bool = False) -> None:
    entries = [ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops]
    resource = ConfigResource(resource_type, name, incremental_configs=entries)
    admin.incremental_alter_configs([resource], validate_only=validate_only)[resource].result(TIMEOUT)


def error_of(future) -> confluent_kafka.KafkaError:
    with pytest.raises(confluent_kafka.KafkaException) as caught:
        future.result(TIMEOUT)
    return caught.value.args[0]


def produce_one(bootstrap: str, topic: str, size: int) -> confluent_kafka.KafkaError | None:
    """Produce one record of `size` bytes (no client-side size limit, no retries); the delivery error."""
    outcome = []
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.max.bytes": 10_000_000,
                                         "enable.idempotence": False, "retries": 0})
    producer.produce(topic, b"x" * size, on_delivery=lambda err, msg: outcome.append(err))
    assert producer.flush(TIMEOUT) == 0
    return outcome[0]


# ------------------------------------------------------------------------------------------ one broker


def test_confluent_describes_every_topic_key_with_its_default_source(broker):
    admin = admin_of(broker.bootstrap)
    create(admin, "described")
    configs = describe(admin, "topic", "described")
    assert {"retention.ms", "segment.bytes", "min.insync.replicas", "cleanup.policy",
            "leader.replication.throttled.replicas"} <= set(configs)
    assert configs["retention.ms"].value == "604800000"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert not configs["retention.ms"].is_read_only and not configs["retention.ms"].is_sensitive


def test_confluent_incremental_operations_and_validate_only(broker):
    admin = admin_of(broker.bootstrap)
    create(admin, "altered")
    incremental(admin, "topic", "altered", ("retention.ms", "1000", AlterConfigOpType.SET),
                ("leader.replication.throttled.replicas", "0:1", AlterConfigOpType.APPEND))
    incremental(admin, "topic", "altered", ("leader.replication.throttled.replicas", "1:1", AlterConfigOpType.APPEND))
    incremental(admin, "topic", "altered", ("segment.ms", "5000", AlterConfigOpType.SET), validate_only=True)
    configs = describe(admin, "topic", "altered")
    assert configs["retention.ms"].value == "1000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    # Synonyms in precedence order: the override, then the broker's default for it.
    assert [s.source for s in configs["retention.ms"].synonyms.values()][0] == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert "log.retention.ms" in configs["retention.ms"].synonyms
    assert configs["leader.replication.throttled.replicas"].value == "0:1,1:1"
    assert configs["segment.ms"].source == ConfigSource.DEFAULT_CONFIG.value  # validate_only changed nothing
    incremental(admin, "topic", "altered", ("leader.replication.throttled.replicas", "0:1", AlterConfigOpType.SUBTRACT),
                ("retention.ms", None, AlterConfigOpType.DELETE))
    configs = describe(admin, "topic", "altered")
    assert configs["leader.replication.throttled.replicas"].value == "1:1"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def test_topic_config_takes_effect_at_once_and_survives_restart(broker):
    admin = admin_of(broker.bootstrap)
    create(admin, "limited")
    assert produce_one(broker.bootstrap, "limited", 5_000) is None
    incremental(admin, "topic", "limited", ("max.message.bytes", "2000", AlterConfigOpType.SET))
    error = produce_one(broker.bootstrap, "limited", 5_000)
    assert error is not None and error.code() == confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE
    broker.stop()
    broker.start()
    admin = admin_of(broker.bootstrap)
    assert describe(admin, "topic", "limited")["max.message.bytes"].value == "2000"
    error = produce_one(broker.bootstrap, "limited", 5_000)
    assert error is not None and error.code() == confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE


def test_dynamic_broker_configs_are_inherited_by_topics(broker):
    admin = admin_of(broker.bootstrap)
    create(admin, "inherits")
    incremental(admin, "broker", "1", ("log.retention.ms", "60000", AlterConfigOpType.SET))
    configs = describe(admin, "topic", "inherits")
    assert configs["retention.ms"].value == "60000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    broker_configs = describe(admin, "broker", "1")
    assert broker_configs["log.retention.ms"].value == "60000"
    assert broker_configs["log.retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert broker_configs["node.id"].is_read_only and not broker_configs["log.retention.ms"].is_read_only
    # A dynamic broker default applies to the topics without an override at once, and after a restart.
    incremental(admin, "broker", "1", ("message.max.bytes", "2000", AlterConfigOpType.SET))
    error = produce_one(broker.bootstrap, "inherits", 5_000)
    assert error is not None and error.code() == confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE
    broker.stop()
    broker.start()
    admin = admin_of(broker.bootstrap)
    error = produce_one(broker.bootstrap, "inherits", 5_000)
    assert error is not None and error.code() == confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE
    assert describe(admin, "broker", "1")["message.max.bytes"].value == "2000"
    not_dynamic = ConfigResource("broker", "1", incremental_configs=[ConfigEntry("node.id", "7", incremental_operation=AlterConfigOpType.SET)])
    error = error_of(admin.incremental_alter_configs([not_dynamic])[not_dynamic])
    assert error.code() == confluent_kafka.KafkaError.INVALID_CONFIG and "node.id" in error.str()


def test_confluent_alter_configs_replaces_the_whole_set(broker):
    admin = admin_of(broker.bootstrap)
    create(admin, "replaced")
    for configs in ({"retention.ms": "1000", "segment.ms": "2000"}, {"segment.ms": "3000"}):
        resource = ConfigResource("topic", "replaced", set_config=configs)
        with pytest.warns(DeprecationWarning):
            admin.alter_configs([resource])[resource].result(TIMEOUT)
    configs = describe(admin, "topic", "replaced")
    assert configs["segment.ms"].value == "3000"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value


@pytest.mark.parametrize(("key", "value", "named"), [
    ("no.such.config", "1", "no.such.config"),
    ("retention.ms", "soon", "retention.ms"),
    ("min.insync.replicas", "0", "min.insync.replicas"),
])
def test_bad_config_is_invalid_config_naming_it(broker, key, value, named):
    admin = admin_of(broker.bootstrap)
    create(admin, "strict")
    resource = ConfigResource("topic", "strict", incremental_configs=[ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
    error = error_of(admin.incremental_alter_configs([resource])[resource])
    assert error.code() == confluent_kafka.KafkaError.INVALID_CONFIG
    assert named in error.str()


def test_confluent_create_partitions_and_its_refusals(broker):
    admin = admin_of(broker.bootstrap)
    create(admin, "grows")
    for future in admin.create_partitions([NewPartitions("grows", 3)]).values():
        future.result(TIMEOUT)
    assert sorted(admin.list_topics(timeout=TIMEOUT).topics["grows"].partitions) == [0, 1, 2]
    assert produce_one(broker.bootstrap, "grows", 10) is None
    fewer = error_of(admin.create_partitions([NewPartitions("grows", 2)])["grows"])
    assert fewer.code() == confluent_kafka.KafkaError.INVALID_PARTITIONS
    wrong = error_of(admin.create_partitions([NewPartitions("grows", 4, replica_assignment=[[7]])])["grows"])
    assert wrong.code() == confluent_kafka.KafkaError.INVALID_REPLICA_ASSIGNMENT
    for future in admin.create_partitions([NewPartitions("grows", 5)], validate_only=True).values():
        future.result(TIMEOUT)
    assert len(admin.list_topics(timeout=TIMEOUT).topics["grows"].partitions) == 3


def test_kafka_python_describe_alter_configs_and_create_partitions(broker):
    kafka_admin = pytest.importorskip("kafka.admin")
    create(admin_of(broker.bootstrap), "kp-admin")
    client = kafka_admin.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        topic = kafka_admin.ConfigResource("TOPIC", "kp-admin", {"retention.ms": "12345"})
        client.alter_configs([topic])
        described = client.describe_configs([kafka_admin.ConfigResource("TOPIC", "kp-admin")], config_filter="all")
        assert "12345" in repr(described)
        client.create_partitions({"kp-admin": 2})
        partitions = client.describe_topics(["kp-admin"])[0]["partitions"]
        assert len(partitions) == 2
    finally:
        client.close()


# ------------------------------------------------------------------------------------------ a cluster


@pytest.fixture
async def cluster(tmp_path):
    cluster = LocalCluster(tmp_path)
    try:
        await cluster.start()
        yield cluster
    finally:
        await cluster.stop()


async def test_cluster_configs_and_partitions_through_the_controller(cluster):
    admin = admin_of(cluster.bootstrap)
    await asyncio.to_thread(create, admin, "replicated", 1, 3)
    await asyncio.to_thread(incremental, admin, "topic", "replicated",
                            ("max.message.bytes", "2000", AlterConfigOpType.SET))
    assert cluster.controller.metadata.topics["replicated"].configs == {"max.message.bytes": "2000"}
    error = await asyncio.to_thread(produce_one, cluster.bootstrap, "replicated", 5_000)
    assert error is not None and error.code() == confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE
    bad = ConfigResource("topic", "replicated", incremental_configs=[ConfigEntry("bogus.key", "1", incremental_operation=AlterConfigOpType.SET)])
    error = await asyncio.to_thread(error_of, admin.incremental_alter_configs([bad])[bad])
    assert error.code() == confluent_kafka.KafkaError.INVALID_CONFIG and "bogus.key" in error.str()

    await asyncio.to_thread(incremental, admin, "broker", "2",
                            ("follower.replication.throttled.rate", "50000000", AlterConfigOpType.SET))
    described = await asyncio.to_thread(describe, admin, "broker", "2")
    assert described["follower.replication.throttled.rate"].value == "50000000"
    assert described["follower.replication.throttled.rate"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value

    for future in admin.create_partitions([NewPartitions("replicated", 4)]).values():
        await asyncio.to_thread(future.result, TIMEOUT)
    partitions = cluster.controller.metadata.topics["replicated"].partitions
    assert sorted(partitions) == [0, 1, 2, 3] and all(len(p.replicas) == 3 for p in partitions.values())
    listed = (await asyncio.to_thread(admin.list_topics, timeout=TIMEOUT)).topics["replicated"].partitions
    assert sorted(listed) == [0, 1, 2, 3]
    unknown = admin.create_partitions([NewPartitions("replicated", 5, replica_assignment=[[1, 2, 9]])])
    error = await asyncio.to_thread(error_of, unknown["replicated"])
    assert error.code() == confluent_kafka.KafkaError.INVALID_REPLICA_ASSIGNMENT and "9" in error.str()

    described = await asyncio.to_thread(admin.describe_cluster().result, TIMEOUT)
    assert sorted(n.id for n in described.nodes) == [1, 2, 3] and described.cluster_id == "replog-cluster"
    resource = ConfigResource("topic", "replicated", set_config={"max.message.bytes": "3000", "retention.ms": "9000"})
    with pytest.warns(DeprecationWarning):
        future = admin.alter_configs([resource])[resource]
    await asyncio.to_thread(future.result, TIMEOUT)  # AlterConfigs replaces the whole set
    assert cluster.controller.metadata.topics["replicated"].configs == {"max.message.bytes": "3000",
                                                                        "retention.ms": "9000"}
    kafka_admin = pytest.importorskip("kafka.admin")
    client = kafka_admin.KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        await asyncio.to_thread(client.alter_configs, [kafka_admin.ConfigResource(
            "TOPIC", "replicated", {"max.message.bytes": "2000"})])
    finally:
        client.close()
    # kafka-python sees IncrementalAlterConfigs offered and uses it: retention.ms stays.
    assert cluster.controller.metadata.topics["replicated"].configs == {"max.message.bytes": "2000",
                                                                        "retention.ms": "9000"}

    # Straight on the wire (no client-side checks): each bad assignment is refused with a message.
    async with Admin(cluster.bootstrap) as replog_admin:
        for assignment, said in (([[1, 1, 2]], "duplicates"), ([[]], "empty"), ([[1, 2]], "replication factor"),
                                 ([[1, 2, 3], [2, 3, 1]], "but only 2 assignment(s)")):
            with pytest.raises(KafkaError) as refused:
                await cluster_admin.create_partitions(replog_admin, "replicated", 5, assignment)
            assert refused.value.name == "INVALID_REPLICA_ASSIGNMENT" and said in str(refused.value)

    # The metadata log keeps configs and partitions across a controller restart.
    await cluster.restart_controller()
    assert cluster.controller.metadata.topics["replicated"].configs == {"max.message.bytes": "2000",
                                                                        "retention.ms": "9000"}
    assert cluster.controller.metadata.broker_configs == {"2": {"follower.replication.throttled.rate": "50000000"}}
    assert len(cluster.controller.metadata.topics["replicated"].partitions) == 4


# ------------------------------------------------- DescribeCluster, DescribeLogDirs, DeleteRecords, ElectLeaders


def produce_many(bootstrap: str, topic: str, count: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, f"v{i}".encode(), partition=0)
    assert producer.flush(TIMEOUT) == 0


def first_fetch_error(bootstrap: str, topic: str, offset: int):
    """What a consumer that may not reset its position gets when it fetches at `offset`."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "below-start",
                                         "auto.offset.reset": "error", "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, offset)])
    try:
        for _ in range(100):
            msg = consumer.poll(0.2)
            if msg is not None:
                return msg.error(), msg.offset()
        raise AssertionError("no answer to the fetch")
    finally:
        consumer.close()


def test_confluent_describe_cluster_and_delete_records(broker):
    admin = admin_of(broker.bootstrap)
    described = admin.describe_cluster().result(TIMEOUT)
    assert described.cluster_id == "replog-cluster"
    assert [n.id for n in described.nodes] == [1] and described.controller.id == 1
    create(admin, "trimmed")
    produce_many(broker.bootstrap, "trimmed", 100)
    deleted = admin.delete_records([confluent_kafka.TopicPartition("trimmed", 0, 40)])
    assert next(iter(deleted.values())).result(TIMEOUT).low_watermark == 40
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "watermarks"})
    assert consumer.get_watermark_offsets(confluent_kafka.TopicPartition("trimmed", 0), timeout=TIMEOUT) == (40, 100)
    consumer.close()
    error, _ = first_fetch_error(broker.bootstrap, "trimmed", 10)
    assert error is not None and error.code() == confluent_kafka.KafkaError._AUTO_OFFSET_RESET
    error, offset = first_fetch_error(broker.bootstrap, "trimmed", 40)
    assert error is None and offset == 40
    beyond = admin.delete_records([confluent_kafka.TopicPartition("trimmed", 0, 500)])
    assert error_of(next(iter(beyond.values()))).code() == confluent_kafka.KafkaError.OFFSET_OUT_OF_RANGE


def test_kafka_python_describe_log_dirs_and_elect_leaders_on_one_node(broker):
    kafka_admin = pytest.importorskip("kafka.admin")
    create(admin_of(broker.bootstrap), "on-disk")
    produce_many(broker.bootstrap, "on-disk", 10)
    client = kafka_admin.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        described = repr(client.describe_log_dirs())
        assert "on-disk" in described and str(broker.log_dir) in described
        errors = client.elect_leaders(0, {"on-disk": [0]}, raise_errors=False)
        codes = [p.error_code for t in errors.replica_election_results for p in t.partition_result]
        assert codes == [84]  # ELECTION_NOT_NEEDED: the only broker leads already
    finally:
        client.close()


@pytest.fixture
async def cluster_with_fast_checkpoints(tmp_path):
    cluster = LocalCluster(tmp_path, overrides={"log.flush.offset.checkpoint.interval.ms": "200"})
    try:
        await cluster.start()
        yield cluster
    finally:
        await cluster.stop()


async def test_cluster_delete_records_followers_follow_and_preferred_election(cluster_with_fast_checkpoints):
    cluster = cluster_with_fast_checkpoints
    admin = admin_of(cluster.bootstrap)
    await asyncio.to_thread(create, admin, "shared", 1, 3)
    await asyncio.to_thread(produce_many, cluster.bootstrap, "shared", 100)
    deleted = admin.delete_records([confluent_kafka.TopicPartition("shared", 0, 60)])
    assert (await asyncio.to_thread(next(iter(deleted.values())).result, TIMEOUT)).low_watermark == 60

    def log_starts() -> dict[int, int]:
        starts = {}
        for node_id in cluster.brokers:
            path = cluster.log_dir(node_id, "shared", 0).parent / LOG_START_OFFSET_CHECKPOINT
            starts[node_id] = OffsetCheckpointFile(path).read().get(("shared", 0), 0) if path.exists() else 0
        return starts
    await cluster.wait_for(lambda: set(log_starts().values()) == {60}, 20.0, "every replica's log start at 60")

    preferred = cluster.controller.registration("shared", 0).replicas[0]
    await cluster.kill(preferred)
    await cluster.wait_for(lambda: cluster.controller.registration("shared", 0).leader not in (preferred, -1), 20.0,
                           "leadership to move off the killed broker")
    await cluster.restart(preferred)
    await cluster.wait_for_isr("shared", 0, set(cluster.brokers))
    kafka_admin = pytest.importorskip("kafka.admin")
    client = kafka_admin.KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        response = await asyncio.to_thread(client.elect_leaders, 0, {"shared": [0]}, raise_errors=False)
    finally:
        client.close()
    assert [p.error_code for t in response.replica_election_results for p in t.partition_result] == [0]
    assert cluster.controller.registration("shared", 0).leader == preferred


async def test_kafka_python_unclean_election_brings_an_offline_partition_back(cluster):
    """Replicas [a, b]: b dies (the ISR shrinks to a), then a dies: no leader. b returns but is not in the ISR,
    and unclean.leader.election.enable is off, so the partition stays offline until an unclean election."""
    admin = admin_of(cluster.bootstrap)
    await asyncio.to_thread(create, admin, "fragile", 1, 2)
    a, b = cluster.controller.registration("fragile", 0).replicas
    await cluster.kill(b)
    await cluster.wait_for_isr("fragile", 0, {a})
    await cluster.kill(a)
    await cluster.wait_for(lambda: cluster.controller.registration("fragile", 0).leader == -1, 20.0,
                           "the partition to lose its leader")
    await cluster.restart(b)
    assert cluster.controller.registration("fragile", 0).leader == -1
    kafka_admin = pytest.importorskip("kafka.admin")
    survivor = next(n for n in cluster.brokers if n not in (a, b))
    client = kafka_admin.KafkaAdminClient(bootstrap_servers=cluster.brokers[survivor].bootstrap)
    try:
        response = await asyncio.to_thread(client.elect_leaders, 1, {"fragile": [0]}, raise_errors=False)
    finally:
        client.close()
    assert [p.error_code for t in response.replica_election_results for p in t.partition_result] == [0]
    elected = cluster.controller.registration("fragile", 0)
    assert (elected.leader, elected.isr) == (b, (b,))


async def test_single_node_refuses_too_many_partitions_and_foreign_replicas(broker):
    create(admin_of(broker.bootstrap), "bounded")
    async with Admin(broker.bootstrap) as replog_admin:
        with pytest.raises(KafkaError) as refused:
            await cluster_admin.create_partitions(replog_admin, "bounded", 2**31 - 1)
        assert refused.value.name == "INVALID_PARTITIONS"
        with pytest.raises(KafkaError) as refused:
            await cluster_admin.create_partitions(replog_admin, "bounded", 2, [[2]])
        assert refused.value.name == "INVALID_REPLICA_ASSIGNMENT" and "the only broker is 1" in str(refused.value)


async def test_elect_leaders_with_an_unknown_election_type_is_an_invalid_request(broker):
    async with Admin(broker.bootstrap) as replog_admin:
        connection = await replog_admin.cluster.any_connection()
        response = await connection.send(ApiKey.ELECT_LEADERS, {
            "election_type": 7, "timeout": 1000, "topic_partitions": [{"topic": "any", "partitions": [0]}]})
    assert response.error_code == 42  # INVALID_REQUEST
    assert [p.error_code for t in response.replica_election_results for p in t.partition_result] == [42]


def test_create_topics_takes_throttled_replicas_and_checks_them(broker):
    admin = admin_of(broker.bootstrap)
    accepted = NewTopic("throttled", 1, 1, config={"leader.replication.throttled.replicas": "0:1"})
    for future in admin.create_topics([accepted]).values():
        future.result(TIMEOUT)
    assert describe(admin, "topic", "throttled")["leader.replication.throttled.replicas"].value == "0:1"
    refused = NewTopic("badly-throttled", 1, 1, config={"follower.replication.throttled.replicas": "zero"})
    error = error_of(admin.create_topics([refused])["badly-throttled"])
    assert error.code() == confluent_kafka.KafkaError.INVALID_CONFIG
    assert "follower.replication.throttled.replicas" in error.str()
