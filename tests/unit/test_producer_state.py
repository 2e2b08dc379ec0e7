import pytest

from replog.log.config import LogConfig
from replog.log.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from replog.log.partition_log import PartitionLog
from replog.log.producer_state import ProducerStateManager
from replog.protocol.records import build_batch, iter_batches

PID = 1000


def _batch(seq: int, count: int = 2, epoch: int = 0, pid: int = PID) -> bytearray:
    records = [(None, b"s%d" % (seq + i), [], 1000 + seq) for i in range(count)]
    return bytearray(build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq))


def _open(path, clean=True) -> PartitionLog:
    return PartitionLog.open(
        path / "t-0", LogConfig(segment_bytes=400), clock_ms=lambda: 0, clean_shutdown=clean
    )


def _append(log, data):
    return log.append_as_leader(memoryview(data), leader_epoch=0)


def test_each_of_last_five_duplicates_gets_original_offsets(tmp_path):
    log = _open(tmp_path)
    log.append_as_leader(memoryview(bytearray(build_batch([(None, b"x", [], 1)]))), leader_epoch=0)
    originals = [_append(log, _batch(seq)) for seq in range(0, 12, 2)]
    leo = log.log_end_offset
    for seq, original in zip(range(2, 12, 2), originals[1:], strict=True):
        retry = _append(log, _batch(seq))
        assert retry.duplicate
        assert (retry.first_offset, retry.last_offset) == (original.first_offset, original.last_offset)
        assert retry.num_batches == 0
    assert log.log_end_offset == leo
    with pytest.raises(OutOfOrderSequenceError):  # 6th-oldest: no longer retained
        _append(log, _batch(0))


def test_gap_rejected_and_next_accepted(tmp_path):
    log = _open(tmp_path)
    _append(log, _batch(0))
    with pytest.raises(OutOfOrderSequenceError):
        _append(log, _batch(3))
    assert not _append(log, _batch(2)).duplicate


def test_an_unknown_producer_goes_on_at_any_sequence_then_must_follow_it(tmp_path):
    """KIP-360: no state (retention took its batches) is not an error; the state starts from this batch."""
    log = _open(tmp_path)
    _append(log, _batch(5))  # sequences 5 and 6
    assert log.log_end_offset == 2
    with pytest.raises(OutOfOrderSequenceError):
        _append(log, _batch(9))
    _append(log, _batch(7))
    assert log.log_end_offset == 4


def test_epoch_rules(tmp_path):
    log = _open(tmp_path)
    _append(log, _batch(0, epoch=1))
    _append(log, _batch(2, epoch=1))
    with pytest.raises(InvalidProducerEpochError):
        _append(log, _batch(4, epoch=0))
    with pytest.raises(OutOfOrderSequenceError):
        _append(log, _batch(4, epoch=2))  # a new epoch restarts at 0
    _append(log, _batch(0, epoch=2))
    with pytest.raises(InvalidProducerEpochError):
        _append(log, _batch(2, epoch=1))


def test_no_producer_id_skips_checks(tmp_path):
    log = _open(tmp_path)
    data = build_batch([(None, b"a", [], 1)])
    assert not _append(log, bytearray(data)).duplicate
    assert not _append(log, bytearray(data)).duplicate
    assert log.log_end_offset == 2


def test_multi_batch_request_checked_in_order(tmp_path):
    log = _open(tmp_path)
    info = _append(log, _batch(0) + _batch(2) + _batch(4))
    assert (info.first_offset, info.last_offset, info.num_batches) == (0, 5, 3)
    with pytest.raises(OutOfOrderSequenceError):
        _append(log, _batch(6) + _batch(9))
    assert log.log_end_offset == 6


def test_sequence_wraps(tmp_path):
    manager = ProducerStateManager()
    [first] = iter_batches(_batch(2**31 - 2, count=2))
    first.stamp(base_offset=0, partition_leader_epoch=0)
    manager.record(first.header)
    [wrapped] = iter_batches(_batch(0, count=1))
    assert manager.check_append([wrapped.header]) is None


def test_follower_records_without_rejection(tmp_path):
    leader = _open(tmp_path)
    _append(leader, _batch(0))
    _append(leader, _batch(2))
    follower = PartitionLog.open(tmp_path / "f-0", LogConfig(), clock_ms=lambda: 0, clean_shutdown=True)
    data = leader.read(0, max_bytes=1 << 20, upper_bound=leader.log_end_offset).slice.read_bytes()
    follower.append_as_follower(memoryview(bytearray(data)))
    assert follower.producer_state.entry(PID).last_seq == 3
    assert _append(follower, _batch(2)).duplicate


def test_rebuilt_after_reopen_and_truncate(tmp_path):
    log = _open(tmp_path)
    infos = [_append(log, _batch(seq)) for seq in range(0, 8, 2)]
    log.close()
    for clean in (True, False):
        reopened = _open(tmp_path, clean=clean)
        retry = _append(reopened, _batch(6))
        assert retry.duplicate
        assert retry.first_offset == infos[-1].first_offset
        reopened.close()
    log = _open(tmp_path)
    log.truncate_to(infos[2].first_offset)
    assert _append(log, _batch(4)).first_offset == infos[2].first_offset  # seq 4 is new again


def test_expiry_bounds_the_map():
    manager = ProducerStateManager()
    for pid in range(3):
        [batch] = iter_batches(_batch(0, pid=pid))
        manager.record(batch.header)
    assert len(manager) == 3
    assert manager.remove_expired(now_ms=1000 + 10, expiration_ms=5) == 3
    assert len(manager) == 0


def _retained(log: PartitionLog) -> dict[int, tuple[int, list[tuple[int, int, int, int]]]]:
    """Every producer's epoch and retained batches (first seq, last seq, first offset, last offset)."""
    state = log.producer_state
    return {pid: (entry.epoch, [(b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in entry.batches])
            for pid in (PID, PID + 1) if (entry := state.entry(pid)) is not None}


@pytest.mark.parametrize("kept_batches", [0, 1, 4, 6, 9, 11, 14, 20, 25])
def test_truncation_leaves_the_producer_state_a_reopen_of_the_truncated_log_would(tmp_path, kept_batches):
    """Kafka's UnifiedLog.truncateTo reloads producer state from the log (truncateAndReload): a producer
    whose retained batches are all truncated away is still known by the batches it has left, so its retry
    of one of those is a duplicate, not OUT_OF_ORDER_SEQUENCE_NUMBER (fatal to librdkafka at the head of
    its queue), and the window it had before the truncated batches came back."""
    log = _open_named(tmp_path, "t-0")
    # Ten batches of PID, then two producers taking turns: eight of PID + 1, eight more of PID.
    turns = [PID] * 10 + [PID + 1, PID] * 8
    next_seq = dict.fromkeys(turns, 0)
    infos = []
    for pid in turns:
        infos.append(_append(log, _batch(next_seq[pid], pid=pid)))
        next_seq[pid] += 2
    log.truncate_to(infos[kept_batches].first_offset)
    truncated = _retained(log)
    log.close()
    assert truncated == _retained(_open_named(tmp_path, "t-0"))


def test_a_retry_of_a_batch_below_the_truncation_is_still_a_duplicate(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), clock_ms=lambda: 0, clean_shutdown=True)
    infos = [_append(log, _batch(seq)) for seq in range(0, 14, 2)]  # 7 batches: the first 2 left the window
    log.truncate_to(infos[2].first_offset)  # the 5 retained ones go
    retry = _append(log, _batch(2))
    assert retry.duplicate
    assert (retry.first_offset, retry.last_offset) == (infos[1].first_offset, infos[1].last_offset)
    assert _append(log, _batch(4)).first_offset == infos[2].first_offset


def _open_named(path, name: str) -> PartitionLog:
    return PartitionLog.open(path / name, LogConfig(), clock_ms=lambda: 0, clean_shutdown=True)
