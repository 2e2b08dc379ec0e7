"""RecoveryPoint: a flush ticket moves the recovery point forward only, and never across a truncation."""

from replog.log.flush import FlushTicket, RecoveryPoint
from replog.log.log_segments import LogSegments
from replog.log.segment_files import OS_FILE_OPS


def ticket(recovery_point: RecoveryPoint, offset: int, tmp_path) -> FlushTicket:
    """A ticket up to `offset`, as the log prepares one (no segment files: nothing to fsync here)."""
    return recovery_point.prepare(LogSegments(), offset, tmp_path, OS_FILE_OPS)


def test_a_completed_flush_moves_the_recovery_point_forward_only(tmp_path):
    recovery_point = RecoveryPoint(10)
    assert recovery_point.complete(ticket(recovery_point, 20, tmp_path), log_end_offset=30)
    assert recovery_point.offset == 20
    assert not recovery_point.complete(ticket(recovery_point, 15, tmp_path), log_end_offset=30)
    assert recovery_point.offset == 20


def test_a_ticket_prepared_before_a_truncation_is_ignored(tmp_path):
    recovery_point = RecoveryPoint(10)
    stale = ticket(recovery_point, 30, tmp_path)
    recovery_point.truncate_to(5)
    assert recovery_point.offset == 5
    assert not recovery_point.complete(stale, log_end_offset=30)
    assert recovery_point.offset == 5


def test_a_ticket_prepared_before_the_log_was_emptied_is_ignored(tmp_path):
    recovery_point = RecoveryPoint(10)
    stale = ticket(recovery_point, 30, tmp_path)
    recovery_point.reset_to(100)
    assert recovery_point.offset == 100
    assert not recovery_point.complete(stale, log_end_offset=100)
