"""Kafka's rack-unaware replica assignment: its documented example, and the balance it is for."""

import random
from collections import Counter

import pytest
from kio.schema.errors import ErrorCode

from replog.controller.assignment import assign_replicas, rack_alternated
from replog.controller.cluster import MAX_PARTITIONS_PER_TOPIC, ControllerError

# The example in AdminUtils' comment: 5 brokers, 10 partitions, replication factor 3, start index and
# shift 0. From p5 on (the second round) the followers are shifted by one more broker.
KAFKA_EXAMPLE = {
    0: (0, 1, 2), 1: (1, 2, 3), 2: (2, 3, 4), 3: (3, 4, 0), 4: (4, 0, 1),
    5: (0, 2, 3), 6: (1, 3, 4), 7: (2, 4, 0), 8: (3, 0, 1), 9: (4, 1, 2),
}

SHAPES = [(brokers, rf, partitions) for brokers in range(1, 8) for rf in range(1, brokers + 1)
          for partitions in (1, 2, brokers - 1, brokers, brokers + 1, 3 * brokers, 3 * brokers + 2)
          if partitions > 0]


def test_kafka_documented_example() -> None:
    assert assign_replicas(range(5), 10, 3, start_index=0, replica_shift=0) == KAFKA_EXAMPLE


def test_start_partition_id_continues_the_example() -> None:
    added = assign_replicas([0, 1, 2, 3, 4], 5, 3, start_index=0, replica_shift=0, start_partition_id=5)
    assert added == {p: KAFKA_EXAMPLE[p] for p in range(5, 10)}


def test_brokers_are_taken_in_id_order_and_ids_need_not_be_contiguous() -> None:
    # Sorted: [3, 7, 9]. Second round (p3..p5): the follower moves from 1 to 2 positions after the leader.
    assert assign_replicas([9, 3, 7], 6, 2, start_index=0, replica_shift=0) == {
        0: (3, 7), 1: (7, 9), 2: (9, 3), 3: (3, 9), 4: (7, 3), 5: (9, 7)}


@pytest.mark.parametrize(("broker_count", "rf", "partitions"), SHAPES)
def test_every_partition_gets_distinct_registered_brokers(broker_count: int, rf: int, partitions: int) -> None:
    brokers = [10 * b + 1 for b in range(broker_count)]
    for start_index in range(broker_count):
        for shift in range(broker_count):
            assignment = assign_replicas(brokers, partitions, rf, start_index=start_index, replica_shift=shift)
            assert sorted(assignment) == list(range(partitions))
            for replicas in assignment.values():
                assert len(replicas) == rf
                assert len(set(replicas)) == rf
                assert set(replicas) <= set(brokers)


@pytest.mark.parametrize(("broker_count", "rf", "partitions"), SHAPES)
def test_each_replica_position_is_balanced_within_one(broker_count: int, rf: int, partitions: int) -> None:
    brokers = list(range(broker_count))
    assignment = assign_replicas(brokers, partitions, rf, rng=random.Random(partitions))
    for position in range(rf):  # position 0: the leaders
        counts = Counter(replicas[position] for replicas in assignment.values())
        per_broker = [counts[b] for b in brokers]
        assert max(per_broker) - min(per_broker) <= 1, (position, per_broker)


def test_whole_rounds_give_every_broker_the_same_number_of_followers() -> None:
    assignment = assign_replicas(range(6), 18, 3, rng=random.Random(1))
    followers = Counter(b for replicas in assignment.values() for b in replicas[1:])
    assert followers == {b: 6 for b in range(6)}


def test_a_leaders_followers_move_on_each_round() -> None:
    # n - 1 rounds, replication factor 2: the partitions a broker leads have each other broker as
    # follower once, so its failure spreads their load over all the others.
    assignment = assign_replicas(range(5), 20, 2, start_index=2, replica_shift=3)
    followers_by_leader: dict[int, list[int]] = {}
    for leader, follower in assignment.values():
        followers_by_leader.setdefault(leader, []).append(follower)
    for leader, followers in followers_by_leader.items():
        assert sorted(followers) == [b for b in range(5) if b != leader]


def test_replication_factor_one_is_round_robin_from_the_start_index() -> None:
    assert assign_replicas([4, 5, 6], 4, 1, start_index=1, replica_shift=0) == {0: (5,), 1: (6,), 2: (4,), 3: (5,)}


def test_replication_factor_equal_to_brokers_puts_every_broker_in_every_partition() -> None:
    assignment = assign_replicas([1, 2, 3, 4], 8, 4, start_index=0, replica_shift=0)
    assert all(sorted(replicas) == [1, 2, 3, 4] for replicas in assignment.values())
    assert [replicas[0] for replicas in assignment.values()] == [1, 2, 3, 4, 1, 2, 3, 4]


def test_random_start_is_one_of_the_fixed_assignments_and_seedable() -> None:
    drawn = assign_replicas(range(4), 7, 2, rng=random.Random(42))
    assert drawn == assign_replicas(range(4), 7, 2, rng=random.Random(42))
    assert drawn in [assign_replicas(range(4), 7, 2, start_index=s, replica_shift=t)
                     for s in range(4) for t in range(4)]
    leaders = {assign_replicas(range(4), 1, 1, rng=random.Random(seed))[0][0] for seed in range(50)}
    assert leaders == {0, 1, 2, 3}


@pytest.mark.parametrize(("brokers", "partitions", "rf", "error", "message"), [
    ([0, 1], 3, 3, ErrorCode.invalid_replication_factor, "Replication factor: 3 larger than available brokers: 2."),
    ([], 1, 1, ErrorCode.invalid_replication_factor, "Replication factor: 1 larger than available brokers: 0."),
    ([0, 1], 3, 0, ErrorCode.invalid_replication_factor, "Replication factor must be larger than 0."),
    ([0, 1], 3, -1, ErrorCode.invalid_replication_factor, "Replication factor must be larger than 0."),
    ([0, 1], 0, 1, ErrorCode.invalid_partitions, "Number of partitions must be larger than 0."),
    ([0, 1], -2, 5, ErrorCode.invalid_partitions, "Number of partitions must be larger than 0."),
    ([0, 1], MAX_PARTITIONS_PER_TOPIC + 1, 1, ErrorCode.invalid_partitions, "larger than"),
])
def test_invalid_requests(brokers: list[int], partitions: int, rf: int, error: ErrorCode, message: str) -> None:
    with pytest.raises(ControllerError) as raised:
        assign_replicas(brokers, partitions, rf)
    assert raised.value.error_code == error
    assert message in str(raised.value)


def test_most_partitions_allowed() -> None:
    assert len(assign_replicas([0, 1, 2], MAX_PARTITIONS_PER_TOPIC, 3)) == MAX_PARTITIONS_PER_TOPIC


# Rack-aware assignment: Kafka's AdminUtils facts (AdminRackAwareTest).
RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_rack_alternated_broker_list_as_kafkas():
    assert rack_alternated(RACKS) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated({b: r for b, r in RACKS.items() if b != 5}) == [0, 3, 1, 4, 2]


def test_rack_aware_assignment_as_kafkas_with_a_fixed_start():
    assert assign_replicas(list(RACKS), 7, 3, start_index=0, replica_shift=0, racks=RACKS) == {
        0: (0, 3, 1), 1: (3, 1, 5), 2: (1, 5, 4), 3: (5, 4, 2), 4: (4, 2, 0), 5: (2, 0, 3), 6: (0, 4, 2)}


@pytest.mark.parametrize("seed", range(20))
def test_rack_aware_replicas_span_racks_and_leaders_spread(seed):
    racks = {0: "a", 1: "b", 2: "b", 3: "c", 4: "c", 5: "a"}
    assignment = assign_replicas(list(racks), 12, 3, racks=racks, rng=random.Random(seed))
    assert all(len({racks[b] for b in replicas}) == 3 for replicas in assignment.values())
    leaders = [replicas[0] for replicas in assignment.values()]
    assert sorted(leaders.count(b) for b in racks) == [2] * 6
    two = assign_replicas(list(racks), 12, 2, racks=racks, rng=random.Random(seed))
    assert all(len({racks[b] for b in replicas}) == 2 for replicas in two.values())


def test_brokers_without_a_rack_count_as_one_rack():
    racks = {1: "a", 2: None, 3: None}
    assignment = assign_replicas([1, 2, 3], 6, 2, racks=racks, rng=random.Random(1))
    assert all(len({racks[b] or "" for b in replicas}) == 2 for replicas in assignment.values())


def test_without_racks_the_assignment_is_rack_unaware():
    rng_a, rng_b = random.Random(3), random.Random(3)
    assert assign_replicas([1, 2, 3], 6, 2, racks={1: None, 2: None, 3: None}, rng=rng_a) == \
        assign_replicas([1, 2, 3], 6, 2, rng=rng_b)
