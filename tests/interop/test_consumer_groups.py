"""Consumer groups through real clients (issue 15, item 6): each client subscribes with a group, consumes
everything, commits, closes without waiting out its session timeout, and a new consumer of the group resumes from the committed
offsets; two members split the partitions and rebalance when one leaves; admin clients list and describe
the group and its offsets."""

import asyncio
import shutil
import subprocess
import time

import pytest

from replog.client.admin import NewTopic
from replog.client.sync import SyncAdmin

RECORDS = 600
PARTITIONS = 3
# The clients' default session.timeout.ms. A close that waited for the group to expire the member (no
# LeaveGroup, or no answer to it) would take at least that long; half of it leaves a loaded machine room.
LIBRDKAFKA_SESSION_TIMEOUT_S = 45.0
KAFKA_PYTHON_SESSION_TIMEOUT_S = AIOKAFKA_SESSION_TIMEOUT_S = 10.0


def create_topic_with_records(bootstrap: str, topic: str, count: int = RECORDS,
                              partitions: int = PARTITIONS) -> dict[int, int]:
    """The topic, filled with `count` keyed records through confluent-kafka; returns end offsets."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    admin = SyncAdmin(bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1, {})])
    finally:
        admin.close()
    return produce(bootstrap, topic, count, confluent_kafka)


def produce(bootstrap: str, topic: str, count: int, confluent_kafka=None, start: int = 0) -> dict[int, int]:
    confluent_kafka = confluent_kafka or pytest.importorskip("confluent_kafka")
    ends: dict[int, int] = {}

    def on_delivery(err, msg):
        assert err is None, err
        ends[msg.partition()] = max(ends.get(msg.partition(), 0), msg.offset() + 1)

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(start, start + count):
        producer.produce(topic, f"v-{i}".encode(), key=str(i).encode(), on_delivery=on_delivery)
    assert producer.flush(60) == 0  # 60 s: the failover test produces through a cluster that just lost a broker
    return ends


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int = PARTITIONS) -> dict[int, int]:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = consumer.committed([confluent_kafka.TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in tps}


def confluent_consume(bootstrap: str, topic: str, group: str, count: int, **settings) -> tuple[list, float]:
    """Subscribe, read `count` records, commit, close: (values, seconds close() took)."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                         "auto.offset.reset": "earliest", **settings})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < count and time.monotonic() < deadline:
        for msg in consumer.consume(500, timeout=0.2):
            assert msg.error() is None, msg.error()
            values.append(msg.value())
    if settings.get("enable.auto.commit") is False:
        consumer.commit(asynchronous=False)
    started = time.monotonic()
    consumer.close()
    return values, time.monotonic() - started


def test_confluent_kafka_group_consumes_commits_and_resumes(broker):
    """Kafka's defaults (auto-commit, a 3 s initial rebalance delay), which the other tests shorten: the
    close() that took 46 s before replog had groups."""
    topic = "ck-group"
    ends = create_topic_with_records(broker.bootstrap, topic)
    values, close_s = confluent_consume(broker.bootstrap, topic, "ck", RECORDS)
    assert sorted(values) == sorted(f"v-{i}".encode() for i in range(RECORDS))
    assert close_s < LIBRDKAFKA_SESSION_TIMEOUT_S / 2
    assert committed_offsets(broker.bootstrap, "ck", topic) == ends
    produce(broker.bootstrap, topic, 30, start=RECORDS)
    resumed, _ = confluent_consume(broker.bootstrap, topic, "ck", 30)
    assert sorted(resumed) == sorted(f"v-{i}".encode() for i in range(RECORDS, RECORDS + 30))


def test_confluent_kafka_manual_commit(group_broker):
    topic = "ck-manual"
    ends = create_topic_with_records(group_broker.bootstrap, topic)
    values, close_s = confluent_consume(group_broker.bootstrap, topic, "ck-manual", RECORDS,
                                        **{"enable.auto.commit": False})
    assert len(values) == RECORDS and close_s < LIBRDKAFKA_SESSION_TIMEOUT_S / 2
    assert committed_offsets(group_broker.bootstrap, "ck-manual", topic) == ends


def test_kafka_python_group_consumes_commits_and_resumes(broker):
    # Kafka's default group.initial.rebalance.delay.ms (3 s): with 0, kafka-python's range assignor can run
    # before its metadata names the just-created topic ("No partition metadata for topic"), assign nothing,
    # and wait for its next metadata refresh (5 min) to rejoin: a client-side race Kafka's default delay hides.
    kafka = pytest.importorskip("kafka")
    bootstrap, topic = broker.bootstrap, "kp-group"
    ends = create_topic_with_records(bootstrap, topic)

    def consume(count: int) -> tuple[list[bytes], float]:
        consumer = kafka.KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id="kp",
                                       auto_offset_reset="earliest", enable_auto_commit=False)
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                values.extend(r.value for r in records)
        consumer.commit()
        started = time.monotonic()
        consumer.close()
        return values, time.monotonic() - started

    values, close_s = consume(RECORDS)
    assert len(values) == RECORDS and close_s < KAFKA_PYTHON_SESSION_TIMEOUT_S / 2
    assert committed_offsets(bootstrap, "kp", topic) == ends
    produce(bootstrap, topic, 20, start=RECORDS)
    resumed, _ = consume(20)
    assert sorted(resumed) == sorted(f"v-{i}".encode() for i in range(RECORDS, RECORDS + 20))


def test_aiokafka_group_consumes_commits_and_resumes(group_broker):
    aiokafka = pytest.importorskip("aiokafka")
    bootstrap, topic = group_broker.bootstrap, "aio-group"
    ends = create_topic_with_records(bootstrap, topic)

    async def consume(count: int) -> tuple[list[bytes], float]:
        consumer = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id="aio",
                                             auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        values: list[bytes] = []
        try:
            async with asyncio.timeout(30):
                while len(values) < count:
                    for records in (await consumer.getmany(timeout_ms=200)).values():
                        values.extend(r.value for r in records)
            await consumer.commit()
        finally:
            started = time.monotonic()
            await consumer.stop()
        return values, time.monotonic() - started

    values, close_s = asyncio.run(consume(RECORDS))
    assert len(values) == RECORDS and close_s < AIOKAFKA_SESSION_TIMEOUT_S / 2
    assert committed_offsets(bootstrap, "aio", topic) == ends
    produce(bootstrap, topic, 20, start=RECORDS)
    resumed, _ = asyncio.run(consume(20))
    assert sorted(resumed) == sorted(f"v-{i}".encode() for i in range(RECORDS, RECORDS + 20))


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is installed by .ci/run (apt-get install kcat)")
def test_kcat_balanced_consumer_commits_and_resumes(group_broker):
    bootstrap, topic = group_broker.bootstrap, "kcat-group"
    ends = create_topic_with_records(bootstrap, topic)

    def kcat_consume() -> list[str]:
        # -G: a balanced (group) consumer, starting from the committed offsets (an -o would override them);
        # -e: exit at the end of every partition, committing on the way out.
        out = subprocess.run(["kcat", "-b", bootstrap, "-G", "kc", "-X", "auto.offset.reset=earliest", "-e", "-q",
                              "-f", "%s\\n", topic], capture_output=True, timeout=60, check=True, text=True)
        return out.stdout.split()

    assert sorted(kcat_consume()) == sorted(f"v-{i}" for i in range(RECORDS))
    assert committed_offsets(bootstrap, "kc", topic) == ends
    produce(bootstrap, topic, 20, start=RECORDS)
    assert sorted(kcat_consume()) == sorted(f"v-{i}" for i in range(RECORDS, RECORDS + 20))


def test_two_members_split_partitions_and_rebalance_when_one_leaves(group_broker):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    bootstrap, topic = group_broker.bootstrap, "split"
    create_topic_with_records(bootstrap, topic, count=40, partitions=4)
    settings = {"bootstrap.servers": bootstrap, "group.id": "split", "auto.offset.reset": "earliest"}
    first, second = confluent_kafka.Consumer(settings), confluent_kafka.Consumer(settings)
    first.subscribe([topic])
    second.subscribe([topic])

    def assignments() -> tuple[set[int], set[int]]:
        return ({tp.partition for tp in first.assignment()}, {tp.partition for tp in second.assignment()})

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        first.poll(0.1)
        second.poll(0.1)
        a, b = assignments()
        if a and b and a | b == {0, 1, 2, 3}:
            break
    a, b = assignments()
    assert a and b and not a & b and a | b == {0, 1, 2, 3}
    second.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and {tp.partition for tp in first.assignment()} != {0, 1, 2, 3}:
        first.poll(0.1)
    assert {tp.partition for tp in first.assignment()} == {0, 1, 2, 3}
    first.close()


def test_admin_clients_list_and_describe_the_group_and_its_offsets(group_broker):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient

    bootstrap, topic = group_broker.bootstrap, "admin-topic"
    ends = create_topic_with_records(bootstrap, topic)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "watched",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                         "client.id": "watched-client"})
    consumer.subscribe([topic])
    read, deadline = 0, time.monotonic() + 30
    while read < RECORDS and time.monotonic() < deadline:
        read += len(consumer.consume(500, timeout=0.2))
    consumer.commit(asynchronous=False)
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        listed = admin.list_consumer_groups().result(timeout=10)
        assert [g.group_id for g in listed.valid] == ["watched"] and not listed.errors
        described = admin.describe_consumer_groups(["watched"])["watched"].result(timeout=10)
        assert described.state == confluent_kafka.ConsumerGroupState.STABLE
        assert [m.client_id for m in described.members] == ["watched-client"]
        assigned = {tp.partition for tp in described.members[0].assignment.topic_partitions}
        assert assigned == set(range(PARTITIONS))
        request = [confluent_kafka.ConsumerGroupTopicPartitions("watched")]
        offsets = admin.list_consumer_group_offsets(request)["watched"].result(timeout=10)
        assert {tp.partition: tp.offset for tp in offsets.topic_partitions} == ends

        kafka = pytest.importorskip("kafka")
        kp_admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            assert [(g["group_id"], g["group_state"]) for g in kp_admin.list_groups()] == [("watched", "Stable")]
            group = kp_admin.describe_groups(["watched"])["watched"]
            assert group["protocol_type"] == "consumer" and group["error"] is None
            assert [m["client_host"] for m in group["members"]] == ["/127.0.0.1"]
            kp_offsets = kp_admin.list_group_offsets("watched")["watched"]
            assert {tp.partition: meta.offset for tp, meta in kp_offsets.items()} == ends
            assert kp_admin.delete_groups(["watched"]) == {"watched": "NonEmptyGroupError"}
            consumer.close()
            assert kp_admin.delete_groups(["watched"]) == {"watched": "OK"}
            assert kp_admin.delete_groups(["watched"]) == {"watched": "GroupIdNotFoundError"}
            assert committed_offsets(bootstrap, "watched", topic) == {p: -1001 for p in range(PARTITIONS)}
        finally:
            kp_admin.close()
    finally:
        consumer.close()
