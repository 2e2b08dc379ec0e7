"""Log compaction on a real broker: a topic with cleanup.policy=compact gets many updates per key while a
producer and a consumer keep running; the cleaner threads shrink its segment files, and a consumer from
offset 0 then sees one value per key (the latest) below the cleaned point, plus the uncleaned tail."""

import asyncio
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from replog.chaos.log_verifier import verify_partition
from replog.client import Admin, Consumer, NewTopic, Producer
from replog.harness.broker_process import BrokerProcess
from replog.log.checkpoint import OffsetCheckpointFile

TOPIC = "compacted"
KEYS = 40
VALUE = b"x" * 200
COMPACTED_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "32768",
                           "min.cleanable.dirty.ratio": "0.1", "delete.retention.ms": "600000"}


@pytest.fixture
def compacting_broker(tmp_path):
    process = BrokerProcess(tmp_path / "logs", output=tmp_path / "broker.out",
                            overrides={"log.cleaner.backoff.ms": "100", "log.cleaner.threads": "2"})
    process.start()
    try:
        yield process
    finally:
        process.stop()


def _segment_bytes(partition_dir: Path) -> int:
    total = 0
    for path in partition_dir.glob("*.log"):
        try:
            total += path.stat().st_size
        except FileNotFoundError:
            pass  # swapped out between the listing and the stat
    return total


def _cleaned_up_to(log_dir: Path) -> int:
    path = log_dir / "cleaner-offset-checkpoint"
    return OffsetCheckpointFile(path).read().get((TOPIC, 0), 0) if path.exists() else 0


async def _produce_updates(bootstrap: str, rounds: int, last: dict[bytes, bytes], tag: str) -> None:
    async with Producer(bootstrap, linger_ms=2) as producer:
        for round_ in range(rounds):
            for key in range(KEYS):
                value = b"%s-%d-" % (tag.encode(), round_) + VALUE
                await producer.send(TOPIC, value, key=b"key-%d" % key)
                last[b"key-%d" % key] = value
        await producer.flush()


async def _read_from_start(bootstrap: str) -> list:
    async with Consumer(bootstrap) as consumer:
        tp = (TOPIC, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = (await consumer.end_offsets([tp]))[tp]
        records = []
        deadline = time.monotonic() + 30
        while (not records or records[-1].offset < end - 1) and time.monotonic() < deadline:
            for batch in (await consumer.getmany(200)).values():
                records.extend(batch)
        assert records and records[-1].offset == end - 1, "the consumer did not reach the end"
        return records


def _kcat_from_start(bootstrap: str) -> list[tuple[int, bytes, bytes]]:
    """A third-party witness: kcat (librdkafka) reads the partition from offset 0 to its end."""
    out = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", TOPIC, "-p", "0", "-o", "beginning", "-e", "-q",
                          "-f", "%o %k %s\n"], capture_output=True, timeout=60, check=True).stdout
    rows = [line.split(b" ", 2) for line in out.splitlines()]
    return [(int(offset), key, value) for offset, key, value in rows]


async def _tail_consumer(bootstrap: str, stop: asyncio.Event, seen: list) -> None:
    """Reads continuously from offset 0 while the cleaner works: offsets must only increase."""
    async with Consumer(bootstrap) as consumer:
        consumer.assign([(TOPIC, 0)])
        consumer.seek_to_beginning((TOPIC, 0))
        while not stop.is_set():
            for batch in (await consumer.getmany(100)).values():
                for record in batch:
                    assert not seen or record.offset > seen[-1], (record.offset, seen[-1])
                    seen.append(record.offset)


async def _wait_until(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


async def test_a_compacted_topic_keeps_the_latest_value_per_key_under_load(compacting_broker):
    bootstrap = compacting_broker.bootstrap
    log_dir = compacting_broker.log_dir
    partition_dir = log_dir / f"{TOPIC}-0"
    async with Admin(bootstrap) as admin:
        await admin.create_topics([NewTopic(TOPIC, 1, 1, COMPACTED_TOPIC_CONFIGS)])
    last: dict[bytes, bytes] = {}
    await _produce_updates(bootstrap, 60, last, "first")
    produced_bytes = 100 * KEYS * len(VALUE)  # the value bytes alone, of both rounds of updates

    stop, seen = asyncio.Event(), []
    consumer = asyncio.create_task(_tail_consumer(bootstrap, stop, seen))
    producer = asyncio.create_task(_produce_updates(bootstrap, 40, last, "during"))
    await _wait_until(lambda: _cleaned_up_to(log_dir) > 0 and _segment_bytes(partition_dir) < produced_bytes / 4,
                      60, "the cleaner to shrink the log")
    await producer
    await _wait_until(lambda: len(seen) > 0, 30, "the tail consumer")
    stop.set()
    await consumer

    cleaned_up_to = _cleaned_up_to(log_dir)  # before reading: what was cleaned by then is read cleaned
    records = await _read_from_start(bootstrap)
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets))
    cleaned_keys = [r.key for r in records if r.offset < cleaned_up_to]
    assert len(cleaned_keys) == len(set(cleaned_keys)) <= KEYS
    latest = {}
    for record in records:
        latest[record.key] = record.value
    assert latest == last
    assert len(records) < 100 * KEYS / 2
    if shutil.which("kcat"):  # the cleaner may have gone further since: the same checks, not the same rows
        witnessed = _kcat_from_start(bootstrap)
        assert [offset for offset, _, _ in witnessed] == sorted({offset for offset, _, _ in witnessed})
        assert {key: value for _, key, value in witnessed} == last
        below = [key for offset, key, _ in witnessed if offset < cleaned_up_to]
        assert len(below) == len(set(below))
    assert compacting_broker.stop() == 0  # the cleaner stops with the broker: the files are at rest
    assert verify_partition(partition_dir, compacted=True).problems == []
    assert not [path.name for path in partition_dir.iterdir() if path.suffix in (".cleaned", ".swap")]
