"""The parts of PartitionLog that remove data: truncation (a follower's divergence, a full restart at an
offset), retention, the swap of a cleaned segment, and moving the log start up (DeleteRecords). Kafka keeps
these in LocalLog and UnifiedLog; here partition_log.py mixes them in.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from replog.log import segment_swap
from replog.log.config import LogConfig
from replog.log.dir_failure import disk_io
from replog.log.epoch_cache import LeaderEpochCache
from replog.log.errors import OffsetOutOfRangeError
from replog.log.flush import RecoveryPoint
from replog.log.log_loader import rebuild_producer_state
from replog.log.log_segments import LogSegments
from replog.log.offset_metadata import LogOffsetMetadata
from replog.log.producer_state import ProducerStateManager
from replog.log.retention import segments_past_retention
from replog.log.segment import LogSegment
from replog.log.segment_files import SegmentFileOps


class LogTruncation:
    """Mixed into PartitionLog, which sets these attributes and provides the offsets (log_end_offset,
    high_watermark, active_segment), _open_segment, _update_log_end_offset and _set_high_watermark, and
    _changed, called when the log start offset or the size moves other than through those two."""

    directory: Path
    _config: LogConfig
    _clock_ms: Callable[[], int]
    _file_ops: SegmentFileOps
    _segments: LogSegments
    _epoch_cache: LeaderEpochCache
    _producer_state: ProducerStateManager
    _log_start_offset: int
    _high_watermark_metadata: LogOffsetMetadata
    _recovery_point: RecoveryPoint
    truncations: int
    truncated_to_since_cleaning: int | None
    _changed: Callable[[], None]

        # --------------------------------------------------------------- truncate

    @disk_io
    def truncate_to(self, offset: int) -> bool:
        """Remove every offset >= `offset`. A batch straddling it goes whole, so
        the LEO may land below `offset`. Returns whether anything was removed."""
        assert offset >= 0
        self._note_truncation(offset)
        if offset >= self.log_end_offset:
            # No record goes, but an epoch entry may start at the LEO: this broker led an epoch in which it
            # appended nothing before another leader took over. Left in place, the stale epoch makes the new
            # leader answer every fetch with a divergence at our LEO, forever (Kafka's UnifiedLog.truncateTo
            # drops it the same way).
            self._epoch_cache.truncate_from_end(self.log_end_offset)
            return False
        if offset <= self._segments.first.base_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        while self._segments.active.base_offset >= offset:
            self._segments.remove(self._segments.active.base_offset).delete()
        active = self.active_segment
        active.truncate_to(offset)
        active.resize_indexes(self._config.segment_index_bytes)
        self._update_log_end_offset(active.next_offset)
        self._log_start_offset = min(self._log_start_offset, self.log_end_offset)
        if self.high_watermark >= self.log_end_offset:
            self._set_high_watermark(self.log_end_offset)
        self._recovery_point.truncate_to(self.log_end_offset)
        self._epoch_cache.truncate_from_end(self.log_end_offset)
        # Rebuilt from what is left, not cut back: a producer whose retained batches all went still has its
        # earlier ones in the log, and its retry of one of those must be a duplicate, not an out-of-order
        # sequence (Kafka's UnifiedLog.truncateTo reloads producer state from the log the same way).
        self._producer_state.clear()
        rebuild_producer_state(self._segments, self._producer_state)
        assert self.log_end_offset <= offset
        return True

    @disk_io
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop all data; the log restarts empty at `offset`."""
        assert offset >= 0
        self._note_truncation(offset)
        for segment in self._segments:
            segment.delete()
        self._segments.clear()
        self._segments.add(self._open_segment(offset))
        self._update_log_end_offset(offset)
        self._log_start_offset = offset
        self._set_high_watermark(offset)
        self._recovery_point.reset_to(offset)
        self._epoch_cache.clear()
        self._producer_state.clear()

    # -------------------------------------------------------------- retention

    @disk_io
    def delete_retention_segments(self) -> int:
        """Delete leading segments past retention.ms / retention.bytes or below
        the log start offset; never the active one nor any reaching the HW."""
        deletable = segments_past_retention(
            self._segments.values(), now_ms=self._clock_ms(), config=self._config,
            high_watermark=self.high_watermark, log_start_offset=self._log_start_offset)
        for segment in deletable:
            self._segments.remove(segment.base_offset).delete()
        if deletable:
            self._log_start_offset = max(self._log_start_offset, self._segments.first.base_offset)
            self._epoch_cache.truncate_from_start(self._log_start_offset)
            self._changed()
        assert self._segments
        return len(deletable)

    # ------------------------------------------------------------- compaction

    def _note_truncation(self, offset: int) -> None:
        self.truncations += 1
        if self.truncated_to_since_cleaning is None or offset < self.truncated_to_since_cleaning:
            self.truncated_to_since_cleaning = offset

    @disk_io
    def replace_segments(self, cleaned_base: int, old: list[LogSegment]) -> LogSegment:
        """Swap the cleaned segment `<cleaned_base>.log.cleaned` in for the sealed segments `old` (Kafka's
        LocalLog.replaceSegments), on the event loop: reads before and after see a whole log. The old files
        are unlinked, not closed, so a fetch still sending from one of them completes."""
        assert old and old[0].base_offset == cleaned_base, (cleaned_base, old)
        assert all(self._segments.get(segment.base_offset) is segment for segment in old), old
        assert old[-1] is not self.active_segment
        segment_swap.commit_cleaned(self.directory, cleaned_base, self._file_ops)
        for segment in old:
            self._segments.remove(segment.base_offset).delete()
        segment_swap.finish_swap(self.directory, cleaned_base, self._file_ops)
        cleaned = self._open_segment(cleaned_base)
        self._segments.insert(cleaned)
        replaced = {segment.base_offset for segment in old}
        if self._high_watermark_metadata.segment_base_offset in replaced:
            # The HW sat at the end of a segment cleaned since (the active one when the HW reached it): its
            # position is stale; the next read looks it up again.
            self._high_watermark_metadata = LogOffsetMetadata(self.high_watermark)
        self._changed()  # the size
        return cleaned

    @disk_io
    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """DeleteRecords / follower sync: move the log start up, never past the HW."""
        if offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"{self.topic_partition}: log start {offset} would pass the high watermark {self.high_watermark}"
            )
        if offset <= self._log_start_offset:
            return False
        self._log_start_offset = offset
        self._epoch_cache.truncate_from_start(offset)
        self._changed()
        return True
