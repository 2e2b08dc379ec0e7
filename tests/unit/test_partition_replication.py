"""Leader-side replication rules of broker.Partition with a fake clock: HW, ISR shrink/expand, acks=all,
divergence answers, AlterPartition outcomes (facts §2-4)."""

import uuid

import pytest
from kio.schema.errors import ErrorCode

from replog.broker.partition import LeadershipState, Partition, PartitionError
from replog.broker.replication_rules import IsrChangeKind
from replog.log.config import LogConfig
from replog.log.errors import OffsetOutOfRangeError
from replog.log.partition_log import PartitionLog
from replog.protocol.records import build_batch

LAG_MS = 10_000
LEADER = 1


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


class Harness:
    """A leader partition on broker 1 with replicas (1, 2, 3) and a recorder of proposed ISR changes."""

    def __init__(self, tmp_path, *, isr=(1, 2, 3), min_isr=2, replicas=(1, 2, 3)) -> None:
        self.clock = Clock()
        self.log = PartitionLog.open(tmp_path / "t-0", LogConfig(), clock_ms=self.clock, clean_shutdown=True)
        self.proposals = []
        self.partition = Partition("t", 0, uuid.uuid4(), self.log, LEADER, min_isr, clock_ms=self.clock,
                                   replica_lag_time_max_ms=LAG_MS,
                                   alter_isr=lambda partition, change: self.proposals.append(change))
        self.partition.make_leader(LeadershipState(LEADER, 5, 10, tuple(replicas), tuple(isr)))

    def append(self, count: int, acks: int = -1) -> int:
        batch = build_batch([(None, b"v", [], 1000 + i) for i in range(count)])
        return self.partition.append_as_leader(memoryview(bytearray(batch)), acks).last_offset

    def fetch(self, replica: int, offset: int) -> bool:
        return self.partition.update_follower_fetch_state(replica, offset, 0, self.log.log_end_offset)


@pytest.fixture
def h(tmp_path):
    return Harness(tmp_path)


def test_make_leader_starts_epoch_at_leo_in_epoch_cache(tmp_path):
    h = Harness(tmp_path)
    h.append(3)
    h.partition.make_leader(LeadershipState(LEADER, 6, 11, (1, 2, 3), (1, 2, 3)))
    assert h.log.epoch_cache.entries()[-1] == (6, 3)
    assert h.partition.leader_epoch_start_offset == 3


@pytest.mark.parametrize("follower_offsets, expected_hw", [
    ({2: 0, 3: 0}, 0),
    ({2: 4, 3: 0}, 0),
    ({2: 4, 3: 2}, 2),
    ({2: 10, 3: 10}, 10),
    ({2: 10, 3: 7}, 7),
])
def test_hw_is_min_leo_over_isr(h, follower_offsets, expected_hw):
    h.append(10)
    for replica, offset in follower_offsets.items():
        h.fetch(replica, offset)
    assert h.partition.high_watermark == expected_hw


def test_hw_waits_for_isr_members_that_have_not_fetched(h):
    h.append(10)
    h.fetch(2, 10)
    assert h.partition.high_watermark == 0  # follower 3's LEO is unknown since the epoch began


def test_hw_never_decreases(h):
    h.append(10)
    h.fetch(2, 10)
    h.fetch(3, 10)
    assert h.partition.high_watermark == 10
    h.fetch(3, 4)  # a lagging report cannot pull the HW back
    assert h.partition.high_watermark == 10


def test_hw_frozen_under_min_isr(tmp_path):
    h = Harness(tmp_path, isr=(1,), min_isr=2)
    h.append(5, acks=1)
    assert h.partition.high_watermark == 0
    with pytest.raises(PartitionError) as e:
        h.append(1)
    assert e.value.error_code == ErrorCode.not_enough_replicas


def test_hw_counts_caught_up_follower_outside_isr(tmp_path):
    h = Harness(tmp_path, isr=(1, 2), min_isr=1)
    h.append(10)
    h.fetch(2, 10)
    assert h.partition.high_watermark == 10
    h.append(10)
    h.fetch(3, 15)  # not in ISR yet, but caught up within the lag (it fetched everything up to 10 just now)
    h.fetch(2, 20)
    assert h.partition.high_watermark == 15


def test_acks_all_waits_for_whole_isr_not_just_min_isr(h):
    last = h.append(4)
    h.fetch(2, 4)
    assert h.partition.check_enough_replicas_reach_offset(last + 1) == (False, ErrorCode.none)
    h.fetch(3, 4)
    assert h.partition.check_enough_replicas_reach_offset(last + 1) == (True, ErrorCode.none)


def test_acks_all_not_enough_replicas_after_append_when_isr_shrank(tmp_path):
    h = Harness(tmp_path, isr=(1, 2), min_isr=2)
    last = h.append(2)
    h.fetch(2, 2)
    assert h.partition.high_watermark == 2
    h.partition.state = LeadershipState(LEADER, 5, 11, (1, 2, 3), (1,))
    assert h.partition.check_enough_replicas_reach_offset(last + 1) == (
        True, ErrorCode.not_enough_replicas_after_append)


def test_acks_all_on_lost_leadership(h):
    last = h.append(1)
    h.partition.make_follower(LeadershipState(2, 6, 11, (1, 2, 3), (2, 3)))
    assert h.partition.check_enough_replicas_reach_offset(last + 1) == (True, ErrorCode.not_leader_or_follower)


def test_fetch_from_non_replica_is_refused(h):
    with pytest.raises(PartitionError) as e:
        h.fetch(9, 0)
    assert e.value.error_code == ErrorCode.not_leader_or_follower


# --- last caught-up time (Replica.scala rule) -------------------------------------------------------------

def test_caught_up_time_moves_to_fetch_time_when_fetching_at_leader_leo(h):
    h.append(3)
    h.clock.now += 500
    h.fetch(2, 3)
    assert h.partition.followers[2].last_caught_up_time_ms == h.clock.now


def test_caught_up_time_moves_to_previous_fetch_when_reaching_previous_leo(h):
    h.append(3)
    first_fetch = h.clock.now = h.clock.now + 100
    h.fetch(2, 0)  # behind: the leader had 3 then
    h.append(3)
    h.clock.now += 100
    h.fetch(2, 3)  # has what the leader had at the previous fetch, not what it has now
    assert h.partition.followers[2].last_caught_up_time_ms == first_fetch


def test_caught_up_time_unchanged_when_still_behind(h):
    h.append(10)
    h.fetch(2, 0)
    before = h.partition.followers[2].last_caught_up_time_ms
    h.clock.now += 100
    h.fetch(2, 5)  # below the previous fetch's leader LEO (10)
    assert h.partition.followers[2].last_caught_up_time_ms == before


# --- ISR shrink and expand ---------------------------------------------------------------------------------

def test_shrink_drops_follower_not_caught_up_within_lag(h):
    h.append(5)
    h.fetch(2, 5)
    h.clock.now += LAG_MS + 1
    h.fetch(2, 5)  # keeps up; 3 never fetched since the epoch began at t0
    assert h.partition.maybe_shrink_isr()
    change = h.proposals[-1]
    assert change.kind is IsrChangeKind.SHRINK
    assert change.proposed_isr == (1, 2)
    assert change.maximal_isr == (1, 2, 3)  # shrink is not optimistic
    assert (change.leader_epoch, change.partition_epoch) == (5, 10)


def test_no_shrink_within_lag_or_when_fully_caught_up(h):
    h.append(5)
    h.fetch(2, 5)
    h.fetch(3, 5)
    h.clock.now += 10 * LAG_MS
    assert not h.partition.maybe_shrink_isr()  # both at the leader's LEO: caught up regardless of time


def test_only_one_isr_change_in_flight(h):
    h.append(5)
    h.clock.now += LAG_MS + 1
    assert h.partition.maybe_shrink_isr()
    assert not h.partition.maybe_shrink_isr()
    assert len(h.proposals) == 1


def test_committed_shrink_lets_hw_advance(h):
    last = h.append(5)
    h.fetch(2, 5)
    h.clock.now += LAG_MS + 1
    h.fetch(2, 5)
    h.partition.maybe_shrink_isr()
    assert h.partition.high_watermark == 0  # still waiting for 3 while the shrink is pending
    moved = h.partition.complete_isr_change(h.proposals[-1], ErrorCode.none, leader_epoch=5, isr=(1, 2),
                                            partition_epoch=11)
    assert moved and h.partition.high_watermark == 5
    assert h.partition.state.isr == (1, 2) and h.partition.state.partition_epoch == 11
    assert h.partition.check_enough_replicas_reach_offset(last + 1) == (True, ErrorCode.none)


def test_expand_when_follower_reaches_hw_and_epoch_start(tmp_path):
    h = Harness(tmp_path, isr=(1, 2), min_isr=1)
    h.append(5)
    h.fetch(2, 5)
    assert h.partition.high_watermark == 5
    h.fetch(3, 4)
    assert not h.proposals
    h.fetch(3, 5)
    change = h.proposals[-1]
    assert change.kind is IsrChangeKind.EXPAND and change.proposed_isr == (1, 2, 3)
    assert h.partition.maximal_isr == (1, 2, 3)  # optimistic: acks=all now waits for 3 as well


def test_expand_requires_epoch_start_offset(tmp_path):
    h = Harness(tmp_path, isr=(1,), min_isr=1)
    h.append(5)  # HW 5 at once (ISR is the leader alone)
    h.partition.make_leader(LeadershipState(LEADER, 6, 11, (1, 2, 3), (1,)))
    assert h.partition.leader_epoch_start_offset == 5
    h.partition.log.update_high_watermark(3)  # as if HW lagged; epoch start is the binding bound
    h.fetch(2, 4)
    assert not h.proposals
    h.fetch(2, 5)
    assert h.proposals[-1].proposed_isr == (1, 2)


@pytest.mark.parametrize("error, stays_pending", [
    (ErrorCode.ineligible_replica, False),
    (ErrorCode.operation_not_attempted, False),
    (ErrorCode.request_timed_out, False),
    (ErrorCode.invalid_update_version, True),
    (ErrorCode.fenced_leader_epoch, True),
])
def test_alter_partition_errors(tmp_path, error, stays_pending):
    h = Harness(tmp_path, isr=(1, 2), min_isr=1)
    h.append(5)
    h.fetch(2, 5)
    h.fetch(3, 5)
    change = h.proposals[-1]
    h.partition.complete_isr_change(change, error)
    assert (h.partition.pending_isr is change) == stays_pending
    assert h.partition.state.isr == (1, 2)


def test_alter_partition_success_with_stale_epoch_is_ignored(tmp_path):
    h = Harness(tmp_path, isr=(1, 2), min_isr=1)
    h.append(5)
    h.fetch(2, 5)
    h.fetch(3, 5)
    change = h.proposals[-1]
    h.partition.complete_isr_change(change, ErrorCode.none, leader_epoch=4, isr=(1, 2, 3), partition_epoch=11)
    assert h.partition.state.isr == (1, 2)


def test_answer_for_replaced_change_is_ignored(tmp_path):
    h = Harness(tmp_path, isr=(1, 2), min_isr=1)
    h.append(5)
    h.fetch(2, 5)
    h.fetch(3, 5)
    change = h.proposals[-1]
    h.partition.make_leader(LeadershipState(LEADER, 5, 12, (1, 2, 3), (1, 2, 3)))  # controller got there first
    assert not h.partition.complete_isr_change(change, ErrorCode.none, leader_epoch=5, isr=(1, 2, 3),
                                               partition_epoch=11)
    assert h.partition.state.partition_epoch == 12


def test_new_epoch_resets_follower_states(h):
    h.append(5)
    h.fetch(2, 5)
    h.clock.now += 123
    h.partition.make_leader(LeadershipState(LEADER, 6, 11, (1, 2, 3), (1, 2)))
    assert h.partition.followers[2].log_end_offset == -1
    assert h.partition.followers[2].last_caught_up_time_ms == h.clock.now
    assert h.partition.followers[3].last_caught_up_time_ms == 0


# --- divergence (leader side of KIP-595 truncation on fetch) ------------------------------------------------

@pytest.mark.parametrize("fetch_offset, last_fetched_epoch, expected", [
    (3, -1, None),  # no epoch: no check
    (3, 5, None),  # follower in the old epoch, at its end: fine
    (4, 5, (5, 3)),  # follower has more of epoch 5 than we do
    (4, 6, None),
    (5, 6, None),
    (3, 4, (4, 0)),  # epoch 4 unknown here; we have nothing before epoch 5 which starts at 0
])
def test_diverging_epoch(h, fetch_offset, last_fetched_epoch, expected):
    h.append(3)
    h.partition.make_leader(LeadershipState(LEADER, 6, 11, (1, 2, 3), (1, 2, 3)))
    h.append(2)
    assert h.partition.diverging_epoch(fetch_offset, last_fetched_epoch) == expected


def test_diverging_epoch_newer_than_ours_is_out_of_range(h):
    h.append(3)
    with pytest.raises(OffsetOutOfRangeError):
        h.partition.diverging_epoch(3, 9)
