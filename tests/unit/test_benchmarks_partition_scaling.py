"""The pure parts of the partition-scaling benchmark: replica placement, the open-file budget, the counts run."""

from collections import Counter

import pytest

from benchmarks.partition_scaling import (
    FD_HEADROOM,
    FDS_PER_OPEN_SEGMENT,
    counts_from_environment,
    fits_open_file_limit,
    round_robin_assignment,
)


def test_round_robin_assignment_gives_each_broker_a_third_of_the_leaders_and_every_partition_three_replicas():
    assignment = round_robin_assignment(300)
    assert all(sorted(replicas) == [1, 2, 3] for replicas in assignment.values())
    assert Counter(replicas[0] for replicas in assignment.values()) == {1: 100, 2: 100, 3: 100}
    assert assignment[0] == [1, 2, 3] and assignment[1] == [2, 3, 1]


def test_a_partition_count_is_skipped_when_its_logs_would_not_fit_the_open_file_limit():
    limit = 1_000 * FDS_PER_OPEN_SEGMENT + FD_HEADROOM
    # A budget as large as the limit: every segment may stay open, as before the budget.
    assert fits_open_file_limit(1_000, limit, budget=limit)
    assert not fits_open_file_limit(1_001, limit, budget=limit)


def test_the_default_file_budget_fits_ten_thousand_partitions_under_a_twenty_thousand_file_limit():
    assert fits_open_file_limit(10_000, 20_000)
    assert not fits_open_file_limit(10_000, 20_000, budget=20_000)


@pytest.mark.parametrize("value, counts", [
    (None, (1, 100, 1_000, 10_000)),
    ("", (1, 100, 1_000, 10_000)),
    ("10000", (1, 10_000)),  # the 1-partition baseline always runs
    ("10000, 1000", (1, 1_000, 10_000)),
])
def test_partition_counts_from_the_environment(value, counts):
    assert counts_from_environment(value, (1, 100, 1_000, 10_000)) == counts


@pytest.mark.parametrize("value", ["0", ",", "-5"])
def test_partition_counts_that_are_not_positive_are_refused(value):
    with pytest.raises(ValueError):
        counts_from_environment(value, (1,))
