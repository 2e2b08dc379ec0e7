"""Table tests of the follower's pure fetch decisions (replog.fetcher.decisions) and PartitionFetchState."""

import dataclasses

import pytest
from kio.schema.errors import ErrorCode

from replog.fetcher import decisions as d
from replog.fetcher.fetch_state import FetchPhase, PartitionFetchState
from replog.protocol.fetch import FetchPartitionResult
from replog.protocol.records import build_batch

FETCHING = FetchPhase.FETCHING
TRUNCATING = FetchPhase.TRUNCATING


def _state(offset=10, epoch=5, last=3, phase=FETCHING, generation=1, delayed_until_ms=0):
    return PartitionFetchState(None, offset, epoch, last, phase, generation, delayed_until_ms)


def _batch(base_offset: int, count: int, epoch: int) -> bytes:
    records = [(None, b"v%d" % i, [], 1000 + i) for i in range(count)]
    return build_batch(records, base_offset=base_offset, partition_leader_epoch=epoch)


# ------------------------------------------------------------------ initial state


@pytest.mark.parametrize(
    ("leo", "hw", "latest_epoch", "expected"),
    [
        # An epoch cache: fetch from the LEO and let DivergingEpoch find any divergence (IBP >= 2.7).
        (30, 20, 4, (30, 4, FETCHING)),
        # No epochs: nothing past the HW can be proven, so truncate to it first.
        (30, 20, -1, (20, None, TRUNCATING)),
        (0, 0, -1, (0, None, TRUNCATING)),
        (0, 0, 0, (0, 0, FETCHING)),
    ],
)
def test_initial_fetch_state(leo, hw, latest_epoch, expected):
    state = d.initial_fetch_state(
        None, 7, log_end_offset=leo, high_watermark=hw, latest_epoch=latest_epoch, generation=3
    )
    assert (state.fetch_offset, state.last_fetched_epoch, state.phase) == expected
    assert (state.current_leader_epoch, state.generation, state.delayed_until_ms) == (7, 3, 0)


# --------------------------------------------------------------------- truncation


@pytest.mark.parametrize(
    ("latest_epoch", "expected"),
    [
        (-1, d.OffsetTruncation(12, completed=True)),  # truncateToHighWatermark: the fetch offset is the HW
        (0, d.AskLeaderEpochEnd(0)),
        (6, d.AskLeaderEpochEnd(6)),
    ],
)
def test_truncating_step(latest_epoch, expected):
    assert d.truncating_step(_state(offset=12, last=None, phase=TRUNCATING), latest_epoch) == expected


@pytest.mark.parametrize(
    ("leader", "local_epoch_end", "leo", "fetch_offset", "expected"),
    [
        # The leader does not know the epoch: fall back to the fetch offset (the HW), never above the LEO.
        ((-1, -1), (-1, -1), 20, 5, (5, True)),
        ((-1, -1), (-1, -1), 3, 5, (3, True)),
        # We kept no epoch that old: the leader's end offset bounds the truncation.
        ((2, 10), (-1, -1), 20, 20, (10, True)),
        ((2, 30), (-1, -1), 20, 20, (20, True)),
        # KIP-279: the leader's epoch is unknown here; cut to where our older epoch ends, then ask again.
        ((2, 18), (1, 20), 25, 25, (20, False)),
        ((2, 18), (1, 20), 15, 15, (15, False)),
        # KIP-101: same epoch; the smallest of the two epoch ends and the LEO.
        ((0, 10), (0, 12), 16, 16, (10, True)),
        ((3, 50), (3, 40), 45, 45, (40, True)),
        ((3, 50), (3, 45), 45, 45, (45, True)),
        # The leader asked about an epoch below our earliest answers with that epoch and our first start.
        ((1, 8), (1, 5), 40, 40, (5, True)),
    ],
)
def test_truncation_for(leader, local_epoch_end, leo, fetch_offset, expected):
    truncation = d.truncation_for(
        d.Diverged(*leader), local_epoch_end=local_epoch_end, log_end_offset=leo, fetch_offset=fetch_offset
    )
    assert (truncation.offset, truncation.completed) == expected


@pytest.mark.parametrize(
    ("truncation", "leo_after", "latest_epoch", "expected"),
    [
        (d.OffsetTruncation(20, True), 20, 4, (20, 4, FETCHING)),
        (d.OffsetTruncation(20, False), 20, 1, (20, 1, TRUNCATING)),
        (d.OffsetTruncation(20, True), 0, -1, (0, None, FETCHING)),
        # A batch straddling the point went whole: fetch from where the log really ends.
        (d.OffsetTruncation(21, True), 18, 4, (18, 4, FETCHING)),
    ],
)
def test_state_after_truncation(truncation, leo_after, latest_epoch, expected):
    before = _state(offset=30, last=6, delayed_until_ms=0)
    after = d.state_after_truncation(before, truncation, log_end_offset=leo_after, latest_epoch=latest_epoch)
    assert (after.fetch_offset, after.last_fetched_epoch, after.phase) == expected
    assert (after.generation, after.current_leader_epoch) == (before.generation, before.current_leader_epoch)


def test_state_after_truncation_refuses_a_log_that_did_not_shrink():
    with pytest.raises(AssertionError):
        d.state_after_truncation(_state(), d.OffsetTruncation(10, True), log_end_offset=11, latest_epoch=1)


# ------------------------------------------------------------------------ answers


@pytest.mark.parametrize(
    ("current", "expected"),
    [
        (_state(), True),
        (_state(delayed_until_ms=99), True),  # a back-off is not a new state
        (None, False),  # removed
        (_state(generation=2), False),  # removed and added again
        (_state(offset=11), False),  # moved on or truncated meanwhile
        (_state(epoch=6), False),  # a new leader epoch
        (_state(phase=TRUNCATING), False),
    ],
)
def test_is_current(current, expected):
    assert d.is_current(_state(), current) is expected


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (ErrorCode.fenced_leader_epoch, d.Fail),
        (ErrorCode.unknown_leader_epoch, d.BackOff),
        (ErrorCode.not_leader_or_follower, d.BackOff),
        (ErrorCode.unknown_topic_or_partition, d.BackOff),
        (ErrorCode.kafka_storage_error, d.BackOff),
        (ErrorCode.unknown_server_error, d.BackOff),
    ],
)
def test_on_error(code, expected):
    assert d.on_error(code) == expected(code)


_RECORDS = memoryview(bytearray(_batch(10, 2, 4) + _batch(12, 3, 5)))


@pytest.mark.parametrize(
    ("current", "result", "expected"),
    [
        (None, FetchPartitionResult(0, records=_RECORDS), d.Drop()),
        (_state(offset=12), FetchPartitionResult(0, records=_RECORDS), d.Drop()),
        (_state(), FetchPartitionResult(0, ErrorCode.offset_out_of_range), d.ResolveOutOfRange()),
        (_state(), FetchPartitionResult(0, ErrorCode.not_leader_or_follower), d.BackOff(6)),
        (_state(), FetchPartitionResult(0, ErrorCode.unknown_leader_epoch), d.BackOff(75)),
        (_state(), FetchPartitionResult(0, ErrorCode.fenced_leader_epoch), d.Fail(74)),
        # DivergingEpoch wins over any data, HW and log start in the same answer (KAFKA-14704).
        (
            _state(),
            FetchPartitionResult(
                0, high_watermark=40, log_start_offset=5, records=_RECORDS, diverging_epoch=(2, 8)
            ),
            d.Diverged(2, 8),
        ),
        (
            _state(),
            FetchPartitionResult(0, high_watermark=40, log_start_offset=5, records=_RECORDS),
            d.Append(_RECORDS, 5, 40, 5),
        ),
        # Nothing new: still take the HW and log start; LastFetchedEpoch stays.
        (
            _state(),
            FetchPartitionResult(0, high_watermark=9, log_start_offset=2, records=None),
            d.Append(memoryview(b""), 3, 9, 2),
        ),
    ],
)
def test_on_fetch_result(current, result, expected):
    assert d.on_fetch_result(_state(), current, result) == expected


def test_append_keeps_the_last_fetched_epoch_for_batches_without_one():
    records = memoryview(bytearray(_batch(10, 2, -1)))
    action = d.on_fetch_result(_state(), _state(), FetchPartitionResult(0, high_watermark=0, records=records))
    assert isinstance(action, d.Append)
    assert action.last_batch_epoch == 3


@pytest.mark.parametrize(
    ("current", "answer", "expected"),
    [
        (None, (0, 3, 40), d.Drop()),
        (_state(phase=TRUNCATING, generation=9), (0, 3, 40), d.Drop()),
        (_state(phase=TRUNCATING), (0, 3, 40), d.Diverged(3, 40)),
        (_state(phase=TRUNCATING), (0, -1, -1), d.Diverged(-1, -1)),
        (_state(phase=TRUNCATING), (ErrorCode.not_leader_or_follower, -1, -1), d.BackOff(6)),
        (_state(phase=TRUNCATING), (ErrorCode.fenced_leader_epoch, -1, -1), d.Fail(74)),
    ],
)
def test_on_epoch_answer(current, answer, expected):
    assert d.on_epoch_answer(_state(phase=TRUNCATING), current, *answer) == expected


def test_whole_batches_trims_a_cut_tail_without_copying():
    whole = _batch(0, 2, 1) + _batch(2, 2, 3)
    frame = bytearray(whole + _batch(4, 5, 3)[:-7])
    records, last_epoch = d.whole_batches(memoryview(frame))
    assert bytes(records) == whole
    assert records.obj is frame
    assert last_epoch == 3
    assert d.whole_batches(None) == (memoryview(b""), None)
    assert d.whole_batches(memoryview(frame)[:20]) == (memoryview(b""), None)


@pytest.mark.parametrize(
    ("leader_hw", "log_start", "leo", "expected"),
    [(50, 0, 30, 30), (20, 0, 30, 20), (-1, 5, 30, 5), (3, 5, 30, 5), (30, 30, 30, 30)],
)
def test_follower_high_watermark(leader_hw, log_start, leo, expected):
    assert d.follower_high_watermark(leader_hw, log_start, leo) == expected


@pytest.mark.parametrize(
    ("leader_start", "log_start", "hw", "expected"),
    [(10, 0, 20, 10), (10, 0, 5, 5), (0, 0, 20, None), (-1, 0, 20, None), (3, 5, 20, None)],
)
def test_follower_log_start_offset(leader_start, log_start, hw, expected):
    assert d.follower_log_start_offset(leader_start, log_start, hw) == expected


# ------------------------------------------------------------------ out of range


@pytest.mark.parametrize(
    ("leo", "leader_end", "leader_start", "expected"),
    [
        (15, 10, 0, d.TruncateTo(10)),  # the leader is shorter (unclean election)
        (10, 50, 30, d.TruncateFullyAndStartAt(30)),  # the leader deleted past our end
        (10, 50, 5, d.FetchFrom(10)),
        (10, 10, 10, d.FetchFrom(10)),
        (0, 0, 0, d.FetchFrom(0)),
        (10, 50, -1, d.BackOff(ErrorCode.unknown_server_error)),
        (10, 5, 8, d.BackOff(ErrorCode.unknown_server_error)),
    ],
)
def test_resolve_out_of_range(leo, leader_end, leader_start, expected):
    resolution = d.resolve_out_of_range(
        log_end_offset=leo, leader_log_end_offset=leader_end, leader_log_start_offset=leader_start
    )
    assert resolution == expected


# -------------------------------------------------------------- fetch state values


def test_back_off_does_not_stack():
    state = _state()
    delayed = state.delayed(1000, 50)
    assert delayed.delayed_until_ms == 1050
    assert not delayed.is_ready_to_fetch(1049)
    assert delayed.is_ready_to_fetch(1050)
    assert delayed.delayed(1020, 50) is delayed
    assert delayed.delayed(1050, 50).delayed_until_ms == 1100


def test_ready_to_truncate_only_when_truncating_and_not_delayed():
    truncating = _state(phase=TRUNCATING)
    assert truncating.is_ready_to_truncate(0)
    assert not truncating.is_ready_to_fetch(0)
    assert not dataclasses.replace(truncating, delayed_until_ms=5).is_ready_to_truncate(0)
    assert not _state().is_ready_to_truncate(0)


def test_fetch_state_rejects_impossible_values():
    with pytest.raises(AssertionError):
        _state(offset=-1)
    with pytest.raises(AssertionError):
        _state(last=-1)
