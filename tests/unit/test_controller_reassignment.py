"""Table tests of the reassignment rules (replog.controller.reassignment, KIP-455): start, completion on an ISR
change, cancel, and the bad targets."""

import dataclasses
import uuid
from types import SimpleNamespace

import pytest
from kio.schema.errors import ErrorCode

from replog.controller import reassignment as r
from replog.controller import records
from replog.controller.admin import decide_new_partitions
from replog.controller.cluster import BrokerRegistration, ClusterMetadata
from replog.controller.registry import NO_LEADER, PartitionRegistration

TOPIC_ID = uuid.UUID(int=7)
REGISTERED = {1, 2, 3, 4, 5, 6}


def _p(replicas, isr, leader, *, adding=(), removing=(), leader_epoch=3, partition_epoch=9):
    return PartitionRegistration("t", TOPIC_ID, 0, tuple(replicas), tuple(isr), leader, leader_epoch,
                                 partition_epoch, adding_replicas=tuple(adding), removing_replicas=tuple(removing))


def _shape(p: PartitionRegistration):
    return (p.replicas, p.adding_replicas, p.removing_replicas, p.isr, p.leader, p.leader_epoch, p.partition_epoch)


# -------------------------------------------------------------------------------------------------- start


@pytest.mark.parametrize(
    ("current", "target", "live", "expected", "removed"),
    [
        # A move: target first, then the replicas leaving; ISR and leader as they were; only the partition
        # epoch moves (nothing left the replica set yet).
        (_p([1, 2, 3], [1, 2, 3], 1), [4, 5, 6], REGISTERED,
         ((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3), (1, 2, 3), 1, 3, 10), ()),
        # Growing the replication factor: only adding.
        (_p([1, 2], [1, 2], 1), [1, 2, 3], REGISTERED, ((1, 2, 3), (3,), (), (1, 2), 1, 3, 10), ()),
        # Shrinking needs no catch-up: it completes at once; the leader stays, the replica set shrinks, so
        # the leader epoch moves (the removed follower is fenced).
        (_p([1, 2, 3], [1, 2, 3], 1), [1, 2], REGISTERED, ((1, 2), (), (), (1, 2), 1, 4, 10), (3,)),
        # Shrinking away from the leader: the first target replica in the ISR leads.
        (_p([1, 2, 3], [1, 2, 3], 1), [3, 2], REGISTERED, ((3, 2), (), (), (2, 3), 3, 4, 10), (1,)),
        # ... but only a live one.
        (_p([1, 2, 3], [1, 2, 3], 1), [3, 2], {1, 2}, ((3, 2), (), (), (2, 3), 2, 4, 10), (1,)),
        # The same replicas in a new order: the preferred leader changes, nothing else.
        (_p([1, 2, 3], [1, 2, 3], 1), [2, 1, 3], REGISTERED, ((2, 1, 3), (), (), (1, 2, 3), 1, 3, 10), ()),
        # The same assignment: no change at all.
        (_p([1, 2, 3], [1, 2, 3], 1), [1, 2, 3], REGISTERED, ((1, 2, 3), (), (), (1, 2, 3), 1, 3, 9), ()),
        # A new target during a move is reckoned from the original replicas {1,2,3}: 4 (adding, not yet
        # in sync) leaves at once and is deleted; 5 is now the one adding.
        (_p([4, 5, 1, 2, 3], [1, 2, 3], 1, adding=[4, 5], removing=[1, 2, 3]), [5, 2, 3], REGISTERED,
         ((5, 2, 3, 1), (5,), (1,), (1, 2, 3), 1, 4, 10), (4,)),
        # Back to the original replicas: the reassignment ends and the adding replica is deleted.
        (_p([4, 1, 2], [1, 2], 1, adding=[4], removing=[]), [1, 2], REGISTERED,
         ((1, 2), (), (), (1, 2), 1, 4, 10), (4,)),
    ],
)
def test_start(current, target, live, expected, removed):
    step = r.start(current, target, is_registered=REGISTERED.__contains__, live=live)
    assert _shape(step.registration) == expected
    assert step.removed == removed


@pytest.mark.parametrize(
    ("target", "fragment"),
    [
        ([], "empty replica list"),
        ([1, 1, 2], "duplicate"),
        ([1, -2], "duplicate or negative"),
        ([1, 2, 9], "broker 9, but no such broker is registered"),
        (list(range(100)), "more than"),
    ],
)
def test_start_refuses_bad_targets(target, fragment):
    with pytest.raises(r.ReassignmentRefused) as refused:
        r.start(_p([1, 2, 3], [1, 2, 3], 1), target, is_registered=REGISTERED.__contains__, live=REGISTERED)
    assert refused.value.error_code == ErrorCode.invalid_replica_assignment
    assert fragment in str(refused.value)


@pytest.mark.parametrize(
    ("current", "target", "allowed"),
    [
        (_p([1, 2, 3], [1, 2, 3], 1), [4, 5, 6], True),  # a move keeps the replication factor
        (_p([1, 2, 3], [1, 2, 3], 1), [2, 1, 3], True),  # so does a new order
        (_p([1, 2, 3], [1, 2, 3], 1), [1, 2], False),
        (_p([1, 2], [1, 2], 1), [1, 2, 3], False),
        # During a move the partition is headed for its target (4, 5): that is the factor to keep, not the
        # four replicas it has meanwhile.
        (_p([4, 5, 1, 2], [1, 2], 1, adding=[4, 5], removing=[1, 2]), [5, 6], True),
        (_p([4, 5, 1, 2], [1, 2], 1, adding=[4, 5], removing=[1, 2]), [4, 5, 6, 1], False),
        # Growing during a move that grows: headed for three.
        (_p([1, 2, 3], [1, 2], 1, adding=[3]), [1, 2, 4], True),
    ],
)
def test_start_without_replication_factor_change(current, target, allowed):
    """KIP-860: with allowReplicationFactorChange false, a target must be as long as the replica set the
    partition is headed for; with it true (the default, and all v0 allows) any valid target goes."""
    def start(allow):
        return r.start(current, target, is_registered=REGISTERED.__contains__, live=REGISTERED,
                       allow_replication_factor_change=allow)

    assert start(True).registration.replicas[:len(target)] == tuple(target)
    if allowed:
        assert start(False).registration == start(True).registration
    else:
        with pytest.raises(r.ReassignmentRefused) as refused:
            start(False)
        assert refused.value.error_code == ErrorCode.invalid_replication_factor
        assert f"to {len(target)}" in str(refused.value)


# --------------------------------------------------------------------------------------------- completion


MOVING = _p([4, 5, 1, 2], [1, 2], 1, adding=[4, 5], removing=[1, 2])


@pytest.mark.parametrize(
    ("isr", "live", "expected"),
    [
        # Adding replicas not all in sync: wait.
        ((1, 2), REGISTERED, None),
        ((1, 2, 4), REGISTERED, None),
        # All in: the target is the replica set, the leader (leaving) hands over to the preferred target.
        ((1, 2, 4, 5), REGISTERED, ((4, 5), (), (), (4, 5), 4, 4, 11)),
        # The preferred target cannot lead (not live): the next one does.
        ((1, 2, 4, 5), {1, 2, 5}, ((4, 5), (), (), (4, 5), 5, 4, 11)),
        # No target replica can lead: wait rather than go leaderless.
        ((1, 2, 4, 5), {1, 2}, None),
    ],
)
def test_maybe_complete(isr, live, expected):
    changed = dataclasses.replace(MOVING, isr=isr, partition_epoch=10)
    completed = r.maybe_complete(changed, live)
    assert (None if completed is None else _shape(completed.registration)) == expected
    if completed is not None:
        assert completed.removed == (1, 2)


def test_complete_keeps_a_leader_that_stays():
    growing = _p([1, 2, 3], [1, 2, 3], 1, adding=[3], removing=[], partition_epoch=10)
    completed = r.maybe_complete(growing, REGISTERED)
    assert _shape(completed.registration) == ((1, 2, 3), (), (), (1, 2, 3), 1, 3, 11)
    assert completed.removed == ()


def test_nothing_completes_without_a_reassignment():
    assert r.maybe_complete(_p([1, 2], [1, 2], 1), REGISTERED) is None


# ------------------------------------------------------------------------------------------------- cancel


@pytest.mark.parametrize(
    ("current", "live", "expected", "removed"),
    [
        # The adding replicas leave replicas and ISR; the original replicas stay, the leader too.
        (_p([4, 5, 1, 2], [1, 2, 4], 1, adding=[4, 5], removing=[1, 2]), REGISTERED,
         ((1, 2), (), (), (1, 2), 1, 4, 10), (4, 5)),
        # A leader that was an adding replica gives way to the first original replica in sync.
        (_p([4, 1, 2], [4, 2], 4, adding=[4], removing=[1]), REGISTERED, ((1, 2), (), (), (2,), 2, 4, 10), (4,)),
        # ... and without a live one, the partition is leaderless until one comes back.
        (_p([4, 1, 2], [4, 2], 4, adding=[4], removing=[1]), {4}, ((1, 2), (), (), (2,), NO_LEADER, 4, 10), (4,)),
    ],
)
def test_cancel(current, live, expected, removed):
    step = r.cancel(current, live)
    assert _shape(step.registration) == expected
    assert step.removed == removed


def test_cancel_without_a_reassignment_is_refused():
    with pytest.raises(r.ReassignmentRefused) as refused:
        r.cancel(_p([1, 2], [1, 2], 1), REGISTERED)
    assert refused.value.error_code == ErrorCode.no_reassignment_in_progress


def test_cancel_refused_when_no_original_replica_is_in_sync():
    with pytest.raises(r.ReassignmentRefused) as refused:
        r.cancel(_p([4, 1], [4], 4, adding=[4], removing=[1]), REGISTERED)
    assert refused.value.error_code == ErrorCode.invalid_replica_assignment


# ------------------------------------------------------------------------ the metadata log and the controller


def _cluster_with_moving_partition() -> ClusterMetadata:
    metadata = ClusterMetadata()
    for b in (1, 2, 3, 4):
        metadata.add_broker(BrokerRegistration(b, "127.0.0.1", 9000 + b))
    metadata.create_topic("t", {0: [1, 2]}, {})
    step = r.start(metadata.registration("t", 0), [3, 4], is_registered=metadata.brokers.__contains__,
                   live={1, 2, 3, 4})
    metadata.apply([step.registration])
    return metadata


def test_a_reassignment_in_progress_survives_replay_of_the_metadata_log():
    metadata = _cluster_with_moving_partition()
    rebuilt = ClusterMetadata()
    records.replay(records.snapshot_records(1, metadata), rebuilt)
    moving = rebuilt.registration("t", 0)
    assert (moving.replicas, moving.adding_replicas, moving.removing_replicas) == ((3, 4, 1, 2), (3, 4), (1, 2))


def test_a_record_from_before_reassignments_replays_as_not_moving():
    record = records.partition_record(_cluster_with_moving_partition().registration("t", 0))
    del record["adding_replicas"], record["removing_replicas"]
    record["replicas"] = [1, 2]
    metadata = ClusterMetadata()
    records.replay([{"type": "topic", "name": "t", "topic_id": record["topic_id"], "configs": {}}, record], metadata)
    assert not metadata.registration("t", 0).is_reassigning


def test_new_partitions_take_the_target_replication_factor_of_a_moving_partition():
    metadata = _cluster_with_moving_partition()  # [3, 4, 1, 2] while moving from [1, 2] to [3, 4]
    added = decide_new_partitions(metadata, "t", 2, None)
    assert [len(p.replicas) for p in added] == [2]


def test_the_isr_change_that_brings_the_last_adding_replica_in_completes_the_move():
    metadata = _cluster_with_moving_partition()
    for b in (1, 2, 3, 4):
        metadata.brokers[b] = dataclasses.replace(metadata.brokers[b], epoch=5)
    current = metadata.registration("t", 0)

    def alter(isr):
        p = metadata.registration("t", 0)
        request = SimpleNamespace(broker_id=1, broker_epoch=5, topics=[SimpleNamespace(
            topic_id=current.topic_id, partitions=[SimpleNamespace(
                partition_index=0, leader_epoch=p.leader_epoch, new_isr=isr, leader_recovery_state=0,
                partition_epoch=p.partition_epoch)])])
        decision = metadata.decide_alter_partition(request, 2)
        metadata.apply(decision.changes)
        return decision.changes[0]

    assert alter([1, 2, 3]).is_reassigning  # 4 still catching up
    done = alter([1, 2, 3, 4])
    assert (done.replicas, done.isr, done.leader, done.is_reassigning) == ((3, 4), (3, 4), 3, False)
    assert done.leader_epoch == current.leader_epoch + 1  # the old leader is fenced
