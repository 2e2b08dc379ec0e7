"""A broker whose file budget (log.open.files.max) is far below what its partitions would hold open: every
partition still takes its records and serves them back, before and after a restart, while the broker's
descriptors stay within the budget plus its sockets."""

import asyncio
import os

import pytest

from replog.client import Admin, Consumer, NewTopic, Producer
from replog.harness.broker_process import BrokerProcess

TOPIC = "budgeted"
PARTITIONS = 80  # several segments each: about 5 descriptors a segment, thousands if all stayed open
RECORDS_PER_PARTITION = 30
BUDGET = 64
# Listeners, client and metrics connections, the broker's own files (locks, stdout), checkpoints being written.
NON_SEGMENT_FILES = 60


def _open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _value(partition: int, index: int) -> bytes:
    return b"p%d-r%d-" % (partition, index) + b"x" * 300


async def _produce_all(bootstrap: str) -> None:
    async with Producer(bootstrap, linger_ms=0) as producer:
        for index in range(RECORDS_PER_PARTITION):
            futures = [await producer.send(TOPIC, _value(p, index), partition=p) for p in range(PARTITIONS)]
            await asyncio.gather(*futures)


async def _read_all(bootstrap: str) -> dict[int, list[bytes]]:
    found: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    async with Consumer(bootstrap) as consumer:
        tps = [(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek_to_beginning(tp)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while sum(map(len, found.values())) < PARTITIONS * RECORDS_PER_PARTITION and loop.time() < deadline:
            for (_, partition), records in (await consumer.getmany(500)).items():
                found[partition] += [record.value for record in records]
    return found


@pytest.fixture
def budgeted_broker(tmp_path):
    process = BrokerProcess(tmp_path / "logs", output=tmp_path / "broker.out",
                            overrides={"log.open.files.max": str(BUDGET)})
    process.start()
    try:
        yield process
    finally:
        process.stop()


def test_a_broker_serves_more_partitions_than_its_file_budget_holds_open_across_a_restart(budgeted_broker):
    expected = {p: [_value(p, index) for index in range(RECORDS_PER_PARTITION)] for p in range(PARTITIONS)}

    async def create_produce_and_read() -> dict[int, list[bytes]]:
        async with Admin(budgeted_broker.bootstrap) as admin:
            await admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, {"segment.bytes": "4096"})])
        await _produce_all(budgeted_broker.bootstrap)
        return await _read_all(budgeted_broker.bootstrap)

    assert asyncio.run(create_produce_and_read()) == expected
    segments = sum(1 for _ in budgeted_broker.log_dir.glob(f"{TOPIC}-*/*.log"))
    assert segments >= 2 * PARTITIONS  # all open would be 5 descriptors each, far above the budget
    assert _open_files(budgeted_broker.proc.pid) <= BUDGET + NON_SEGMENT_FILES

    budgeted_broker.stop()
    budgeted_broker.start()
    assert asyncio.run(_read_all(budgeted_broker.bootstrap)) == expected
    assert _open_files(budgeted_broker.proc.pid) <= BUDGET + NON_SEGMENT_FILES
