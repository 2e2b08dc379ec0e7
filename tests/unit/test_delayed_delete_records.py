"""DelayedDeleteRecords: the answer waits until the in-sync followers' log start offsets reach the offset."""

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace

from kio.schema.errors import ErrorCode

from replog.broker.delayed_delete_records import DelayedDeleteRecords, low_watermark
from replog.broker.purgatory import Purgatory
from replog.log.partition_log import TopicPartition

KEY = TopicPartition("t", 0)


@dataclass
class StubPartition:
    """What DelayedDeleteRecords reads of a partition: leadership, ISR, log start offsets."""

    log_start_offset: int
    followers: dict[int, SimpleNamespace] = field(default_factory=dict)
    isr: tuple[int, ...] = (1, 2, 3)
    is_leader: bool = True

    @property
    def log(self):
        return SimpleNamespace(log_start_offset=self.log_start_offset)

    @property
    def state(self):
        return SimpleNamespace(isr=self.isr)

    def follower_at(self, broker: int, log_start_offset: int) -> None:
        self.followers[broker] = SimpleNamespace(log_start_offset=log_start_offset)


def test_low_watermark_is_the_smallest_log_start_in_the_isr():
    partition = StubPartition(60, isr=(1, 2))
    partition.follower_at(2, 40)
    partition.follower_at(3, 0)  # out of the ISR: not waited for
    assert low_watermark(partition) == 40


async def test_answer_waits_for_the_followers_then_reports_the_low_watermark():
    partition = StubPartition(60, isr=(1, 2, 3))
    partition.follower_at(2, 0)
    partition.follower_at(3, 0)
    purgatory = Purgatory("deleteRecords", 10)
    results = {}
    op = DelayedDeleteRecords(lambda key: partition, 30_000, results, {KEY: 60})
    assert not purgatory.try_complete_else_watch(op, [KEY])
    partition.follower_at(2, 60)
    purgatory.check_and_complete(KEY)
    assert not op.future.done()  # follower 3 is still behind
    partition.follower_at(3, 60)
    purgatory.check_and_complete(KEY)
    assert (await op.future) == {KEY: (60, ErrorCode.none)}


async def test_followers_that_never_catch_up_time_the_request_out():
    partition = StubPartition(60)
    partition.follower_at(2, 0)
    purgatory = Purgatory("deleteRecords", 10)
    op = DelayedDeleteRecords(lambda key: partition, 20, {}, {KEY: 60})
    assert not purgatory.try_complete_else_watch(op, [KEY])
    assert (await asyncio.wait_for(op.future, 5)) == {KEY: (-1, ErrorCode.request_timed_out)}


async def test_a_leader_that_loses_leadership_answers_not_leader():
    partition = StubPartition(60)
    partition.follower_at(2, 0)
    purgatory = Purgatory("deleteRecords", 10)
    op = DelayedDeleteRecords(lambda key: partition, 30_000, {}, {KEY: 60})
    purgatory.try_complete_else_watch(op, [KEY])
    partition.is_leader = False
    purgatory.check_and_complete(KEY)
    assert (await op.future) == {KEY: (-1, ErrorCode.not_leader_or_follower)}
