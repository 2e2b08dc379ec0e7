"""The chaos suite's queue checker on hand-made histories: a clean one, and one per anomaly class."""

from replog.chaos.checker import (
    ANOMALY_CLASSES,
    DIVERGENT_OFFSET,
    DUPLICATED,
    LOST,
    NON_MONOTONIC,
    UNEXPECTED,
    History,
    check,
)

ATTEMPTED = {"a-0", "a-1", "a-2", "b-0", "b-1"}
# a-2 was attempted but never acknowledged: its fate is unknown, so reading it or not is fine.
ACKNOWLEDGED = {"a-0": (0, 0), "a-1": (0, 1), "b-0": (1, 0), "b-1": (1, 1)}
CLEAN_READ = {0: [(0, "a-0"), (1, "a-1"), (2, "a-2")], 1: [(0, "b-0"), (1, "b-1")]}


def only(anomaly: str, count: int = 1) -> dict[str, int]:
    return {c: (count if c == anomaly else 0) for c in ANOMALY_CLASSES}


def test_a_clean_history_has_no_anomaly():
    result = check(History(ATTEMPTED, ACKNOWLEDGED, CLEAN_READ))
    assert result.ok
    assert result.counts == dict.fromkeys(ANOMALY_CLASSES, 0)


def test_an_unacknowledged_write_may_be_missing():
    read = {0: [(0, "a-0"), (1, "a-1")], 1: [(0, "b-0"), (1, "b-1")]}
    assert check(History(ATTEMPTED, ACKNOWLEDGED, read)).ok


def test_an_acknowledged_write_never_read_is_lost():
    read = {0: [(0, "a-0"), (1, "a-1"), (2, "a-2")], 1: [(0, "b-0")]}
    result = check(History(ATTEMPTED, ACKNOWLEDGED, read))
    assert result.counts == only(LOST)
    assert result.examples[LOST] == ["'b-1' acknowledged at 1/1"]
    assert not result.ok


def test_a_value_read_at_two_offsets_is_duplicated():
    read = {0: [(0, "a-0"), (1, "a-1"), (2, "a-2"), (3, "a-1")], 1: [(0, "b-0"), (1, "b-1")]}
    result = check(History(ATTEMPTED, ACKNOWLEDGED, read))
    assert result.counts == only(DUPLICATED)
    assert result.examples[DUPLICATED] == ["'a-1' at 0/1, 0/3"]


def test_a_duplicate_across_partitions_counts_too():
    read = {0: [(0, "a-0"), (1, "a-1")], 1: [(0, "b-0"), (1, "b-1"), (2, "a-0")]}
    assert check(History(ATTEMPTED, ACKNOWLEDGED, read)).counts == only(DUPLICATED)


def test_two_values_read_at_one_offset_diverge():
    # Offset 1 of partition 1 read twice, as across a truncation, holding b-1 then a-2.
    read = {0: [(0, "a-0"), (1, "a-1")], 1: [(0, "b-0"), (1, "b-1"), (1, "a-2")]}
    result = check(History(ATTEMPTED, ACKNOWLEDGED, read))
    assert result.counts == {**only(DIVERGENT_OFFSET), NON_MONOTONIC: 1}
    assert result.examples[DIVERGENT_OFFSET] == ["1/1 holds ['a-2', 'b-1']"]


def test_an_acknowledged_value_read_elsewhere_diverges_from_its_acknowledgement():
    # The broker said a-1 is at offset 1, but offset 1 holds a-2 and a-1 turned up at 2.
    read = {0: [(0, "a-0"), (1, "a-2"), (2, "a-1")], 1: [(0, "b-0"), (1, "b-1")]}
    result = check(History(ATTEMPTED, ACKNOWLEDGED, read))
    assert result.counts == only(DIVERGENT_OFFSET)
    assert result.examples[DIVERGENT_OFFSET] == ["0/1 holds ['a-1', 'a-2']"]


def test_two_acknowledgements_of_one_offset_diverge_even_unread():
    acknowledged = {**ACKNOWLEDGED, "a-2": (0, 1)}
    read = {0: [(0, "a-0"), (1, "a-1")], 1: [(0, "b-0"), (1, "b-1")]}
    result = check(History(ATTEMPTED, acknowledged, read))
    assert result.counts == {**only(DIVERGENT_OFFSET), LOST: 1}  # and a-2, acknowledged, was never read


def test_offsets_that_go_back_are_non_monotonic():
    read = {0: [(0, "a-0"), (2, "a-2"), (1, "a-1")], 1: [(0, "b-0"), (1, "b-1")]}
    result = check(History(ATTEMPTED, ACKNOWLEDGED, read))
    assert result.counts == only(NON_MONOTONIC)
    assert result.examples[NON_MONOTONIC] == ["partition 0: offset 1 read after 2"]


def test_an_offset_read_twice_is_non_monotonic():
    read = {0: [(0, "a-0"), (1, "a-1"), (1, "a-1"), (2, "a-2")], 1: [(0, "b-0"), (1, "b-1")]}
    assert check(History(ATTEMPTED, ACKNOWLEDGED, read)).counts == only(NON_MONOTONIC)


def test_a_value_nobody_attempted_is_unexpected():
    read = {0: [(0, "a-0"), (1, "a-1"), (2, "a-2"), (3, "c-0")], 1: [(0, "b-0"), (1, "b-1")]}
    result = check(History(ATTEMPTED, ACKNOWLEDGED, read))
    assert result.counts == only(UNEXPECTED)
    assert result.examples[UNEXPECTED] == ["'c-0' at 0/3"]


def test_examples_are_bounded_but_counts_are_not():
    attempted = {f"v-{i}" for i in range(100)}
    acknowledged = {f"v-{i}": (0, i) for i in range(100)}
    result = check(History(attempted, acknowledged, {0: []}))
    assert result.counts[LOST] == 100
    assert len(result.examples[LOST]) == 5
