"""The bundled consumer's rebalance callbacks against a live broker (issue 15, item 5): when a second member
joins and then leaves, the first hears revoke then assign each time, in that order; a commit made in
on_partitions_revoked (auto-commit off) is kept, so the partitions' next owner starts after what was read;
an exception from a callback reaches the poll without stopping the rebalance."""

import asyncio

import pytest

from replog.client import group_admin
from replog.client.consumer import Consumer
from replog.client.rebalance_listener import ConsumerRebalanceListener
from tests.conditions import wait_until
from tests.integration.test_client_groups import FAST_HEARTBEATS
from tests.interop.test_consumer_groups import create_topic_with_records

TOPIC = "rebalanced"
GROUP = "listening"
RECORDS = 300
ALL = {(TOPIC, p) for p in range(3)}


class CommittingListener(ConsumerRebalanceListener):
    """Records each callback; commits the consumer's positions when partitions are revoked."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.events: list[tuple[str, frozenset]] = []

    async def on_partitions_revoked(self, revoked):
        self.events.append(("revoked", frozenset(revoked)))
        await self.consumer.commit()

    def on_partitions_assigned(self, assigned):  # a plain function works as well as a coroutine
        self.events.append(("assigned", frozenset(assigned)))


def test_a_member_joining_and_leaving_revokes_then_assigns_and_a_commit_in_revoke_is_kept(group_broker):
    pytest.importorskip("confluent_kafka")  # create_topic_with_records fills the topic through it
    bootstrap = group_broker.bootstrap
    ends = create_topic_with_records(bootstrap, TOPIC, count=RECORDS)

    async def scenario() -> tuple[list, list, dict]:
        first = Consumer(bootstrap, group_id=GROUP, enable_auto_commit=False, **FAST_HEARTBEATS)
        second = Consumer(bootstrap, group_id=GROUP, enable_auto_commit=False, **FAST_HEARTBEATS)
        listener = CommittingListener(first)
        read_by = {"first": 0, "second": 0}
        polling = {"first": True, "second": True}

        async def poll(name: str, consumer: Consumer) -> None:
            while polling[name]:
                read_by[name] += sum(len(rs) for rs in (await consumer.getmany(100)).values())

        first.subscribe([TOPIC], listener=listener)
        first_task = asyncio.create_task(poll("first", first))
        await wait_until(lambda: read_by["first"] == RECORDS, "the first member to read everything", 30)

        second.subscribe([TOPIC])
        second_task = asyncio.create_task(poll("second", second))
        await wait_until(lambda: second.assignment() and len(listener.events) == 3, "a split", 30)
        share = first.assignment()
        polling["second"] = False
        await second_task
        await second.close()  # leaves: the first member takes every partition back
        await wait_until(lambda: len(listener.events) == 5, "the rebalance after the leave", 10)
        polling["first"] = False
        await first_task
        committed = await group_admin.committed_offsets(first.cluster, GROUP)
        await first.close()  # revokes once more
        return listener.events, [share, read_by["second"]], committed

    events, (share, read_by_second), committed = asyncio.run(scenario())
    assert share and share < ALL
    assert events == [("assigned", frozenset(ALL)),
                      ("revoked", frozenset(ALL)), ("assigned", frozenset(share)),
                      ("revoked", frozenset(share)), ("assigned", frozenset(ALL)),
                      ("revoked", frozenset(ALL))]
    # Only the revoke callback committed: the second member started where the first had read to.
    assert read_by_second == 0
    assert committed == {(TOPIC, p): end for p, end in ends.items()}


class FailingListener(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.assigned: list[set] = []

    def on_partitions_assigned(self, assigned):
        self.assigned.append(assigned)
        raise RuntimeError("listener bug")


def test_a_callback_exception_reaches_the_poll_and_the_member_keeps_its_partitions(group_broker):
    pytest.importorskip("confluent_kafka")
    bootstrap = group_broker.bootstrap
    create_topic_with_records(bootstrap, TOPIC, count=30)

    async def scenario() -> None:
        async with Consumer(bootstrap, group_id=GROUP, **FAST_HEARTBEATS) as consumer:
            listener = FailingListener()
            consumer.subscribe([TOPIC], listener=listener)
            with pytest.raises(RuntimeError, match="listener bug"):
                await consumer.getmany(100)
            assert listener.assigned == [ALL] and consumer.assignment() == ALL
            read = [0]

            async def read_everything() -> None:
                while read[0] < 30:
                    read[0] += sum(len(rs) for rs in (await consumer.getmany(100)).values())

            await asyncio.wait_for(read_everything(), 30)

    asyncio.run(scenario())
