"""The leader's HW checks and purgatory wake-ups after follower fetches, counted, and the rules they keep.

Kafka's Partition.updateFollowerFetchState checks the HW only when the follower's LEO moved, and completes
delayed requests only when the HW or the low watermark moved. Checked on every follower fetch, a produce to
1,000 partitions cost 9 HW checks and 12 purgatory checks per Produce request across the cluster
(docs/profiles/partition-cost.md, session 14). Counts, never time.
"""

import uuid

import pytest
from kio.schema.errors import ErrorCode

from benchmarks.leader_fetch_rounds import count_calls as count_all_calls
from replog.broker.delayed_delete_records import DelayedDeleteRecords, move_log_start
from replog.broker.fetch_params import FollowerFetch
from replog.broker.replica_manager import ReplicaManager
from replog.log.config import LogConfig
from replog.log.log_manager import LogManager
from replog.log.partition_log import TopicPartition
from replog.protocol.control import LeaderAndIsrPartitionState, LeaderAndIsrRequest, LeaderAndIsrTopicState
from replog.protocol.records import build_batch

LEADER, FOLLOWERS = 1, (2, 3)
LEADER_EPOCH = 3
LAG_MS = 30_000
KEY = TopicPartition("t", 0)
BATCH = bytes(build_batch([(None, b"x" * 100, [], 1000)]))
COUNTED = {("broker/partition.py", "maybe_increment_high_watermark"): "hw checks",
           ("broker/purgatory.py", "check_and_complete"): "purgatory checks",
           ("broker/replication_rules.py", "isr_expansion"): "isr expansion rules"}


class Leader:
    """A leader of t-0 with two followers, fetching through ReplicaManager.read_partition as the Fetch handler
    does; the clock is set by hand, AlterPartition requests are kept."""

    def __init__(self, manager: ReplicaManager, clock: list[int], isr_changes: list) -> None:
        self.manager, self.clock, self.isr_changes = manager, clock, isr_changes
        self.partition = manager.get_partition(*KEY)

    def produce(self):
        return self.manager.append_records([(*KEY, memoryview(bytearray(BATCH)))], -1, 30_000)

    def fetch(self, replica_id: int, offset: int, log_start_offset: int = 0) -> None:
        result = self.manager.read_partition(
            *KEY, offset, current_leader_epoch=LEADER_EPOCH, last_fetched_epoch=-1, max_bytes=1 << 20,
            fetcher=FollowerFetch(replica_id, log_start_offset), min_one_batch=True)
        assert result.error_code == ErrorCode.none

    def round(self) -> None:
        """An acks=all produce as the followers replicate it: each fetches the batch (at its old LEO), then
        fetches again at the new LEO; the second of those moves the HW and completes the produce."""
        offset = self.partition.log.log_end_offset
        produced = self.produce()
        for follower in FOLLOWERS:
            self.fetch(follower, offset)
        assert not produced.done()
        for follower in FOLLOWERS:
            self.fetch(follower, offset + 1)
        assert produced.done() and produced.result()[KEY].error_code == ErrorCode.none


async def leader_of(tmp_path, min_insync_replicas: int = 2) -> Leader:
    config = LogConfig(segment_bytes=1 << 30)
    clock = [1_000_000]
    isr_changes = []
    manager = ReplicaManager(LEADER, LogManager([tmp_path], config, clock_ms=lambda: clock[0]), config,
                             min_insync_replicas, clock_ms=lambda: clock[0], replica_lag_time_max_ms=LAG_MS,
                             fetch_purgatory_size=100, produce_purgatory_size=100,
                             alter_isr=lambda partition, change: isr_changes.append(change))
    replicas = [LEADER, *FOLLOWERS]
    state = LeaderAndIsrPartitionState("t", 0, 1, LEADER, LEADER_EPOCH, replicas, 1, replicas)
    await manager.become_leader_or_follower(
        LeaderAndIsrRequest(9, 1, -1, [LeaderAndIsrTopicState("t", uuid.uuid4(), [state])], []))
    leader = Leader(manager, clock, isr_changes)
    for follower in FOLLOWERS:
        leader.fetch(follower, 0)
    return leader


@pytest.fixture
async def leader(tmp_path):
    leader = await leader_of(tmp_path)
    for _ in range(3):
        leader.round()
    return leader


def count_calls(action, rounds: int) -> dict[str, float]:
    """The COUNTED functions' calls per round."""
    calls = count_all_calls(action, rounds)
    return {name: calls[key] for key, name in COUNTED.items()}


async def test_a_produce_round_checks_the_hw_once_per_leo_that_moved(leader):
    # The append, and each follower's fetch at its new LEO: not the two fetches that bring the batch (at the
    # LEO they already reported).
    assert count_calls(leader.round, 10)["hw checks"] == 3


async def test_a_produce_round_checks_the_purgatories_for_the_append_and_the_hw_move_only(leader):
    # The append wakes the fetch purgatory (parked fetches read the batch); the HW move wakes all three
    # (fetch, produce, DeleteRecords). The follower fetches whose log start did not move wake none.
    assert count_calls(leader.round, 10)["purgatory checks"] == 4


async def test_a_follower_fetching_where_it_was_checks_nothing(leader):
    offset = leader.partition.log.log_end_offset
    assert count_calls(lambda: leader.fetch(FOLLOWERS[0], offset), 10) == {
        "hw checks": 0, "purgatory checks": 0, "isr expansion rules": 0}  # an ISR member: nothing to expand


async def test_a_follower_out_of_the_isr_joins_it_once_caught_up(leader):
    leader.clock[0] += LAG_MS + 1
    offset = leader.partition.log.log_end_offset
    leader.produce()
    leader.fetch(FOLLOWERS[0], offset + 1)
    assert leader.manager.maybe_shrink_isr() == 1
    (shrink,) = leader.isr_changes
    leader.manager.complete_isr_change(leader.partition, shrink, ErrorCode.none, leader_epoch=LEADER_EPOCH,
                                       isr=shrink.proposed_isr, partition_epoch=2)
    leader.fetch(FOLLOWERS[1], offset)  # behind the HW: may not join
    assert len(leader.isr_changes) == 1
    leader.fetch(FOLLOWERS[1], offset + 1)
    expand = leader.isr_changes[-1]
    assert expand.kind.value == "expand" and expand.proposed_isr == (LEADER, FOLLOWERS[0], FOLLOWERS[1])


async def test_the_hw_moves_with_the_last_follower_to_reach_it(leader):
    offset = leader.partition.log.log_end_offset
    produced = leader.produce()
    leader.fetch(FOLLOWERS[0], offset + 1)
    leader.fetch(FOLLOWERS[0], offset + 1)  # again, at the same LEO: the HW still waits for the other
    assert leader.partition.high_watermark == offset and not produced.done()
    leader.fetch(FOLLOWERS[1], offset + 1)
    assert leader.partition.high_watermark == offset + 1 and produced.done()


async def test_a_follower_out_of_sync_for_the_lag_time_holds_the_hw_until_its_shrink_commits(leader):
    # Follower 3 stops fetching; the ISR shrink is not committed, so it keeps counting (maximal ISR) until the
    # controller answers. Kafka's rule, kept: the HW moves on an event (a LEO that moved, an ISR change),
    # never on the clock alone.
    offset = leader.partition.log.log_end_offset
    produced = leader.produce()
    leader.fetch(FOLLOWERS[0], offset + 1)
    leader.clock[0] += LAG_MS + 1
    assert leader.manager.maybe_shrink_isr() == 1
    (change,) = leader.isr_changes
    assert change.proposed_isr == (LEADER, FOLLOWERS[0])
    assert not produced.done()  # a shrink in flight still counts follower 3
    leader.manager.complete_isr_change(leader.partition, change, ErrorCode.none, leader_epoch=LEADER_EPOCH,
                                       isr=change.proposed_isr, partition_epoch=2)
    assert leader.partition.high_watermark == offset + 1 and produced.done()


async def test_delete_records_completes_when_the_last_followers_log_start_moves_without_its_leo(leader):
    hw = leader.partition.high_watermark
    assert move_log_start(leader.partition, hw) == (hw, ErrorCode.none)
    results = {}
    op = DelayedDeleteRecords(lambda key: leader.manager.get_partition(*key), 30_000, results, {KEY: hw})
    assert not leader.manager.delete_records_purgatory.try_complete_else_watch(op, [KEY])
    leader.fetch(FOLLOWERS[0], hw, log_start_offset=hw)
    assert not op.future.done()
    leader.fetch(FOLLOWERS[1], hw, log_start_offset=hw)  # the same LEO: only its log start moved
    assert op.future.done() and op.future.result() == {KEY: (hw, ErrorCode.none)}


async def test_delete_records_completes_when_the_follower_holding_the_low_watermark_leaves_the_isr(tmp_path):
    # min.insync.replicas 3: the shrink leaves the ISR under it, so the HW stays where it is; only the ISR
    # change can tell the parked DeleteRecords that follower 3's log start no longer counts.
    leader = await leader_of(tmp_path, min_insync_replicas=3)
    for _ in range(3):
        leader.round()
    hw = leader.partition.high_watermark
    assert move_log_start(leader.partition, hw) == (hw, ErrorCode.none)
    op = DelayedDeleteRecords(lambda key: leader.manager.get_partition(*key), 30_000, {}, {KEY: hw})
    assert not leader.manager.delete_records_purgatory.try_complete_else_watch(op, [KEY])
    leader.produce()  # follower 3 falls behind the LEO, so that the lag time can put it out of sync
    leader.fetch(FOLLOWERS[0], hw, log_start_offset=hw)
    leader.clock[0] += LAG_MS + 1
    leader.fetch(FOLLOWERS[0], hw + 1, log_start_offset=hw)
    assert leader.manager.maybe_shrink_isr() == 1
    (change,) = leader.isr_changes
    leader.manager.complete_isr_change(leader.partition, change, ErrorCode.none, leader_epoch=LEADER_EPOCH,
                                       isr=change.proposed_isr, partition_epoch=2)
    assert leader.partition.state.isr == (LEADER, FOLLOWERS[0]) and leader.partition.high_watermark == hw
    assert op.future.done() and op.future.result() == {KEY: (hw, ErrorCode.none)}
