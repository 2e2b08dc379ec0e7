"""The leader's Fetch path at RF=3, acks=all, one record per Produce (linger 0), counted per Produce: two
followers in incremental sessions (KIP-227) and a consumer, all parked at the end, all through
handlers/fetch.handle. Each round: an append wakes both followers' fetches (answered with the batch), each
follower fetches again at the new LEO (the second moves the HW: the produce answer and the consumer's parked
fetch complete), and the consumer fetches again and parks. Counts, never time (docs/profiles/rf3-linger0.md,
"Sixth pass")."""

import sys

import pytest

from benchmarks.leader_fetch_rounds import count_calls, leader_rounds


@pytest.fixture
async def rounds(tmp_path):
    return await leader_rounds(tmp_path)


async def test_the_rounds_answer_every_fetcher_with_each_batch(rounds):
    for _ in range(5):
        rounds.one_round()
    leo = rounds.manager.get_partition("t", 0).log.log_end_offset
    assert [f.offset for f in rounds.followers] == [leo, leo]
    assert rounds.consumer.offset == leo == rounds.manager.get_partition("t", 0).high_watermark


async def test_a_follower_is_recorded_once_per_fetch_and_not_again_by_its_woken_answer(rounds):
    calls = count_calls(rounds.one_round, 20)
    assert calls["broker/partition.py", "update_follower_fetch_state"] == 2  # one per follower fetch
    assert calls["broker/delayed_fetch.py", "on_complete"] == 3  # two followers' answers and the consumer's


async def test_a_fetch_builds_its_params_once_and_replaces_nothing(rounds):
    calls = count_calls(rounds.one_round, 20)
    assert not [key for key in calls if key[0].endswith("dataclasses.py") and key[1] == "replace"]
    assert calls["handlers/fetch.py", "handle"] == 3


async def test_an_answer_without_aborted_transactions_is_encoded_without_the_field_writer(rounds):
    calls = count_calls(rounds.one_round, 20)
    assert calls["protocol/fetch.py", "encode_fetch_response"] == 3
    assert calls["protocol/fetch.py", "_write_partition_fields"] == 0
    assert calls["protocol/primitives.py", "int64"] == 0  # the field-by-field path's offsets



async def test_a_fetch_parks_on_its_read_s_checks_without_repeating_them(rounds):
    """The read that parks a fetch has checked leadership, epochs and divergence in the same call: the
    purgatory's first check only counts bytes. Divergence is checked by each read (three fetches, three woken
    answers) and each wake-up (the append wakes the three parked fetches; the HW move wakes the consumer's and
    the first follower's new one), not by the parks."""
    calls = count_calls(rounds.one_round, 20)
    assert calls["broker/partition.py", "diverging_epoch"] == 6 + 5
    assert calls["broker/delayed_fetch.py", "_parked"] == 5


async def test_a_woken_fetch_reads_the_new_batch_where_the_append_left_it(rounds):
    """The followers' fetches park at the LEO, where the append's batch then starts: their answers (and the
    consumer's, once the HW moves) read the active segment at its last batch's cached place (LogSegment's
    tail), with no search of the sorted segments, no index lookup and no header read
    (docs/profiles/rf3-fetch-path.md, "Seventh pass")."""
    calls = count_calls(rounds.one_round, 20)
    assert calls["log/partition_log.py", "read"] == 6  # three fetches arriving, three answered when woken
    assert calls["log/segment.py", "read"] == 3  # the three answers with the batch
    assert calls["log/log_segments.py", "from_offset"] == 0
    assert calls["log/index.py", "lookup"] == 0
    assert calls["log/segment_files.py", "pread"] == 0


async def test_a_parked_fetch_counts_bytes_from_its_positions_fields_and_asks_who_fetches_once(rounds):
    calls = count_calls(rounds.one_round, 20)
    assert calls["log/offset_metadata.py", "on_same_segment"] == 0
    assert calls["log/offset_metadata.py", "position_diff"] == 0
    assert calls["broker/fetch_params.py", "is_follower"] == calls["broker/replica_manager.py", "read_partition"]
    # One per parked fetch (its checks), one per answer with data (its metrics); none per check.
    assert calls["broker/fetch_params.py", "from_follower"] == 3 + 3


async def test_the_woken_answers_stay_within_their_call_budget(rounds):
    """Every Python call made inside DelayedFetch.on_complete in a round: the fresh reads, the session's
    bookkeeping and the encoding of the two followers' answers and the consumer's (287 before the seventh
    pass, 242 after)."""
    inside = {"depth": 0, "calls": 0}

    def profile(frame, event, arg):
        is_on_complete = frame.f_code.co_name == "on_complete" and frame.f_code.co_filename.endswith(
            "delayed_fetch.py")
        if event == "call":
            inside["calls"] += inside["depth"] > 0
            inside["depth"] += is_on_complete
        elif event == "return":
            inside["depth"] -= is_on_complete

    sys.setprofile(profile)
    try:
        for _ in range(20):
            rounds.one_round()
    finally:
        sys.setprofile(None)
    assert inside["calls"] / 20 <= 250
