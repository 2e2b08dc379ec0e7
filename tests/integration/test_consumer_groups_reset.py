"""`replog consumer-groups --reset-offsets` against a live broker (issue 15, item 5): each mode moves a group's
committed offsets where kafka-consumer-groups would, clamped into the log; --dry-run only prints the plan; a
group with active members is refused with Kafka's message; a confluent-kafka consumer of the group then
resumes at the reset offsets.

One broker and one filled topic serve the whole module; each test gets a group of its own, committed at 10
on every partition, so no test sees another's resets."""

import asyncio
import itertools
import time

import pytest

from replog.cli import EXIT_ERROR, EXIT_OK, main
from replog.client import group_admin
from replog.client.admin import NewTopic
from replog.client.consumer import Consumer
from replog.client.producer import Producer
from replog.client.sync import SyncAdmin
from replog.harness.broker_process import BrokerProcess

TOPIC = "resets"
GROUP_PREFIX = "resetter"
GROUP_NUMBERS = itertools.count()
PARTITIONS = 3
OLD_RECORDS = 20  # per partition, timestamped in 1970: before any --to-datetime below but the first
NEW_RECORDS = 10  # per partition, timestamped now
END = OLD_RECORDS + NEW_RECORDS
ALL = [(TOPIC, p) for p in range(PARTITIONS)]


async def _fill(bootstrap: str) -> None:
    producer = Producer(bootstrap)
    try:
        for p in range(PARTITIONS):
            for i in range(END):
                stamp = 1_000 + i if i < OLD_RECORDS else None  # None: the producer's clock
                await producer.send(TOPIC, f"{p}-{i}".encode(), partition=p, timestamp_ms=stamp)
        await producer.flush()
    finally:
        await producer.close()


async def _commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    async with Consumer(bootstrap, group_id=group, enable_auto_commit=False) as consumer:
        await consumer.commit(offsets)


async def _committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    async with Consumer(bootstrap) as consumer:
        return await group_admin.committed_offsets(consumer.cluster, group)


@pytest.fixture(scope="module")
def filled_topic(tmp_path_factory):
    """A broker with a topic of 3 x 30 records, which the tests only read; its bootstrap address."""
    data = tmp_path_factory.mktemp("resets")
    broker = BrokerProcess(data / "logs", output=data / "broker.out",
                           overrides={"group.initial.rebalance.delay.ms": "0"})
    broker.start()
    try:
        admin = SyncAdmin(broker.bootstrap)
        try:
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, {})])
        finally:
            admin.close()
        asyncio.run(_fill(broker.bootstrap))
        yield broker.bootstrap
    finally:
        broker.stop()


@pytest.fixture
def committed_group(filled_topic):
    """A group of this test's own, which committed offset 10 on each partition and left: (bootstrap, group)."""
    group = f"{GROUP_PREFIX}-{next(GROUP_NUMBERS)}"
    asyncio.run(_commit(filled_topic, group, dict.fromkeys(ALL, 10)))
    return filled_topic, group


def reset(bootstrap: str, group: str, *arguments: str) -> int:
    return main(["consumer-groups", "--bootstrap-server", bootstrap, "--reset-offsets", "--group", group,
                 *arguments])


def plan_rows(out: str, group_id: str) -> dict[tuple[str, int], int]:
    lines = out.strip().splitlines()
    assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    rows = [line.split() for line in lines[1:]]
    assert all(group == group_id for group, *_ in rows)
    return {(topic, int(partition)): int(offset) for _, topic, partition, offset in rows}


def test_dry_run_prints_the_plan_and_changes_nothing(committed_group, capsys):
    bootstrap, group = committed_group
    assert reset(bootstrap, group, "--topic", TOPIC, "--to-earliest", "--dry-run") == EXIT_OK
    assert plan_rows(capsys.readouterr().out, group) == dict.fromkeys(ALL, 0)
    assert reset(bootstrap, group, "--topic", TOPIC, "--to-latest") == EXIT_OK  # neither flag: a dry run, with a warning
    captured = capsys.readouterr()
    assert plan_rows(captured.out, group) == dict.fromkeys(ALL, END)
    assert "--execute option is missing" in captured.err
    assert asyncio.run(_committed(bootstrap, group)) == dict.fromkeys(ALL, 10)


@pytest.mark.parametrize(("arguments", "expected", "warned"), [
    (["--topic", TOPIC, "--to-earliest"], dict.fromkeys(ALL, 0), False),
    (["--topic", TOPIC, "--to-latest"], dict.fromkeys(ALL, END), False),
    (["--topic", TOPIC, "--to-offset", "5"], dict.fromkeys(ALL, 5), False),
    (["--topic", TOPIC, "--to-offset", "1000"], dict.fromkeys(ALL, END), True),  # clamped to the log end
    (["--topic", TOPIC, "--shift-by", "-3"], dict.fromkeys(ALL, 7), False),
    (["--topic", TOPIC, "--shift-by", "-50"], dict.fromkeys(ALL, 0), True),  # clamped to the log start
    (["--topic", f"{TOPIC}:0,2", "--shift-by", "4"], {(TOPIC, 0): 14, (TOPIC, 2): 14}, False),
    (["--all-topics", "--to-earliest"], dict.fromkeys(ALL, 0), False),
    # The first old record is at 1970-01-01T00:00:01Z; 00:00:01.005 falls on the sixth.
    (["--topic", TOPIC, "--to-datetime", "1970-01-01T00:00:01.005Z"], dict.fromkeys(ALL, 5), False),
    # An hour ago lies between the 1970 records and the new ones.
    (["--topic", TOPIC, "--by-duration", "PT1H"], dict.fromkeys(ALL, OLD_RECORDS), False),
    # Past every record: the log end, with Kafka's warning.
    (["--topic", TOPIC, "--to-datetime", "2999-01-01T00:00:00.000Z"], dict.fromkeys(ALL, END), True),
])
def test_each_mode_executes_at_the_planned_offsets(committed_group, capsys, arguments, expected, warned):
    bootstrap, group = committed_group
    assert reset(bootstrap, group, *arguments, "--execute") == EXIT_OK
    captured = capsys.readouterr()
    assert plan_rows(captured.out, group) == expected
    assert ("Warn: " in captured.err) == warned
    assert asyncio.run(_committed(bootstrap, group)) == {**dict.fromkeys(ALL, 10), **expected}


def test_bad_scopes_and_modes_are_refused(committed_group, capsys):
    bootstrap, group = committed_group
    assert reset(bootstrap, group, "--to-earliest", "--execute") == 2
    assert "One of the reset scopes should be defined" in capsys.readouterr().err
    assert reset(bootstrap, group, "--topic", TOPIC, "--execute") == 2
    assert "needs one of --to-earliest" in capsys.readouterr().err
    assert reset(bootstrap, group, "--topic", f"{TOPIC}:7", "--to-earliest", "--execute") == 2
    assert "has no partition 7" in capsys.readouterr().err
    assert reset(bootstrap, group, "--topic", TOPIC, "--by-duration", "1 hour", "--execute") == 2
    assert asyncio.run(_committed(bootstrap, group)) == dict.fromkeys(ALL, 10)


def test_a_group_with_members_is_refused_and_a_confluent_consumer_resumes_at_the_reset(committed_group, capsys):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    bootstrap, group = committed_group
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 30
        while not consumer.assignment():
            assert time.monotonic() < deadline, "the member was never assigned partitions"
            consumer.poll(0.1)
        assert reset(bootstrap, group, "--topic", TOPIC, "--to-offset", "3", "--execute") == EXIT_ERROR
        assert (f"Error: Assignments can only be reset if the group '{group}' is inactive, but the current state "
                "is Stable.") in capsys.readouterr().err
        assert asyncio.run(_committed(bootstrap, group)) == dict.fromkeys(ALL, 10)
    finally:
        consumer.close()

    assert reset(bootstrap, group, "--topic", TOPIC, "--to-offset", "3", "--execute") == EXIT_OK
    witness = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                        "enable.auto.commit": False, "auto.offset.reset": "latest"})
    try:
        witness.subscribe([TOPIC])
        first: dict[int, int] = {}
        deadline = time.monotonic() + 30
        while len(first) < PARTITIONS:
            assert time.monotonic() < deadline, f"read only from partitions {sorted(first)}"
            msg = witness.poll(0.1)
            if msg is not None and msg.error() is None:
                first.setdefault(msg.partition(), msg.offset())
    finally:
        witness.close()
    assert first == dict.fromkeys(range(PARTITIONS), 3)


def test_a_group_that_never_existed_gets_the_reset_offsets(committed_group, capsys):
    """Kafka resets a Dead (unknown) group as an inactive one: the offsets are committed, the group appears."""
    bootstrap, group = committed_group
    assert main(["consumer-groups", "--bootstrap-server", bootstrap, "--reset-offsets", "--group", "newcomer",
                 "--topic", f"{TOPIC}:1", "--to-offset", "12", "--execute"]) == EXIT_OK
    assert plan_rows(capsys.readouterr().out, "newcomer") == {(TOPIC, 1): 12}

    async def committed_by_newcomer() -> dict:
        async with Consumer(bootstrap) as consumer:
            return await group_admin.committed_offsets(consumer.cluster, "newcomer")

    assert asyncio.run(committed_by_newcomer()) == {(TOPIC, 1): 12}
