"""The chaos suite's queue checker on hand-made histories: a clean one, and one per anomaly class."""

from replog.chaos.checker import (
    ANOMALY_CLASSES,
    DIVERGENT_OFFSET,
    DUPLICATED,
    FAILED_WRITE_READ,
    LOST,
    NON_MONOTONIC,
    UNEXPECTED,
    UNSTABLE_READ,
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


def test_a_value_read_during_the_faults_must_be_at_the_same_offset_at_the_end():
    during = {0: [(0, "a-0"), (1, "a-1")], 1: [(0, "b-0")]}
    assert check(History(ATTEMPTED, ACKNOWLEDGED, CLEAN_READ, read_during_faults=during)).ok
    # a-2 was read at 0/2 while a leader still held it, then truncated away: committed data that vanished.
    vanished = {0: [(0, "a-0"), (1, "a-1"), (2, "a-2")]}
    read = {0: [(0, "a-0"), (1, "a-1")], 1: [(0, "b-0"), (1, "b-1")]}
    result = check(History(ATTEMPTED, ACKNOWLEDGED, read, read_during_faults=vanished))
    assert result.counts == only(UNSTABLE_READ)
    assert result.examples[UNSTABLE_READ] == ["'a-2' read at 0/2 during the faults; at the end nothing is there"]
    replaced = {1: [(0, "b-1")]}
    result = check(History(ATTEMPTED, ACKNOWLEDGED, CLEAN_READ, read_during_faults=replaced))
    assert result.counts == only(UNSTABLE_READ)
    assert result.examples[UNSTABLE_READ] == ["'b-1' read at 1/0 during the faults; at the end that offset holds "
                                              "['b-0']"]


def test_reads_during_the_faults_must_move_forward():
    during = {0: [(0, "a-0"), (1, "a-1"), (0, "a-0")]}
    result = check(History(ATTEMPTED, ACKNOWLEDGED, CLEAN_READ, read_during_faults=during))
    assert result.counts == only(UNSTABLE_READ)


def test_a_value_read_during_the_faults_that_nobody_wrote_is_unexpected():
    during = {0: [(0, "a-0"), (1, "x-9")]}
    read = {0: [(0, "a-0"), (1, "x-9"), (2, "a-2")], 1: [(0, "b-0"), (1, "b-1")]}
    result = check(History(ATTEMPTED, {"a-0": (0, 0)}, read, read_during_faults=during))
    assert result.counts == only(UNEXPECTED, 2)


def test_a_definitely_failed_write_must_not_be_read_but_an_indeterminate_one_may_be():
    failed = {"a-2": "_MSG_TIMED_OUT"}
    assert check(History(ATTEMPTED, ACKNOWLEDGED, CLEAN_READ, failed=failed)).ok
    failed = {"a-2": "MSG_SIZE_TOO_LARGE"}
    result = check(History(ATTEMPTED, ACKNOWLEDGED, CLEAN_READ, failed=failed))
    assert result.counts == only(FAILED_WRITE_READ)
    assert result.examples[FAILED_WRITE_READ] == ["'a-2' failed with MSG_SIZE_TOO_LARGE but is at 0/2"]
    assert check(History(ATTEMPTED, ACKNOWLEDGED, {0: CLEAN_READ[0][:2], 1: CLEAN_READ[1]}, failed=failed)).ok


def test_a_write_acknowledged_without_an_offset_must_still_be_read():
    acknowledged = {**ACKNOWLEDGED, "a-2": (0, None)}
    assert check(History(ATTEMPTED, acknowledged, CLEAN_READ)).ok
    read = {0: CLEAN_READ[0][:2], 1: CLEAN_READ[1]}
    result = check(History(ATTEMPTED, acknowledged, read))
    assert result.counts == only(LOST)
    assert result.examples[LOST] == ["'a-2' acknowledged at 0/None"]
