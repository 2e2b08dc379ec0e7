"""Idempotent sequence bookkeeping per partition: assignment, in-order retries, and rewinding."""

from replog.client.accumulator import ProducerBatch
from replog.client.sequences import PartitionState


def batch(records: int) -> ProducerBatch:
    b = ProducerBatch("t", 0, created=0.0, deadline=100.0)
    b.records = [(None, b"x", (), 0)] * records
    return b


def test_sequences_are_assigned_consecutively_on_first_drain():
    state = PartitionState()
    batches = [batch(n) for n in (3, 1, 5)]
    for b in batches:
        state.assign_sequence(b)
    assert [b.base_sequence for b in batches] == [0, 3, 4]
    assert state.next_sequence == 9


def test_sequence_wraps_past_int32_max():
    state = PartitionState(next_sequence=2**31 - 2)
    first, second = batch(3), batch(1)
    state.assign_sequence(first)
    state.assign_sequence(second)
    assert first.base_sequence == 2**31 - 2
    assert second.base_sequence == 1
    assert state.next_sequence == 2


def test_in_flight_limit_and_retry_gating():
    state = PartitionState()
    state.in_flight = [batch(1) for _ in range(5)]
    assert not state.can_send(now=0.0, max_in_flight=5)
    assert state.can_send(now=0.0, max_in_flight=6)
    failed = state.in_flight.pop(0)
    state.schedule_retry(failed, backoff_until=1.0)
    assert not state.can_send(now=2.0, max_in_flight=5)  # retries wait for everything in flight
    state.in_flight.clear()
    assert not state.can_send(now=0.5, max_in_flight=5)  # and for the back-off
    assert state.can_send(now=1.0, max_in_flight=5)


def test_retries_are_kept_in_creation_order():
    state = PartitionState()
    a, b, c = batch(1), batch(1), batch(1)
    for x in (c, a, b):
        state.schedule_retry(x, backoff_until=0.0)
    assert state.retries == [a, b, c]


def test_out_of_order_is_expected_only_behind_a_pending_batch():
    state = PartitionState()
    a, b = batch(1), batch(1)
    state.in_flight = [b]
    assert not state.earlier_batch_pending(b)
    state.schedule_retry(a, backoff_until=0.0)
    assert state.earlier_batch_pending(b)
    assert not state.earlier_batch_pending(a)


def test_rewind_moves_later_sequences_down_and_forces_rebuild():
    state = PartitionState()
    a, b, c = batch(2), batch(3), batch(4)
    for x in (a, b, c):
        state.assign_sequence(x)
        x.payload = b"built"
    state.in_flight = [b]
    state.schedule_retry(c, backoff_until=0.0)
    state.rewind_after(a)  # a was rejected for good: the broker never saw sequences 0-1
    assert (b.base_sequence, c.base_sequence) == (0, 3)
    assert b.resequenced and c.resequenced
    assert b.payload is None and c.payload is None
    assert state.next_sequence == 7
