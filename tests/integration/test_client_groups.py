"""The bundled consumer in group mode against a live broker (issue 15, item 5): two members split the
partitions with no record read twice, one leaves on close and the other takes its partitions at once, and
the group's committed offsets are where a later `replog consume --group` resumes."""

import asyncio
import time

import pytest

from replog.cli import EXIT_OK, main
from replog.client.consumer import Consumer
from tests.conditions import wait_until
from tests.interop.test_consumer_groups import committed_offsets, create_topic_with_records, produce

FAST_HEARTBEATS = {"heartbeat_interval_ms": 200, "session_timeout_ms": 6_000}


def test_members_split_partitions_rebalance_on_leave_and_commit(group_broker):
    pytest.importorskip("confluent_kafka")  # the witness that fills the topic and reads the commits
    bootstrap = group_broker.bootstrap
    ends = create_topic_with_records(bootstrap, "shared", count=300)

    async def scenario() -> list[bytes]:
        members = [Consumer(bootstrap, group_id="bundled", **FAST_HEARTBEATS) for _ in range(2)]
        read: list[bytes] = []
        running = [True, True]

        async def poll(i: int) -> None:
            members[i].subscribe(["shared"])
            while running[i]:
                for records in (await members[i].getmany(100)).values():
                    read.extend(r.value for r in records)

        tasks = [asyncio.create_task(poll(i)) for i in range(2)]
        first, second = members
        await wait_until(lambda: first.assignment() and second.assignment() and len(read) >= 300, "a split", 30)
        assert not first.assignment() & second.assignment()
        assert first.assignment() | second.assignment() == {("shared", p) for p in range(3)}
        running[1] = False
        await tasks[1]
        started = time.monotonic()
        await second.close()  # commits, then leaves: the other member rebalances without a session timeout
        # A close that waited for the group to expire the member would take the whole session timeout.
        assert time.monotonic() - started < FAST_HEARTBEATS["session_timeout_ms"] / 1000 / 2
        await wait_until(lambda: len(first.assignment()) == 3, "the survivor to take every partition", 5)
        running[0] = False
        await tasks[0]
        await first.close()
        return read

    read = asyncio.run(scenario())
    assert sorted(read) == sorted(f"v-{i}".encode() for i in range(300))
    assert committed_offsets(bootstrap, "bundled", "shared") == ends


def test_replog_consume_group_resumes_from_committed_offsets(group_broker, capsysbinary):
    bootstrap = group_broker.bootstrap
    create_topic_with_records(bootstrap, "cli-group", count=30)
    command = ["consume", "cli-group", "--bootstrap-server", bootstrap, "--group", "cli", "--from-beginning",
               "--max-messages", "20", "--timeout-ms", "3000"]
    assert main(command) == EXIT_OK
    first = capsysbinary.readouterr().out.split()
    assert len(first) == 20
    assert main(command) == EXIT_OK  # the other 10, then 3 s with nothing more
    second = capsysbinary.readouterr().out.split()
    produce(bootstrap, "cli-group", 10, start=30)
    assert main(command) == EXIT_OK
    third = capsysbinary.readouterr().out.split()
    assert sorted(first + second) == sorted(f"v-{i}".encode() for i in range(30))
    assert sorted(third) == sorted(f"v-{i}".encode() for i in range(30, 40))
