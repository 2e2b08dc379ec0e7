"""Table tests of the leader's fetch session cache (replog.broker.fetch_sessions, KIP-227): no I/O."""

import random

import pytest
from kio.schema.errors import ErrorCode

from replog.broker.fetch_params import FetchPartitionParams
from replog.broker.fetch_sessions import (
    INVALID_SESSION_ID,
    FetchSessionCache,
    Incremental,
    NewSession,
    SessionError,
    Sessionless,
    next_epoch,
)
from replog.protocol.fetch import FetchPartitionResult


def _p(topic="t", partition=0, offset=0, log_start=0):
    return FetchPartitionParams(topic, partition, offset, 1, 0, log_start, 1024)


def _result(partition=0, hw=10, log_start=0, records=b"", error=ErrorCode.none, diverging=None):
    return FetchPartitionResult(partition, error, hw, hw, log_start, records=records, diverging_epoch=diverging)


def _open(cache, partitions, *, privileged=True, now_ms=0, results=None):
    """A full fetch at epoch 0, answered with `results` (HW 10 each by default): the new session's id."""
    context = cache.new_context(INVALID_SESSION_ID, 0, partitions, [], privileged=privileged, now_ms=now_ms)
    assert context == NewSession(partitions, privileged)
    return cache.create(privileged, partitions, results or [_result(p.partition) for p in partitions], now_ms)


@pytest.mark.parametrize(("epoch", "expected"), [(0, 1), (1, 2), (2**31 - 1, 1), (-1, -1)])
def test_next_epoch_wraps_to_one(epoch, expected):
    assert next_epoch(epoch) == expected


def test_full_fetch_at_epoch_0_opens_a_session_at_epoch_1():
    cache = FetchSessionCache(10, rng=random.Random(1))
    session_id = _open(cache, [_p(partition=0), _p(partition=1)])
    assert session_id != INVALID_SESSION_ID
    session = cache.get(session_id)
    assert session.epoch == 1 and session.size == 2 and session.privileged


@pytest.mark.parametrize(
    ("session_id", "epoch", "expected"),
    [
        (INVALID_SESSION_ID, -1, Sessionless),  # a plain full fetch
        ("open", -1, Sessionless),  # closes the session, keeps none
        ("open", 0, NewSession),  # closes the session, opens another
        (12345, 1, SessionError(ErrorCode.fetch_session_id_not_found)),
        ("open", 2, SessionError(ErrorCode.invalid_fetch_session_epoch)),
        ("open", 1, Incremental),
    ],
)
def test_request_kinds(session_id, epoch, expected):
    cache = FetchSessionCache(10, rng=random.Random(1))
    opened = _open(cache, [_p()])
    context = cache.new_context(opened if session_id == "open" else session_id, epoch, [], [],
                                privileged=True, now_ms=5)
    if isinstance(expected, SessionError):
        assert context == expected
        assert cache.get(opened).epoch == 1, "a refused request leaves the session as it was"
    else:
        assert isinstance(context, expected)
        # A full fetch naming the session closes it; one naming none leaves it be.
        assert (cache.get(opened) is not None) == (expected is Incremental or session_id != "open")


def test_incremental_fetch_keeps_partitions_and_applies_changes_then_forgets():
    cache = FetchSessionCache(10, rng=random.Random(1))
    session_id = _open(cache, [_p(partition=0), _p(partition=1), _p(partition=2)])
    context = cache.new_context(session_id, 1, [_p(partition=1, offset=7), _p(partition=3)], [("t", 2)],
                                privileged=True, now_ms=1)
    assert isinstance(context, Incremental)
    assert [(p.partition, p.fetch_offset) for p in context.partitions] == [(0, 0), (1, 7), (3, 0)]
    assert context.session.epoch == 2


def test_forgetting_every_partition_closes_the_session():
    cache = FetchSessionCache(10, rng=random.Random(1))
    session_id = _open(cache, [_p()])
    assert cache.new_context(session_id, 1, [], [("t", 0)], privileged=True, now_ms=1) == Sessionless([])
    assert cache.get(session_id) is None


@pytest.mark.parametrize(
    ("result", "answered"),
    [
        (_result(), False),  # nothing new since the full fetch told HW 10 and log start 0
        (_result(records=b"x" * 70), True),
        (_result(hw=11), True),
        (_result(log_start=3), True),
        (_result(error=ErrorCode.not_leader_or_follower, hw=-1, log_start=-1), True),
        (_result(diverging=(1, 5)), True),
    ],
)
def test_incremental_answer_carries_only_changes(result, answered):
    cache = FetchSessionCache(10, rng=random.Random(1))
    session_id = _open(cache, [_p()])
    context = cache.new_context(session_id, 1, [], [], privileged=True, now_ms=1)
    assert context.session.select_changed(context.partitions, [result]) == ([0] if answered else [])
    # Told once: the same state again is no news (errors and data excepted, they are always answered).
    again = cache.new_context(session_id, 2, [], [], privileged=True, now_ms=2)
    always = bool(result.records) or result.error_code != ErrorCode.none or result.diverging_epoch is not None
    assert again.session.select_changed(again.partitions, [result]) == ([0] if always else [])


def test_partition_recovering_from_an_error_is_answered_again():
    cache = FetchSessionCache(10, rng=random.Random(1))
    session_id = _open(cache, [_p()])
    session = cache.new_context(session_id, 1, [], [], privileged=True, now_ms=1).session
    assert session.select_changed([_p()], [_result(error=ErrorCode.not_leader_or_follower)]) == [0]
    assert session.select_changed([_p()], [_result()]) == [0], "HW 10 again, but the fetcher last saw an error"


def test_added_partition_is_answered_once_even_without_news():
    cache = FetchSessionCache(10, rng=random.Random(1))
    session_id = _open(cache, [_p(partition=0)])
    context = cache.new_context(session_id, 1, [_p(partition=1)], [], privileged=True, now_ms=1)
    assert context.session.select_changed(context.partitions, [_result(0), _result(1)]) == [1]


def test_partition_with_data_moves_to_the_back():
    cache = FetchSessionCache(10, rng=random.Random(1))
    session_id = _open(cache, [_p(partition=0), _p(partition=1), _p(partition=2)])
    context = cache.new_context(session_id, 1, [], [], privileged=True, now_ms=1)
    context.session.select_changed(context.partitions, [_result(0, records=b"x" * 70), _result(1), _result(2)])
    assert [p.partition for p in context.session.fetch_list()] == [1, 2, 0]


def test_partition_forgotten_while_the_fetch_waited_is_left_out():
    cache = FetchSessionCache(10, rng=random.Random(1))
    session_id = _open(cache, [_p(partition=0), _p(partition=1)])
    parked = cache.new_context(session_id, 1, [], [], privileged=True, now_ms=1)
    read = parked.partitions  # what the parked fetch read, before the next request forgets partition 1
    cache.new_context(session_id, 2, [], [("t", 1)], privileged=True, now_ms=2)
    assert parked.session.select_changed(read, [_result(0, hw=11), _result(1, hw=11)]) == [0]


def test_no_slots_means_no_sessions():
    assert _open(FetchSessionCache(0), [_p()]) == INVALID_SESSION_ID


def test_empty_full_fetch_gets_no_session():
    cache = FetchSessionCache(10)
    assert cache.create(False, [], [], 0) == INVALID_SESSION_ID


MIN = 120_000


@pytest.mark.parametrize(
    ("existing", "newcomer", "now_ms", "evicted"),
    [
        # (privileged, size, created at, last used at) of the one cached session; the newcomer's (privileged, size)
        ((False, 5, 0, 0), (False, 50, 1000), 1000, False),  # young consumer session: safe from a consumer
        ((False, 5, 0, 0), (True, 1, 1000), 1000, True),  # ...but not from a follower
        ((True, 5, 0, 0), (True, 50, 1000), 1000, False),  # young follower session: safe from everyone
        ((True, 5, 0, MIN), (False, 1, MIN + 1), MIN + 1, False),  # old but in use: a consumer ranks below it
        ((False, 5, 0, MIN), (False, 6, MIN + 1), MIN + 1, True),  # old, and the newcomer is bigger
        ((False, 5, 0, MIN), (False, 5, MIN + 1), MIN + 1, False),  # a tie keeps the incumbent
        ((True, 5, 0, 0), (False, 1, MIN + 1), MIN + 1, True),  # idle past the minimum: stale, evicted
    ],
)
def test_eviction_when_full(existing, newcomer, now_ms, evicted):
    cache = FetchSessionCache(1, rng=random.Random(1))
    privileged, size, created_ms, used_ms = existing
    old = _open(cache, [_p(partition=i) for i in range(size)], privileged=privileged, now_ms=created_ms)
    if used_ms != created_ms:
        cache.new_context(old, 1, [], [], privileged=privileged, now_ms=used_ms)
    new_privileged, new_size = newcomer[:2]
    new = cache.create(new_privileged, [_p(partition=i) for i in range(new_size)],
                       [_result(i) for i in range(new_size)], now_ms)
    assert (new != INVALID_SESSION_ID) == evicted
    assert (cache.get(old) is None) == evicted
    assert len(cache) == 1 and cache.evictions == int(evicted)


def test_lru_stale_session_is_evicted_before_a_weaker_one():
    cache = FetchSessionCache(2, rng=random.Random(1))
    stale = _open(cache, [_p(partition=i) for i in range(10)], privileged=True, now_ms=0)
    weak = _open(cache, [_p()], privileged=False, now_ms=MIN)
    assert cache.create(True, [_p()], [_result()], MIN + 1) != INVALID_SESSION_ID
    assert cache.get(stale) is None and cache.get(weak) is not None


@pytest.mark.parametrize(
    ("quiet", "changed", "age_ms", "named_again", "read"),
    [
        (False, False, 0, False, True),  # not quiet at its last read: read
        (True, False, 0, False, False),  # quiet and unchanged: skipped
        (True, True, 0, False, True),  # the broker changed it (an append, the HW, leadership, the ISR): read
        (True, False, 1001, False, True),  # quiet for longer than the refresh interval: read anyway
        (True, False, 0, True, True),  # named again by the fetcher (its offset moved): read
    ],
)
def test_plan_reads_skips_only_quiet_unchanged_partitions(quiet, changed, age_ms, named_again, read):
    cache = FetchSessionCache(10, rng=random.Random(1))
    session_id = _open(cache, [_p(partition=0), _p(partition=1)])
    session = cache.get(session_id)
    session.record_reads([_p(partition=0), _p(partition=1)], ["pos0" if quiet else None, None], 0)
    if changed:
        cache.partition_changed(("t", 0))
    context = cache.new_context(session_id, 1, [_p(partition=0, offset=3)] if named_again else [], [],
                                privileged=True, now_ms=age_ms)
    reads = context.session.plan_reads(age_ms, 1000)
    assert [p.partition for p in reads] == ([0, 1] if read else [1])


def test_change_to_a_quiet_partition_visits_only_the_sessions_holding_it_and_tells_their_waiters():
    cache = FetchSessionCache(10, rng=random.Random(1))
    holding, other = (cache.get(_open(cache, [_p(partition=i) for i in range(3)])) for _ in range(2))
    holding.record_reads([_p(partition=0), _p(partition=1)], ["pos0", "pos1"], 0)
    other.record_reads([_p(partition=1)], ["pos1"], 0)
    told = []
    holding.waiters.add(lambda p, position: told.append((p.partition, position)))
    cache.partition_changed(("t", 0))
    cache.partition_changed(("t", 0))  # no longer quiet: a second change tells no one
    assert told == [(0, "pos0")]
    assert [p.partition for p in holding.plan_reads(1, 1000)] == [0, 2]
    assert [p.partition for p in other.plan_reads(1, 1000)] == [0, 2]


def test_plan_reads_visits_the_partitions_it_reads_not_the_session():
    """1,000 quiet partitions and one that changed: the plan is that one, and a read of the session's
    partitions is never needed (the broker's state is asked for nothing)."""
    cache = FetchSessionCache(10, rng=random.Random(1))
    partitions = [_p(partition=i) for i in range(1000)]
    session = cache.get(_open(cache, partitions))
    session.record_reads(partitions, [f"pos{i}" for i in range(1000)], 0)
    cache.partition_changed(("t", 7))
    assert session.active_count == 1
    assert [p.partition for p in session.plan_reads(1, 1000)] == [7]


def test_closing_a_session_forgets_its_quiet_partitions():
    cache = FetchSessionCache(10, rng=random.Random(1))
    session_id = _open(cache, [_p(partition=0)])
    session = cache.get(session_id)
    session.record_reads([_p(partition=0)], ["pos0"], 0)
    told = []
    session.waiters.add(lambda p, position: told.append(p.partition))
    cache.new_context(session_id, -1, [], [], privileged=True, now_ms=1)  # epoch -1 closes it
    cache.partition_changed(("t", 0))
    assert told == [] and cache.get(session_id) is None
