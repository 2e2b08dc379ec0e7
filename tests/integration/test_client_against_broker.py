"""The bundled client against a real broker process: one broker for the module, each test on topics of its
own; the restart test gets a broker to itself."""

import asyncio
import time

import pytest

from replog.client import (
    Admin,
    Consumer,
    KafkaError,
    NewTopic,
    Producer,
    SyncAdmin,
    SyncConsumer,
    SyncProducer,
)
from replog.client.partitioner import partition_for_key
from replog.harness.broker_process import BrokerProcess

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    """A broker for the tests that only create topics of their own names on it; always stopped."""
    data = tmp_path_factory.mktemp("client")
    with BrokerProcess(data / "logs", output=data / "broker.out").started() as process:
        yield process


async def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    async with Admin(bootstrap) as admin:
        await admin.create_topics([NewTopic(name, partitions, 1)])


async def read_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout_s: float = 20.0):
    async with Consumer(bootstrap) as consumer:
        tps = [(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out = []
        deadline = time.monotonic() + timeout_s
        while len(out) < expected and time.monotonic() < deadline:
            for records in (await consumer.getmany(500)).values():
                out.extend(records)
        return out


@pytest.mark.parametrize("codec", CODECS)
async def test_round_trip_with_every_codec(shared_broker, codec):
    topic = f"codec-{codec}"
    await create_topic(shared_broker.bootstrap, topic, 2)
    async with Producer(shared_broker.bootstrap, compression=codec) as producer:
        deliveries = [
            await producer.send(topic, b"value-%d" % i, key=b"k%d" % i, headers=[("h", b"%d" % i)])
            for i in range(300)
        ]
        await producer.flush()
    metadata = [d.result() for d in deliveries]
    assert all(m.offset >= 0 for m in metadata)
    assert all(m.partition == partition_for_key(b"k%d" % i, 2) for i, m in enumerate(metadata))
    records = await read_all(shared_broker.bootstrap, topic, 2, 300)
    assert sorted(r.value for r in records) == sorted(b"value-%d" % i for i in range(300))
    by_value = {r.value: r for r in records}
    assert by_value[b"value-7"].key == b"k7"
    assert by_value[b"value-7"].headers == [("h", b"7")]


@pytest.mark.parametrize("acks", [0, 1, "all"])
async def test_acks(shared_broker, acks):
    topic = f"acks-{acks}"
    await create_topic(shared_broker.bootstrap, topic)
    async with Producer(shared_broker.bootstrap, acks=acks) as producer:
        deliveries = [await producer.send(topic, b"m%d" % i) for i in range(100)]
        await producer.flush()
    offsets = [d.result().offset for d in deliveries]
    if acks == 0:
        assert offsets == [-1] * 100  # no response, so no offsets
    else:
        assert offsets == list(range(100))
    assert [r.value for r in await read_all(shared_broker.bootstrap, topic, 1, 100)] == [
        b"m%d" % i for i in range(100)
    ]


async def test_idempotent_producer_survives_broker_restart(broker):
    topic = "idem"
    await create_topic(broker.bootstrap, topic)
    async with Producer(broker.bootstrap, acks="all", linger_ms=1, retry_backoff_ms=50) as producer:
        first = [await producer.send(topic, b"a%d" % i) for i in range(200)]
        await producer.flush()
        assert producer.producer_id >= 0
        await asyncio.to_thread(broker.restart)
        second = [await producer.send(topic, b"b%d" % i) for i in range(200)]
        await producer.flush()
    offsets = [d.result().offset for d in first + second]
    assert offsets == list(range(400))  # retried across the restart, in order, without duplicates
    values = [r.value for r in await read_all(broker.bootstrap, topic, 1, 400)]
    assert values == [b"a%d" % i for i in range(200)] + [b"b%d" % i for i in range(200)]


async def test_admin_create_list_describe_delete(shared_broker):
    async with Admin(shared_broker.bootstrap) as admin:
        await admin.create_topics([NewTopic("adm", 3, 1)])
        with pytest.raises(KafkaError) as exc:
            await admin.create_topics([NewTopic("adm", 3, 1)])
        assert exc.value.name == "TOPIC_ALREADY_EXISTS"
        assert "adm" in await admin.list_topics()
        described = (await admin.describe_topics(["adm"]))["adm"]
        assert [p.partition for p in described.partitions] == [0, 1, 2]
        assert all(p.leader == 1 and p.replicas == (1,) and p.isr == (1,) for p in described.partitions)
        await admin.delete_topics(["adm"])
        deadline = time.monotonic() + 10
        while "adm" in await admin.list_topics() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert "adm" not in await admin.list_topics()
        with pytest.raises(KafkaError) as exc:
            await admin.describe_topics(["adm"])
        assert exc.value.name == "UNKNOWN_TOPIC_OR_PARTITION"


async def test_seek_positions_and_offset_lookups(shared_broker):
    topic = "seek"
    await create_topic(shared_broker.bootstrap, topic)
    base = 1_700_000_000_000
    async with Producer(shared_broker.bootstrap, linger_ms=0) as producer:
        for i in range(50):
            await (await producer.send(topic, b"v%d" % i, timestamp_ms=base + i * 1000))
    tp = (topic, 0)
    async with Consumer(shared_broker.bootstrap) as consumer:
        consumer.assign([tp])
        assert await consumer.beginning_offsets([tp]) == {tp: 0}
        assert await consumer.end_offsets([tp]) == {tp: 50}
        found = await consumer.offsets_for_times({tp: base + 10_500})
        assert found[tp].offset == 11
        assert found[tp].timestamp == base + 11_000
        assert (await consumer.offsets_for_times({tp: base + 10**9}))[tp] is None
        consumer.seek(tp, 42)
        records = (await consumer.getmany(2000))[tp]
        assert [r.offset for r in records] == list(range(42, 50))
        assert await consumer.position(tp) == 50
        consumer.seek_to_beginning(tp)
        assert await consumer.position(tp) == 0
        consumer.seek_to_end(tp)
        assert await consumer.position(tp) == 50


async def test_offset_out_of_range_resets_to_earliest(shared_broker):
    topic = "oor"
    await create_topic(shared_broker.bootstrap, topic)
    async with Producer(shared_broker.bootstrap) as producer:
        await (await producer.send(topic, b"only"))
    tp = (topic, 0)
    async with Consumer(shared_broker.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 1000)
        records = (await consumer.getmany(3000)).get(tp, [])
        assert [r.value for r in records] == [b"only"]
    async with Consumer(shared_broker.bootstrap, auto_offset_reset="none") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 1000)
        with pytest.raises(KafkaError) as exc:
            await consumer.getmany(3000)
        assert exc.value.name == "OFFSET_OUT_OF_RANGE"


async def test_async_iteration(shared_broker):
    topic = "iter"
    await create_topic(shared_broker.bootstrap, topic)
    async with Producer(shared_broker.bootstrap) as producer:
        for i in range(20):
            await producer.send(topic, b"%d" % i)
    async with Consumer(shared_broker.bootstrap) as consumer:
        consumer.assign([(topic, 0)])
        seen = []
        async for record in consumer:
            seen.append(record.value)
            if len(seen) == 20:
                break
    assert seen == [b"%d" % i for i in range(20)]


def test_sync_wrappers(shared_broker):
    with SyncAdmin(shared_broker.bootstrap) as admin:
        admin.create_topics([NewTopic("sync", 1, 1)])
        assert "sync" in admin.list_topics()
    with SyncProducer(shared_broker.bootstrap) as producer:
        futures = [producer.send("sync", b"s%d" % i) for i in range(10)]
        producer.flush()
        assert sorted(f.result(10).offset for f in futures) == list(range(10))
    with SyncConsumer(shared_broker.bootstrap) as consumer:
        consumer.assign([("sync", 0)])
        consumer.seek_to_beginning()
        records = consumer.getmany(5000)[("sync", 0)]
        assert sorted(r.value for r in records) == sorted(b"s%d" % i for i in range(10))
