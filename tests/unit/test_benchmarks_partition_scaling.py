"""The pure parts of the partition-scaling benchmark: replica placement and the open-file budget."""

from collections import Counter

from benchmarks.partition_scaling import (
    FD_HEADROOM,
    FDS_PER_PARTITION,
    fits_open_file_limit,
    round_robin_assignment,
)


def test_round_robin_assignment_gives_each_broker_a_third_of_the_leaders_and_every_partition_three_replicas():
    assignment = round_robin_assignment(300)
    assert all(sorted(replicas) == [1, 2, 3] for replicas in assignment.values())
    assert Counter(replicas[0] for replicas in assignment.values()) == {1: 100, 2: 100, 3: 100}
    assert assignment[0] == [1, 2, 3] and assignment[1] == [2, 3, 1]


def test_a_partition_count_is_skipped_when_its_logs_would_not_fit_the_open_file_limit():
    limit = 1_000 * FDS_PER_PARTITION + FD_HEADROOM
    assert fits_open_file_limit(1_000, limit)
    assert not fits_open_file_limit(1_001, limit)
