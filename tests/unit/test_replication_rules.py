"""Table tests of the leader's pure replication rules (replog.broker.replication_rules) and FollowerState."""

import pytest
from kio.schema.errors import ErrorCode

from replog.broker import replication_rules as r
from replog.broker.follower_state import FollowerState
from replog.broker.replication_rules import IsrChangeKind

LEADER = 1
LAG_MS = 10_000
NOW = 1_000_000
RECENTLY = NOW - LAG_MS  # caught up exactly at the lag's edge: still in time
LONG_AGO = NOW - LAG_MS - 1


def _follower(broker_id: int, leo: int, caught_up_ms: int = NOW) -> FollowerState:
    return FollowerState(broker_id, log_end_offset=leo, log_start_offset=0, last_fetch_time_ms=caught_up_ms,
                         last_caught_up_time_ms=caught_up_ms)


# ---------------------------------------------------------------- follower state


@pytest.mark.parametrize(
    ("fetch_offset", "leader_leo_now", "expected_caught_up_ms"),
    [
        pytest.param(30, 30, 2_000, id="asking for all the leader has makes it caught up now"),
        pytest.param(31, 30, 2_000, id="asking past the leader's end counts the same"),
        pytest.param(20, 30, 1_000, id="reaching the leader's end at the previous fetch dates from that fetch"),
        pytest.param(25, 30, 1_000, id="passing the leader's end at the previous fetch dates from that fetch"),
        pytest.param(19, 30, 500, id="still short of the leader's end at the previous fetch changes nothing"),
    ],
)
def test_after_fetch_moves_the_caught_up_time(fetch_offset, leader_leo_now, expected_caught_up_ms):
    # The previous fetch was at 1,000 ms, when the leader's LEO was 20; caught up last at 500 ms.
    before = FollowerState(2, log_end_offset=10, log_start_offset=0, last_fetch_time_ms=1_000,
                           last_fetch_leader_log_end_offset=20, last_caught_up_time_ms=500)
    after = before.after_fetch(fetch_offset, 3, 2_000, leader_leo_now, None)
    assert after.last_caught_up_time_ms == expected_caught_up_ms
    assert (after.log_end_offset, after.log_start_offset) == (fetch_offset, 3)
    assert (after.last_fetch_time_ms, after.last_fetch_leader_log_end_offset) == (2_000, leader_leo_now)
    assert before.log_end_offset == 10  # a value: the old state is untouched


def test_after_fetch_never_moves_the_caught_up_time_back():
    before = FollowerState(2, log_end_offset=30, last_fetch_time_ms=900, last_fetch_leader_log_end_offset=30,
                           last_caught_up_time_ms=1_500)
    assert before.after_fetch(30, 0, 1_200, 30, None).last_caught_up_time_ms == 1_500


@pytest.mark.parametrize(
    ("in_isr", "expected_caught_up_ms"),
    [
        pytest.param(True, NOW, id="an ISR member counts as caught up when the epoch starts"),
        pytest.param(False, 0, id="a replica outside the ISR counts as never caught up"),
    ],
)
def test_initial_follower_state(in_isr, expected_caught_up_ms):
    state = FollowerState.initial(2, now_ms=NOW, in_isr=in_isr)
    assert state.last_caught_up_time_ms == expected_caught_up_ms
    assert (state.log_end_offset, state.log_start_offset, state.fetch_position) == (-1, -1, None)


@pytest.mark.parametrize(
    ("leo", "caught_up_ms", "expected"),
    [
        pytest.param(30, 0, True, id="at the leader's end it is caught up however long ago it last was"),
        pytest.param(29, RECENTLY, True, id="behind but caught up within the lag"),
        pytest.param(29, LONG_AGO, False, id="behind and last caught up before the lag"),
        pytest.param(31, LONG_AGO, False, id="past the leader's end is not at it"),
    ],
)
def test_is_caught_up(leo, caught_up_ms, expected):
    assert _follower(2, leo, caught_up_ms).is_caught_up(30, NOW, LAG_MS) is expected


# ------------------------------------------------------------ epochs and state


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        pytest.param(-1, ErrorCode.none, id="no epoch skips the check"),
        pytest.param(5, ErrorCode.none, id="the current epoch passes"),
        pytest.param(4, ErrorCode.fenced_leader_epoch, id="an older epoch is fenced"),
        pytest.param(6, ErrorCode.unknown_leader_epoch, id="a newer epoch is unknown to us yet"),
    ],
)
def test_leader_epoch_error(requested, expected):
    assert r.leader_epoch_error(requested, 5) == expected


@pytest.mark.parametrize(
    ("leader_epoch", "partition_epoch", "expected"),
    [
        pytest.param(5, 10, True, id="the state we have is stale"),
        pytest.param(5, 9, True, id="an older partition epoch in our leader epoch is stale"),
        pytest.param(4, 11, True, id="an older leader epoch is stale whatever its partition epoch"),
        pytest.param(5, 11, False, id="a newer partition epoch in our leader epoch applies"),
        pytest.param(6, 3, False, id="a newer leader epoch applies whatever its partition epoch"),
    ],
)
def test_is_stale_partition_state(leader_epoch, partition_epoch, expected):
    stale = r.is_stale_partition_state(current_leader_epoch=5, current_partition_epoch=10,
                                       leader_epoch=leader_epoch, partition_epoch=partition_epoch)
    assert stale is expected


@pytest.mark.parametrize(
    ("isr_size", "min_isr", "replicas", "expected"),
    [
        pytest.param(2, 2, 3, False, id="an ISR of min.insync.replicas is enough"),
        pytest.param(1, 2, 3, True, id="an ISR below min.insync.replicas is not"),
        pytest.param(1, 2, 1, False, id="min.insync.replicas never exceeds the replica count"),
        pytest.param(1, 1, 0, False, id="a partition without replicas still needs one"),
        pytest.param(0, 1, 0, True, id="an empty ISR is under any minimum"),
    ],
)
def test_is_under_min_isr(isr_size, min_isr, replicas, expected):
    assert r.is_under_min_isr(isr_size, min_insync_replicas=min_isr, replica_count=replicas) is expected


# --------------------------------------------------------------- high watermark


@pytest.mark.parametrize(
    ("followers", "maximal_isr", "expected"),
    [
        pytest.param([], (1,), 30, id="a leader alone has its LEO as HW"),
        pytest.param([_follower(2, 30), _follower(3, 30)], (1, 2, 3), 30, id="a fully caught-up ISR"),
        pytest.param([_follower(2, 25, LONG_AGO), _follower(3, 20, LONG_AGO)], (1, 2, 3), 20,
                     id="the smallest LEO in the ISR however far behind"),
        pytest.param([_follower(2, 30), _follower(3, -1)], (1, 2, 3), None,
                     id="an ISR member that has not fetched this epoch holds the HW unknown"),
        pytest.param([_follower(2, 30), _follower(3, 12, RECENTLY)], (1, 2), 12,
                     id="a caught-up follower outside the ISR counts, it is about to join"),
        pytest.param([_follower(2, 30), _follower(3, 12, LONG_AGO)], (1, 2), 30,
                     id="a lagging follower outside the ISR does not count"),
        pytest.param([_follower(2, 30), _follower(3, 12, LONG_AGO)], (1, 2, 3), 12,
                     id="the maximal ISR counts a member whose removal is pending"),
        pytest.param([_follower(2, 35)], (1, 2), 30, id="a follower past our end cannot lift the HW past it"),
    ],
)
def test_leader_high_watermark(followers, maximal_isr, expected):
    hw = r.leader_high_watermark(followers, maximal_isr=maximal_isr, leader_log_end_offset=30, now_ms=NOW,
                                 replica_lag_time_max_ms=LAG_MS)
    assert hw == expected


# ------------------------------------------------------------------------- ISR


@pytest.mark.parametrize(
    ("leo", "hw", "epoch_start", "expected"),
    [
        pytest.param(20, 20, 15, True, id="at the HW and past the epoch start it may join"),
        pytest.param(19, 20, 15, False, id="below the HW it lacks acknowledged records"),
        pytest.param(12, 10, 15, False, id="below this epoch's start it may still diverge"),
        pytest.param(15, 10, 15, True, id="at this epoch's start it may join"),
        pytest.param(-1, 0, 0, False, id="not fetched this epoch"),
    ],
)
def test_may_join_isr(leo, hw, epoch_start, expected):
    joins = r.may_join_isr(_follower(3, leo), high_watermark=hw, leader_epoch_start_offset=epoch_start)
    assert joins is expected


@pytest.mark.parametrize(
    ("follower", "isr", "expected"),
    [
        pytest.param(_follower(3, 20), (1, 2), r.IsrChange(IsrChangeKind.EXPAND, (1, 2, 3), (1, 2, 3)),
                     id="a follower that may join is proposed and counted at once"),
        pytest.param(_follower(3, 19), (1, 2), None, id="a follower behind the HW is not proposed"),
        pytest.param(_follower(2, 20), (1, 2), None, id="a member is not proposed again"),
    ],
)
def test_isr_expansion(follower, isr, expected):
    assert r.isr_expansion(follower, isr, high_watermark=20, leader_epoch_start_offset=0) == expected


_FOLLOWERS = {2: _follower(2, 30, LONG_AGO), 3: _follower(3, 25, RECENTLY), 4: _follower(4, 10, LONG_AGO)}


@pytest.mark.parametrize(
    ("isr", "expected"),
    [
        pytest.param((1, 2, 3), frozenset(), id="at the leader's end or caught up within the lag is in sync"),
        pytest.param((1, 2, 3, 4), frozenset({4}), id="a member not caught up within the lag is out of sync"),
        pytest.param((1, 5), frozenset({5}), id="a member unknown to the leader is out of sync"),
        pytest.param((1,), frozenset(), id="the leader is never out of sync"),
    ],
)
def test_out_of_sync_replicas(isr, expected):
    out = r.out_of_sync_replicas(isr, _FOLLOWERS, leader_id=LEADER, leader_log_end_offset=30, now_ms=NOW,
                                 replica_lag_time_max_ms=LAG_MS)
    assert out == expected


@pytest.mark.parametrize(
    ("isr", "expected"),
    [
        pytest.param((1, 2, 3), None, id="nothing to shrink"),
        pytest.param((4, 1, 2), r.IsrChange(IsrChangeKind.SHRINK, (1, 2), (4, 1, 2)),
                     id="a shrink keeps the order and counts the leaving member until committed"),
        pytest.param((1, 4, 5), r.IsrChange(IsrChangeKind.SHRINK, (1,), (1, 4, 5)),
                     id="every member out of sync leaves in one change"),
    ],
)
def test_isr_shrink(isr, expected):
    change = r.isr_shrink(isr, _FOLLOWERS, leader_id=LEADER, leader_log_end_offset=30, now_ms=NOW,
                          replica_lag_time_max_ms=LAG_MS)
    assert change == expected


@pytest.mark.parametrize(
    ("error", "answer", "expected"),
    [
        pytest.param(ErrorCode.none, (5, (1, 2), 11), r.CommitIsr((1, 2), 11), id="a success commits its ISR"),
        pytest.param(ErrorCode.none, (5, (1, 2, 3), 10), r.CommitIsr((1, 2, 3), 10),
                     id="a success at our partition epoch commits"),
        pytest.param(ErrorCode.none, (4, (1, 2), 11), r.IgnoreAnswer(), id="a success for another leader epoch"),
        pytest.param(ErrorCode.none, (5, (1, 2), 9), r.IgnoreAnswer(),
                     id="a success older than our partition epoch"),
        pytest.param(ErrorCode.ineligible_replica, None, r.RevertIsrChange(),
                     id="an ineligible replica reverts to the committed ISR"),
        pytest.param(ErrorCode.operation_not_attempted, None, r.RevertIsrChange(), id="not attempted reverts"),
        pytest.param(ErrorCode.request_timed_out, None, r.RevertIsrChange(), id="a timeout reverts"),
        pytest.param(ErrorCode.invalid_update_version, None, r.AwaitNewPartitionState(),
                     id="a stale partition epoch waits for the controller's new state"),
        pytest.param(ErrorCode.fenced_leader_epoch, None, r.AwaitNewPartitionState(),
                     id="a fenced leader epoch waits for the controller's new state"),
        pytest.param(ErrorCode.unknown_topic_id, None, r.AwaitNewPartitionState(),
                     id="an unknown topic waits for the controller's new state"),
    ],
)
def test_on_alter_partition_answer(error, answer, expected):
    leader_epoch, isr, partition_epoch = answer or (-1, (), -1)
    outcome = r.on_alter_partition_answer(error, current_leader_epoch=5, current_partition_epoch=10,
                                          leader_epoch=leader_epoch, isr=isr, partition_epoch=partition_epoch)
    assert outcome == expected


# ---------------------------------------------------------------------- produce


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        pytest.param({}, (True, ErrorCode.none), id="the HW passed the batch with enough replicas"),
        pytest.param({"high_watermark": 9}, (False, ErrorCode.none), id="the HW has not passed the batch yet"),
        pytest.param({"maximal_isr_size": 1}, (True, ErrorCode.not_enough_replicas_after_append),
                     id="the HW passed it but the ISR shrank below the minimum meanwhile"),
        pytest.param({"is_leader": False}, (True, ErrorCode.not_leader_or_follower),
                     id="leadership lost while waiting"),
        pytest.param({"storage_failed": True, "is_leader": False}, (True, ErrorCode.kafka_storage_error),
                     id="the log dir failed while waiting"),
    ],
)
def test_produce_completion(state, expected):
    facts = {"storage_failed": False, "is_leader": True, "high_watermark": 10, "maximal_isr_size": 3,
             "effective_min_isr": 2} | state
    assert r.produce_completion(10, **facts) == expected


# ---------------------------------------------------------------- follower fetch


@pytest.mark.parametrize(
    ("fetch_offset", "last_fetched_epoch", "epoch_end", "expected"),
    [
        pytest.param(3, 5, (5, 3), None, id="at the end of an epoch we share"),
        pytest.param(3, 5, (5, 8), None, id="inside an epoch we share"),
        pytest.param(4, 5, (5, 3), r.DivergingEpoch(5, 3), id="more of the epoch than we have"),
        pytest.param(3, 4, (3, 0), r.DivergingEpoch(3, 0), id="an epoch we never had"),
        pytest.param(3, 9, (-1, -1), r.FetchOffsetOutOfRange("last fetched epoch 9 is unknown to the leader"),
                     id="an epoch newer than any we have is out of range"),
        pytest.param(1, 5, (5, 8), r.FetchOffsetOutOfRange("fetch offset 1 < log start 2"),
                     id="an offset before our log start is out of range"),
    ],
)
def test_fetch_divergence(fetch_offset, last_fetched_epoch, epoch_end, expected):
    divergence = r.fetch_divergence(fetch_offset=fetch_offset, last_fetched_epoch=last_fetched_epoch,
                                    epoch_end=epoch_end, log_start_offset=2)
    assert divergence == expected
