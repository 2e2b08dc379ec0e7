import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replog.log.config import LogConfig
from replog.log.errors import OffsetOutOfRangeError, RecordTooLargeError, UnexpectedAppendOffsetError
from replog.log.log_segments import LogSegments
from replog.log.offset_metadata import LogOffsetMetadata
from replog.log.partition_log import PartitionLog, TopicPartition
from replog.protocol.records import Compression, build_batch, iter_batches

SMALL = LogConfig(segment_bytes=500, index_interval_bytes=100, segment_index_bytes=4096)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def _open(path, config=SMALL, clock=None, clean=True, **kwargs) -> PartitionLog:
    return PartitionLog.open(
        path / "topic-a-3", config, clock_ms=clock or Clock(), clean_shutdown=clean, **kwargs
    )


def _batch(count=1, ts=1000, value=b"v" * 40, compression=Compression.NONE) -> memoryview:
    records = [(None, value, [], ts + i) for i in range(count)]
    return memoryview(bytearray(build_batch(records, compression=compression)))


def _fill(log, batches, count=2, epoch=0, ts=1000):
    return [log.append_as_leader(_batch(count, ts=ts + i * 10), leader_epoch=epoch) for i in range(batches)]


def _offsets(file_slice):
    return [(b.base_offset, b.last_offset) for b in iter_batches(file_slice.read_bytes())]


def test_names_and_topic_id(tmp_path):
    topic_id = uuid.uuid4()
    log = _open(tmp_path, topic_id=topic_id)
    assert log.topic_partition == TopicPartition("topic-a", 3)
    assert (
        tmp_path / "topic-a-3" / "partition.metadata"
    ).read_text() == f"version: 0\ntopic_id: {topic_id}\n"
    log.close()
    assert _open(tmp_path).topic_id == topic_id


def test_append_and_read_across_rolls(tmp_path):
    log = _open(tmp_path)
    infos = _fill(log, 30)
    assert [(i.first_offset, i.last_offset) for i in infos[:3]] == [(0, 1), (2, 3), (4, 5)]
    assert log.log_end_offset == 60
    assert len(log.segments) > 5
    seen = []
    offset = 0
    while offset < log.log_end_offset:
        result = log.read(offset, max_bytes=300, upper_bound=log.log_end_offset)
        batches = _offsets(result.slice)
        assert batches[0][0] <= offset <= batches[0][1]
        seen += batches
        offset = batches[-1][1] + 1
    assert seen == [(2 * i, 2 * i + 1) for i in range(30)]


def test_read_in_middle_of_batch_and_at_leo(tmp_path):
    log = _open(tmp_path)
    _fill(log, 3, count=4)
    result = log.read(5, max_bytes=10_000, upper_bound=12)
    assert _offsets(result.slice)[0] == (4, 7)
    end = log.read(12, max_bytes=10_000, upper_bound=12)
    assert end.slice is None
    assert end.fetch_offset_metadata.message_offset == 12
    assert end.log_end_offset == 12


def test_read_at_leo_after_rolls_starts_where_a_lookup_would(tmp_path):
    # The read at the LEO answers from the LEO's known position: it must be the one the index gives.
    log = _open(tmp_path)
    _fill(log, 30)
    assert len(log.segments) > 5
    end = log.read(log.log_end_offset, max_bytes=10_000, upper_bound=log.log_end_offset)
    assert end.slice is None
    assert end.fetch_offset_metadata == log.offset_metadata_of(log.log_end_offset)
    assert end.fetch_offset_metadata.segment_base_offset == log.active_segment.base_offset
    assert log.size_in_bytes == sum(segment.size for segment in log.segments)


def test_upper_bound_respected(tmp_path):
    log = _open(tmp_path)
    _fill(log, 5, count=2)
    assert _offsets(log.read(0, max_bytes=10_000, upper_bound=6).slice) == [(0, 1), (2, 3), (4, 5)]
    assert _offsets(log.read(0, max_bytes=10_000, upper_bound=5).slice) == [(0, 1), (2, 3)]
    assert log.read(4, max_bytes=10_000, upper_bound=5).slice is None
    assert log.read(4, max_bytes=10_000, upper_bound=4).slice is None


def test_min_one_batch(tmp_path):
    log = _open(tmp_path, config=LogConfig())
    _fill(log, 3)
    assert _offsets(log.read(0, max_bytes=1, upper_bound=6).slice) == [(0, 1)]
    assert log.read(0, max_bytes=1, upper_bound=6, min_one_batch=False).slice is None


def test_offset_out_of_range(tmp_path):
    log = _open(tmp_path)
    _fill(log, 2)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(5, max_bytes=100, upper_bound=4)
    log.update_high_watermark(4)
    log.maybe_increment_log_start_offset(2)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, max_bytes=100, upper_bound=4)
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(5)


def test_record_too_large(tmp_path):
    log = _open(tmp_path, config=LogConfig(max_message_bytes=200))
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(_batch(value=b"x" * 300), leader_epoch=0)
    assert log.log_end_offset == 0


def test_follower_append_keeps_offsets_and_epochs(tmp_path):
    leader = _open(tmp_path)
    _fill(leader, 3, epoch=1)
    _fill(leader, 2, epoch=4)
    follower = PartitionLog.open(tmp_path / "f-0", SMALL, clock_ms=Clock(), clean_shutdown=True)
    for _ in range(10):  # one segment per fetch, like a replica fetcher
        if follower.log_end_offset == leader.log_end_offset:
            break
        fetched = leader.read(follower.log_end_offset, max_bytes=1 << 20, upper_bound=10)
        follower.append_as_follower(memoryview(bytearray(fetched.slice.read_bytes())))
    assert follower.log_end_offset == leader.log_end_offset
    assert follower.epoch_cache.entries() == ((1, 0), (4, 6))
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(memoryview(bytearray(build_batch([(None, b"x", [], 0)], base_offset=3))))


def test_truncate_mid_segment_and_across_segments(tmp_path):
    log = _open(tmp_path)
    _fill(log, 10, epoch=0)
    _fill(log, 10, epoch=2)
    log.update_high_watermark(40)
    assert log.epoch_cache.entries() == ((0, 0), (2, 20))
    segments_before = len(log.segments)
    log.truncate_to(31)  # mid-batch 30-31
    assert log.log_end_offset == 30
    assert log.high_watermark == 30
    assert len(log.segments) < segments_before
    log.truncate_to(15)
    assert log.log_end_offset == 14
    assert log.epoch_cache.entries() == ((0, 0),)
    info = log.append_as_leader(_batch(2), leader_epoch=3)
    assert (info.first_offset, info.last_offset) == (14, 15)
    assert log.epoch_cache.entries() == ((0, 0), (3, 14))
    assert _offsets(log.read(12, max_bytes=10_000, upper_bound=16).slice) == [(12, 13), (14, 15)]
    _fill(log, 10)
    assert log.log_end_offset == 36


def test_truncating_at_the_leo_drops_an_epoch_that_starts_there_and_keeps_the_records(tmp_path):
    # A leader that took epoch 3 at offset 20 and appended nothing before it lost leadership.
    log = _open(tmp_path)
    _fill(log, 10, epoch=0)
    log.epoch_cache.assign(3, log.log_end_offset)
    assert log.truncate_to(log.log_end_offset) is False
    assert log.log_end_offset == 20
    assert log.epoch_cache.entries() == ((0, 0),)


def test_truncate_fully_and_start_at(tmp_path):
    log = _open(tmp_path)
    _fill(log, 10, epoch=1)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (100, 100, 100)
    assert log.epoch_cache.entries() == ()
    assert [s.base_offset for s in log.segments] == [100]
    info = log.append_as_leader(_batch(), leader_epoch=2)
    assert info.first_offset == 100
    with pytest.raises(OffsetOutOfRangeError):
        log.read(50, max_bytes=100, upper_bound=101)


def test_high_watermark_rules(tmp_path):
    log = _open(tmp_path)
    _fill(log, 5)
    assert log.update_high_watermark(100) == 10
    assert log.update_high_watermark(-5) == 0
    assert log.maybe_increment_high_watermark(4)
    assert not log.maybe_increment_high_watermark(3)
    assert log.high_watermark == 4
    with pytest.raises(AssertionError):
        log.maybe_increment_high_watermark(11)
    assert log.maybe_update_high_watermark(50)
    assert log.high_watermark == 10
    assert log.maybe_update_high_watermark(6)  # a follower follows the leader down too
    assert not log.maybe_update_high_watermark(6)


def test_retention_by_bytes_never_past_hw(tmp_path):
    log = _open(tmp_path, config=LogConfig(segment_bytes=500, retention_bytes=1000, retention_ms=-1))
    _fill(log, 40)
    segments = len(log.segments)
    assert log.delete_retention_segments() == 0  # HW is 0
    log.update_high_watermark(20)
    deleted = log.delete_retention_segments()
    assert deleted > 0
    assert 0 < log.log_start_offset <= 20  # no deleted segment reached past the HW
    assert log.log_start_offset == log.segments[0].base_offset
    log.update_high_watermark(80)
    log.delete_retention_segments()
    assert log.size_in_bytes - log.segments[0].size < 1000
    assert len(log.segments) < segments
    assert log.log_end_offset == 80


def test_retention_by_time_with_fake_clock(tmp_path):
    clock = Clock()
    log = _open(tmp_path, config=LogConfig(segment_bytes=500, retention_ms=1000), clock=clock)
    _fill(log, 10, ts=5000)
    _fill(log, 10, ts=9000)
    log.update_high_watermark(log.log_end_offset)
    clock.now = 5000 + 1000
    assert log.delete_retention_segments() == 0
    clock.now = 9000
    deleted = log.delete_retention_segments()
    assert deleted > 0
    assert all(s.max_timestamp_so_far >= 8000 for s in list(log.segments)[:-1])
    clock.now = 10**9
    log.delete_retention_segments()
    assert len(log.segments) == 1  # the active segment stays
    assert log.log_start_offset == log.segments[0].base_offset


def test_segment_ms_roll(tmp_path):
    clock = Clock()
    log = _open(tmp_path, config=LogConfig(segment_ms=1000), clock=clock)
    _fill(log, 3)
    clock.now += 1000
    _fill(log, 1)
    assert len(log.segments) == 1
    clock.now += 1
    _fill(log, 1)
    assert [s.base_offset for s in log.segments] == [0, 8]


def test_offset_for_timestamp(tmp_path):
    log = _open(tmp_path)
    for i in range(20):
        log.append_as_leader(_batch(3, ts=1000 + 10 * i, compression=Compression.GZIP), leader_epoch=0)
    assert log.offset_for_timestamp(0) == (0, 1000)
    assert log.offset_for_timestamp(1001) == (1, 1001)
    assert log.offset_for_timestamp(1003) == (3, 1010)
    assert log.offset_for_timestamp(1112) == (35, 1112)
    assert log.offset_for_timestamp(1193) is None


def test_offset_metadata_of_gives_batch_positions_whose_difference_is_the_bytes_between(tmp_path):
    log = _open(tmp_path, config=LogConfig())
    infos = _fill(log, 4)
    start = log.offset_metadata_of(1)
    assert start.relative_position == 0
    later = log.offset_metadata_of(6)
    assert later.position_diff(start) == 3 * infos[0].num_bytes
    assert log.offset_metadata_of(log.log_end_offset).position_diff(start) == 4 * infos[0].num_bytes
    rolled = _open(tmp_path / "x")
    _fill(rolled, 20)
    assert not rolled.offset_metadata_of(0).on_same_segment(rolled.offset_metadata_of(39))


def test_the_log_end_offset_position_follows_appends_rolls_and_truncation_without_lookups(tmp_path):
    log = _open(tmp_path)
    assert log.log_end_offset_metadata == LogOffsetMetadata(0, 0, 0)
    infos = _fill(log, 3)
    assert log.log_end_offset_metadata == LogOffsetMetadata(6, 0, 3 * infos[0].num_bytes)
    log.roll()
    assert log.log_end_offset_metadata == LogOffsetMetadata(6, 6, 0)
    _fill(log, 1)
    assert log.log_end_offset_metadata == LogOffsetMetadata(8, 6, infos[0].num_bytes)
    log.truncate_to(4)
    assert log.log_end_offset_metadata == LogOffsetMetadata(4, 0, 2 * infos[0].num_bytes)
    log.truncate_fully_and_start_at(50)
    assert log.log_end_offset_metadata == LogOffsetMetadata(50, 50, 0)


def test_the_high_watermark_keeps_a_known_position_and_a_read_converts_an_unknown_one(tmp_path):
    log = _open(tmp_path, config=LogConfig())
    _fill(log, 3)
    log.maybe_increment_high_watermark(2)  # nobody said where offset 2 is
    assert log.high_watermark_metadata == LogOffsetMetadata(2)
    log.read(0, max_bytes=1 << 20, upper_bound=log.high_watermark)
    assert log.high_watermark_metadata == log.offset_metadata_of(2)
    log.maybe_increment_high_watermark(4, log.offset_metadata_of(4))  # a follower fetched from there
    assert log.high_watermark_metadata == log.offset_metadata_of(4)
    log.maybe_increment_high_watermark(6)  # the LEO: the log knows where that is
    assert log.high_watermark_metadata == log.log_end_offset_metadata
    log.truncate_to(4)
    assert log.high_watermark_metadata == log.log_end_offset_metadata == log.offset_metadata_of(4)
    log.update_high_watermark(2)
    assert log.high_watermark_metadata.message_offset_only


def test_flush_ticket_moves_recovery_point(tmp_path):
    log = _open(tmp_path)
    _fill(log, 10)
    ticket = log.prepare_flush()
    assert ticket.files
    _fill(log, 1)
    ticket.fsync()
    assert log.complete_flush(ticket)
    assert log.recovery_point == 20
    stale = log.prepare_flush()
    log.truncate_to(10)
    stale.fsync()
    assert not log.complete_flush(stale)
    assert log.recovery_point == 10


def test_reads_survive_segment_deletion(tmp_path):
    log = _open(tmp_path)
    _fill(log, 20)
    result = log.read(0, max_bytes=10_000, upper_bound=40)
    log.update_high_watermark(40)
    log.maybe_increment_log_start_offset(30)
    log.delete_retention_segments()
    assert log.segments[0].base_offset > 0
    assert _offsets(result.slice)[0] == (0, 1)


@st.composite
def _operations(draw):
    return draw(
        st.lists(
            st.one_of(
                st.tuples(st.just("append"), st.integers(1, 5), st.integers(1, 3)),
                st.tuples(st.just("truncate"), st.floats(0, 1)),
                st.tuples(st.just("roll")),
                st.tuples(st.just("reopen"), st.booleans()),
            ),
            max_size=25,
        )
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_operations())
def test_model_property(tmp_path_factory, ops):
    path = tmp_path_factory.mktemp("model")
    clock = Clock()
    log = _open(path, clock=clock)
    model: list[tuple[int, int]] = []  # (first, last) offsets of each batch
    for op in ops:
        if op[0] == "append":
            for _ in range(op[2]):
                info = log.append_as_leader(_batch(op[1]), leader_epoch=0)
                first = model[-1][1] + 1 if model else 0
                assert (info.first_offset, info.last_offset) == (first, first + op[1] - 1)
                model.append((first, first + op[1] - 1))
        elif op[0] == "truncate":
            target = int(op[1] * (log.log_end_offset + 1))
            log.truncate_to(target)
            model = [b for b in model if b[1] < target]
        elif op[0] == "roll":
            log.roll()
        else:
            if op[1]:  # clean restart; otherwise the old log is simply abandoned, as in a crash
                log.close()
            log = _open(path, clock=clock, clean=op[1], recovery_point=log.recovery_point)
        assert log.log_end_offset == (model[-1][1] + 1 if model else 0)
        assert log.log_end_offset_metadata == log.offset_metadata_of(log.log_end_offset)  # kept, not looked up
    if model:
        result = log.read(0, max_bytes=1 << 20, upper_bound=log.log_end_offset)
        got = []
        for _ in range(len(log.segments) + 1):
            got += _offsets(result.slice)
            if got[-1][1] + 1 >= log.log_end_offset:
                break
            result = log.read(got[-1][1] + 1, max_bytes=1 << 20, upper_bound=log.log_end_offset)
        assert got == model
        assert all(s.base_offset < s.next_offset for s in list(log.segments)[:-1])


def test_offset_of_max_timestamp_finds_the_exact_record(tmp_path):
    log = _open(tmp_path / "t-0")
    records = [(None, b"a", [], 1000), (None, b"b", [], 5000), (None, b"c", [], 3000)]
    log.append_as_leader(memoryview(bytearray(build_batch(records))), leader_epoch=0)
    log.append_as_leader(_batch(count=2, ts=2000), leader_epoch=0)
    assert log.offset_of_max_timestamp() == (1, 5000)


def test_offset_of_max_timestamp_of_an_empty_log(tmp_path):
    assert _open(tmp_path / "t-0").offset_of_max_timestamp() is None


def test_a_read_at_the_high_watermark_below_the_leo_starts_at_its_known_position_without_a_lookup(tmp_path,
                                                                                                   monkeypatch):
    # A consumer caught up while the followers fetch the latest append: nothing to read below the HW, and where
    # its next read starts is the HW's position, which the log keeps; an index lookup would find the same.
    log = _open(tmp_path)
    _fill(log, 30)
    log.maybe_increment_high_watermark(40, log.offset_metadata_of(40))
    lookups = []
    lookup = LogSegments.offset_metadata_of
    monkeypatch.setattr(LogSegments, "offset_metadata_of",
                        lambda segments, offset: lookups.append(offset) or lookup(segments, offset))
    at_hw = log.read(40, max_bytes=10_000, upper_bound=log.high_watermark)
    assert at_hw.slice is None
    assert lookups == []
    assert at_hw.fetch_offset_metadata == log.offset_metadata_of(40)
    below = log.read(38, max_bytes=10_000, upper_bound=38)  # not the HW: looked up
    assert below.slice is None and below.fetch_offset_metadata == log.offset_metadata_of(38)
    assert lookups == [40, 38, 38]


@pytest.fixture
def segment_searches(monkeypatch):
    """The offsets PartitionLog.read searched the sorted segments for."""
    searched = []
    search = LogSegments.from_offset
    monkeypatch.setattr(LogSegments, "from_offset",
                        lambda segments, offset: searched.append(offset) or search(segments, offset))
    return searched


def _the_batches_from(segment, offset):
    """(position, length) of what the segment holding `offset` returns from it: the read a search would make."""
    found = segment.read(offset, 10_000)
    return None if found is None else (found.position, found.length)


def test_a_read_in_the_active_segment_reads_it_without_a_search_from_any_offset_in_it(tmp_path, segment_searches):
    # Not only the previous LEO (a woken follower's fetch): any offset, mid-batch too, finds what a search would.
    log = _open(tmp_path)
    _fill(log, 30, count=3)
    active = log.active_segment
    assert len(log.segments) > 5 and active.next_offset - active.base_offset >= 6
    for offset in range(active.base_offset, log.log_end_offset):
        result = log.read(offset, max_bytes=10_000, upper_bound=log.log_end_offset)
        assert segment_searches == []
        assert (result.slice.position, result.slice.length) == _the_batches_from(active, offset)
        assert result.fetch_offset_metadata == log.offset_metadata_of(offset)  # a lookup: searches
        segment_searches.clear()


def test_a_read_below_the_active_segment_after_a_roll_searches_and_reads_the_sealed_segment_only(
        tmp_path, segment_searches):
    # A fetch parked at the LEO, then a roll and an append: its offset is now the new segment's base, read
    # without a search; an offset of the sealed segment is read from that segment, to its end (one segment).
    log = _open(tmp_path, config=LogConfig(segment_bytes=1 << 20))
    _fill(log, 4)
    parked_at = log.log_end_offset
    log.roll()
    _fill(log, 2)
    woken = log.read(parked_at, max_bytes=10_000, upper_bound=log.log_end_offset)
    assert _offsets(woken.slice) == [(8, 9), (10, 11)]
    assert woken.fetch_offset_metadata == LogOffsetMetadata(8, 8, 0)
    assert segment_searches == []
    behind = log.read(5, max_bytes=10_000, upper_bound=log.log_end_offset)
    assert _offsets(behind.slice) == [(4, 5), (6, 7)]
    assert segment_searches == [5]


def test_a_read_in_the_active_segment_still_checks_the_log_start_and_the_upper_bound(tmp_path):
    log = _open(tmp_path, config=LogConfig(segment_bytes=1 << 20))
    _fill(log, 5)  # (0, 1) ... (8, 9), one segment
    log.update_high_watermark(6)
    consumer = log.read(2, max_bytes=10_000, upper_bound=log.high_watermark)
    assert _offsets(consumer.slice) == [(2, 3), (4, 5)]  # nothing at or past the HW
    assert log.read(6, max_bytes=10_000, upper_bound=log.high_watermark).slice is None
    log.maybe_increment_log_start_offset(4)  # DeleteRecords, inside the active segment
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, max_bytes=10_000, upper_bound=log.log_end_offset)
    assert _offsets(log.read(4, max_bytes=10_000, upper_bound=log.high_watermark).slice) == [(4, 5)]


def test_a_read_in_the_active_segment_after_a_truncation_and_refill_finds_the_new_batches(tmp_path):
    log = _open(tmp_path, config=LogConfig(segment_bytes=1 << 20))
    _fill(log, 5, count=2)
    log.truncate_to(4)
    _fill(log, 2, count=3)  # (4, 6), (7, 9): other batch boundaries where (4, 5) ... (8, 9) were
    assert _offsets(log.read(8, max_bytes=10_000, upper_bound=log.log_end_offset).slice) == [(7, 9)]
    assert _offsets(log.read(5, max_bytes=10_000, upper_bound=log.log_end_offset).slice) == [(4, 6), (7, 9)]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(11, max_bytes=10_000, upper_bound=log.log_end_offset)


def test_a_read_in_a_gap_of_the_active_segment_starts_at_the_next_batch(tmp_path, segment_searches):
    # A follower's copy of a compacted log has offsets missing: a read there returns the batch after the gap.
    log = _open(tmp_path, config=LogConfig(segment_bytes=1 << 20))
    for base in (0, 5):
        log.append_as_follower(memoryview(bytearray(
            build_batch([(b"k", b"v", [], 1000), (b"k", b"w", [], 1001)], base_offset=base, partition_leader_epoch=0))))
    result = log.read(3, max_bytes=10_000, upper_bound=log.log_end_offset)
    assert _offsets(result.slice) == [(5, 6)]
    assert result.fetch_offset_metadata.message_offset == 3
    assert segment_searches == []
