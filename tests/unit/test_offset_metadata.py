"""LogOffsetMetadata: an offset with its batch's place in the log, compared without I/O."""

import pytest

from replog.log.offset_metadata import LogOffsetMetadata


def test_an_offset_alone_is_message_offset_only():
    assert LogOffsetMetadata(7).message_offset_only
    assert not LogOffsetMetadata(7, 0, 120).message_offset_only


def test_position_diff_is_the_bytes_between_two_offsets_on_one_segment():
    start, end = LogOffsetMetadata(3, 0, 100), LogOffsetMetadata(9, 0, 460)
    assert end.position_diff(start) == 360
    assert start.position_diff(end) == -360
    assert start.on_same_segment(end)
    assert not start.on_older_segment(end)


def test_segments_order_by_base_offset():
    older, newer = LogOffsetMetadata(15, 0, 900), LogOffsetMetadata(25, 20, 40)
    assert older.on_older_segment(newer)
    assert not newer.on_older_segment(older)
    assert not older.on_same_segment(newer)


def test_across_segments_there_is_no_position_diff():
    with pytest.raises(AssertionError):
        LogOffsetMetadata(25, 20, 40).position_diff(LogOffsetMetadata(15, 0, 900))


@pytest.mark.parametrize("compare", [LogOffsetMetadata.on_same_segment, LogOffsetMetadata.on_older_segment,
                                     LogOffsetMetadata.position_diff])
def test_comparing_an_unknown_position_is_refused(compare):
    known, unknown = LogOffsetMetadata(3, 0, 100), LogOffsetMetadata(9)
    with pytest.raises(AssertionError):
        compare(known, unknown)
    with pytest.raises(AssertionError):
        compare(unknown, known)


@pytest.mark.parametrize("fields", [(-1, 0, 0), (5, 0, -1), (5, -1, 0), (5, 6, 0)],
                         ids=["negative offset", "segment without position", "position without segment",
                              "segment starting after the offset"])
def test_inconsistent_metadata_is_refused(fields):
    with pytest.raises(AssertionError):
        LogOffsetMetadata(*fields)
