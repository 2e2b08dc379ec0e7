"""What a parked fetch answers when an append or a HW move wakes it (DelayedFetch.on_complete's fresh read,
through handlers/fetch.handle in incremental sessions): the new batch, byte for byte as the log holds it,
wherever the fetch parked, and for a consumer only up to the HW."""

import pytest

from benchmarks.leader_fetch_rounds import BATCH, FOLLOWERS, Fetcher, leader_rounds
from replog.log.config import LogConfig
from replog.protocol.records import iter_batches


@pytest.fixture
async def rounds(tmp_path):
    return await leader_rounds(tmp_path)


def _records(answer: list) -> bytes:
    """The record bytes of a one-partition fetch answer (the encoder's parts: bytes around a file slice)."""
    return b"".join(part.read_bytes() for part in answer if not isinstance(part, (bytes, bytearray, memoryview)))


def _stored(rounds, offset: int) -> bytes:
    """The batches from `offset` to the LEO as the leader's log holds them."""
    read = rounds.log.read(offset, max_bytes=1 << 20, upper_bound=rounds.log.log_end_offset)
    return read.slice.read_bytes()


def _append(rounds):
    return rounds.manager.append_records([("t", 0, memoryview(bytearray(BATCH)))], -1, 30_000)


async def test_the_woken_followers_get_the_new_batch_as_stored_and_the_consumer_waits_for_the_hw(rounds):
    parked_at = rounds.log.log_end_offset
    produce = _append(rounds)
    assert [_records(f.answers[-1]) for f in rounds.followers] == [_stored(rounds, parked_at)] * 2
    assert [b.base_offset for b in iter_batches(_records(rounds.followers[0].answers[-1]))] == [parked_at]
    assert rounds.consumer in rounds.parked, "the append moved no HW"
    assert rounds.send(rounds.followers[0])
    assert rounds.consumer in rounds.parked and not produce.done(), "the HW waits for the whole ISR"
    assert rounds.send(rounds.followers[1])
    assert rounds.consumer not in rounds.parked
    assert _records(rounds.consumer.answers[-1]) == _stored(rounds, parked_at)


async def test_a_fetch_parked_before_a_roll_is_answered_with_the_batch_from_the_new_segment(rounds):
    parked_at = rounds.log.log_end_offset
    rounds.log.roll()
    rounds.one_round()
    assert rounds.log.active_segment.base_offset == parked_at
    answers = [_records(f.answers[-1]) for f in rounds.followers] + [_records(rounds.consumer.answers[-1])]
    assert answers == [_stored(rounds, parked_at)] * 3


async def test_a_fetch_parked_mid_segment_behind_the_leo_is_answered_at_once_from_its_offset(tmp_path):
    # Not the previous LEO: a follower that fell behind (its offset mid-segment, two batches back) is answered
    # when it arrives, from its own offset, by the same read.
    rounds = await leader_rounds(tmp_path, LogConfig(segment_bytes=1 << 20))
    behind = Fetcher(FOLLOWERS[0])  # a new session: its fetch is not the parked one
    start = behind.offset = rounds.log.log_end_offset - 2
    assert not rounds.send(behind)
    assert [b.base_offset for b in iter_batches(_records(behind.answers[-1]))] == [start, start + 1]
    assert _records(behind.answers[-1]) == _stored(rounds, start)
