"""One partition's log: append, read, roll, truncate and retention, and its offsets (log start, high
watermark, log end, each end with its position in the log).

Plays the part of Kafka's LocalLog + UnifiedLog; the parts with a job of their own live beside it:
log_segments (the sorted segments), log_loader (opening and recovery), append_validation, retention (which
segments go), flush (flush tickets and the recovery point), timestamp_search, partition_metadata_file,
partition_log_truncation (truncation, retention, the cleaned-segment swap and the log start, mixed in).
Not thread-safe: every method runs on the event loop thread, except FlushTicket.fsync, which only touches
file objects it holds references to. The log cleaner's thread (cleaner.py) reads sealed segments it was
handed, through their open files only; the swap of its result (replace_segments) runs on the loop.
"""
from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from replog.log import timestamp_search
from replog.log.append_info import AppendInfo
from replog.log.append_validation import (
    assign_offsets,
    check_follower_offsets,
    check_keys_for_compaction,
    validate_batches,
)
from replog.log.config import LogConfig
from replog.log.dir_failure import LogDirFailureChannel, disk_io
from replog.log.epoch_cache import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from replog.log.errors import OffsetOutOfRangeError
from replog.log.file_budget import FileBudget
from replog.log.flush import FlushTicket, RecoveryPoint
from replog.log.log_loader import load_segments, rebuild_producer_state, recover_segments
from replog.log.log_segments import LogSegments
from replog.log.offset_metadata import LogOffsetMetadata
from replog.log.partition_log_truncation import LogTruncation
from replog.log.partition_metadata_file import PartitionMetadataFile
from replog.log.producer_state import ProducerStateManager
from replog.log.segment import LogSegment
from replog.log.segment_files import OS_FILE_OPS, FileSlice, SegmentFileOps
from replog.protocol.records import BatchHeader, RecordBatch


class TopicPartition(NamedTuple):
    topic: str
    partition: int


def parse_topic_partition(directory: Path) -> TopicPartition:
    """`<topic>-<partition>`; topic names may themselves contain '-'."""
    topic, sep, partition = Path(directory).name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(f"{directory} is not named <topic>-<partition>")
    return TopicPartition(topic, int(partition))


@dataclass(frozen=True, slots=True)
class LogReadResult:
    slice: FileSlice | None
    # Where the batch holding the fetch offset starts: a delayed fetch measures new data from here.
    fetch_offset_metadata: LogOffsetMetadata
    log_end_offset: int
    high_watermark: int
    log_start_offset: int


class PartitionLog(LogTruncation):
    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        clock_ms: Callable[[], int],
        topic_id: uuid.UUID | None,
        failure_channel: LogDirFailureChannel | None = None,
        file_ops: SegmentFileOps = OS_FILE_OPS,
    ) -> None:
        self.directory = Path(directory)
        self.log_dir = self.directory.parent
        self._failure_channel = failure_channel
        self._file_ops = file_ops
        self.topic_partition = parse_topic_partition(self.directory)
        self._config = config
        self._clock_ms = clock_ms
        self._topic_id = topic_id
        self._segments = LogSegments()
        self._epoch_cache = LeaderEpochCache(self.directory / LEADER_EPOCH_CHECKPOINT)
        self._producer_state = ProducerStateManager()
        # The LEO and the HW with their positions in the log (Kafka's nextOffsetMetadata and
        # highWatermarkMetadata): a delayed fetch measures new data from them without I/O.
        self._log_end_offset_metadata = LogOffsetMetadata(0)
        self._log_start_offset = 0
        self._high_watermark_metadata = LogOffsetMetadata(0)
        self._recovery_point = RecoveryPoint(0)
        self._file_budget: FileBudget | None = None
        # Bumped by every truncation: the log cleaner gives up a cleaning that a truncation overtook.
        self.truncations = 0
        # The lowest offset truncated to since the log cleaner last looked: its checkpoint (the first dirty
        # offset) must not stay above it (Kafka's LogCleaner.maybeTruncateCheckpoint).
        self.truncated_to_since_cleaning: int | None = None
        # Called, without arguments, whenever a figure the log reports may have changed: LEO, HW, log start
        # offset or size. The broker's metrics dump re-encodes only the partitions it was told of.
        self.change_listener: Callable[[], None] | None = None

    def _changed(self) -> None:
        if self.change_listener is not None:
            self.change_listener()

    # ---------------------------------------------------------------- loading

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        clock_ms: Callable[[], int],
        recovery_point: int = 0,
        clean_shutdown: bool,
        topic_id: uuid.UUID | None = None,
        log_start_offset: int = 0,
        failure_channel: LogDirFailureChannel | None = None,
        file_ops: SegmentFileOps = OS_FILE_OPS,
        sync_metadata: bool = True,
    ) -> PartitionLog:
        """`sync_metadata=False`: a new log's partition.metadata is not fsynced; the caller syncs the file
        system before the log is used (LogManager.sync_new_logs)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        topic_id = PartitionMetadataFile(directory).reconcile(topic_id, durable=sync_metadata)
        log = cls(directory, config, clock_ms, topic_id, failure_channel, file_ops)
        for segment in load_segments(directory, log._open_segment, max_message_bytes=config.max_message_bytes,
                                     file_ops=file_ops):
            log._segments.add(segment)
        if not log._segments:
            log._segments.add(log._open_segment(log_start_offset))
        recover_segments(log._segments, recovery_point=recovery_point, clean_shutdown=clean_shutdown,
                         max_message_bytes=config.max_message_bytes, on_batch=log._assign_epoch_from)
        log._finish_load(recovery_point, log_start_offset)
        return log

    def _open_segment(self, base_offset: int, file_suffix: str = "") -> LogSegment:
        segment = LogSegment(
            self.directory,
            base_offset,
            index_interval_bytes=self._config.index_interval_bytes,
            max_index_bytes=self._config.segment_index_bytes,
            created_ms=self._clock_ms(),
            writeback_interval_bytes=self._config.writeback_interval_bytes,
            file_ops=self._file_ops,
            file_suffix=file_suffix,
        )
        if self._file_budget is not None:
            segment.attach_file_budget(self._file_budget)
        return segment

    def attach_file_budget(self, budget: FileBudget) -> None:
        """Charge every segment's descriptors to the broker's budget, now and as segments roll; on the event
        loop thread (a log opened in a worker thread is attached when the LogManager adopts it)."""
        self._file_budget = budget
        for segment in self._segments:
            segment.attach_file_budget(budget)

    def release_file_handles(self) -> None:
        """Close every segment's descriptors until the next use: a new, empty log costs none while idle."""
        for segment in self._segments:
            segment.release_file_handles()

    def _finish_load(self, recovery_point: int, log_start_offset: int) -> None:
        active = self.active_segment
        active.resize_indexes(self._config.segment_index_bytes)
        self._update_log_end_offset(active.next_offset)
        first_base = self._segments.first.base_offset
        self._log_start_offset = min(max(log_start_offset, first_base), self.log_end_offset)
        self._set_high_watermark(self._log_start_offset)
        self._recovery_point = RecoveryPoint(min(max(recovery_point, self._log_start_offset), self.log_end_offset))
        self._epoch_cache.truncate_from_end(self.log_end_offset)
        self._epoch_cache.truncate_from_start(self._log_start_offset)
        rebuild_producer_state(self._segments, self._producer_state)

    # ------------------------------------------------------------ disk faults

    @property
    def is_offline(self) -> bool:
        return self._failure_channel is not None and self._failure_channel.is_offline(self.log_dir)

    def report_disk_failure(self, error: OSError) -> None:
        """An I/O operation on this log (here or in a caller, such as an epoch checkpoint write) failed."""
        if self._failure_channel is not None:
            self._failure_channel.report(self.log_dir, error)

    # ------------------------------------------------------------- properties

    @property
    def config(self) -> LogConfig:
        return self._config

    def update_config(self, config: LogConfig) -> None:
        """New settings apply to later rolls, retention passes and appends."""
        self._config = config
        self.active_segment.index_interval_bytes = config.index_interval_bytes

    @property
    def topic_id(self) -> uuid.UUID | None:
        return self._topic_id

    @disk_io
    def assign_topic_id(self, topic_id: uuid.UUID) -> None:
        self._topic_id = PartitionMetadataFile(self.directory).reconcile(topic_id)

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset_metadata.message_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        return self._log_end_offset_metadata

    def _update_log_end_offset(self, offset: int) -> None:
        """The LEO sits at the end of the active segment, where the next batch goes: its position is known
        without I/O after every append, roll and truncation (Kafka's LocalLog.updateLogEndOffset)."""
        active = self.active_segment
        assert offset == active.next_offset, (offset, active)
        self._log_end_offset_metadata = LogOffsetMetadata(offset, active.base_offset, active.size)
        self._changed()

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark_metadata.message_offset

    @property
    def high_watermark_metadata(self) -> LogOffsetMetadata:
        return self._high_watermark_metadata

    @property
    def recovery_point(self) -> int:
        return self._recovery_point.offset

    @property
    def size_in_bytes(self) -> int:
        return self._segments.size_in_bytes

    @property
    def segments(self):
        """Read-only, ordered view of the segments."""
        return self._segments.values()

    @property
    def active_segment(self) -> LogSegment:
        return self._segments.active

    @property
    def epoch_cache(self) -> LeaderEpochCache:
        return self._epoch_cache

    @property
    def producer_state(self) -> ProducerStateManager:
        return self._producer_state

    # ----------------------------------------------------------------- append

    @disk_io
    def append_as_leader(self, records: memoryview, *, leader_epoch: int) -> AppendInfo:
        """Validate, dedupe, assign offsets and epoch in place, then append.

        The buffer must be writable: offsets and epoch are stamped into it.
        """
        assert leader_epoch >= 0
        view, batches = validate_batches(records, leader=True, max_message_bytes=self._config.max_message_bytes)
        if self._config.compact:
            check_keys_for_compaction(batches)
        duplicate = self._producer_state.check_append(batch.header for batch in batches)
        if duplicate is not None:
            return AppendInfo(
                duplicate.first_offset, duplicate.last_offset, duplicate.timestamp, -1,
                self._log_start_offset, True, 0, 0,
            )  # fmt: skip
        assign_offsets(batches, first_offset=self.log_end_offset, leader_epoch=leader_epoch)
        return self._append(view, batches)

    @disk_io
    def append_as_follower(self, records: memoryview) -> AppendInfo:
        """Append the leader's batches as they are (offsets and epochs kept)."""
        view, batches = validate_batches(records, leader=False, max_message_bytes=self._config.max_message_bytes)
        check_follower_offsets(batches, self.log_end_offset, str(self.topic_partition))
        return self._append(view, batches)

    def _append(self, view: memoryview, batches: list[RecordBatch]) -> AppendInfo:
        """Write the whole request (the batches tile `view` exactly) in one segment write."""
        first, last = batches[0], batches[-1]
        assert first.base_offset >= self.log_end_offset  # a follower's copy of a compacted log has gaps
        assert sum(batch.size_in_bytes for batch in batches) == len(view)
        max_batch = max(batches, key=lambda b: b.max_timestamp)
        self._maybe_roll(len(view), last.last_offset)
        self.active_segment.append(last.last_offset, view, max_batch.max_timestamp, max_batch.last_offset)
        self._update_log_end_offset(last.next_offset)
        for batch in batches:
            self._assign_epoch_from(batch.header)
            self._producer_state.record(batch.header)
        assert self.log_end_offset == self.active_segment.next_offset
        return AppendInfo(
            first.base_offset, last.last_offset, max_batch.max_timestamp, -1, self._log_start_offset,
            False, len(batches), len(view),
        )  # fmt: skip

    def _assign_epoch_from(self, header: BatchHeader) -> None:
        if header.partition_leader_epoch > self._epoch_cache.latest_epoch:
            self._epoch_cache.assign(header.partition_leader_epoch, header.base_offset)

    # ------------------------------------------------------------------- roll

    @disk_io
    def maybe_roll(self, incoming_size: int, max_offset: int | None = None) -> bool:
        """Roll if the active segment is full, old, or cannot index `max_offset`."""
        return self._maybe_roll(incoming_size, self.log_end_offset if max_offset is None else max_offset)

    def _maybe_roll(self, incoming_size: int, max_offset: int) -> bool:
        if not self.active_segment.should_roll(incoming_size, self._clock_ms(), self._config, max_offset=max_offset):
            return False
        self._roll()
        return True

    @disk_io
    def roll(self) -> None:
        """Force a new active segment (no-op if the active one is empty)."""
        if self.active_segment.size > 0:
            self._roll()

    def _roll(self) -> None:
        """Seal the active segment and start the next at the LEO, which moves there too."""
        self.active_segment.seal()
        self._segments.add(self._open_segment(self.log_end_offset))
        self._update_log_end_offset(self.log_end_offset)

    # ------------------------------------------------------------------- read

    def _check_in_range(self, offset: int) -> None:
        if offset < self._log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"{self.topic_partition}: offset {offset} outside [{self._log_start_offset}, {self.log_end_offset}]"
            )

    @disk_io
    def offset_metadata_of(self, offset: int) -> LogOffsetMetadata:
        """Where the batch holding `offset` starts (index lookup plus a short header scan; Kafka's
        convertToOffsetMetadataOrThrow)."""
        self._check_in_range(offset)
        return self._segments.offset_metadata_of(offset)

    def bytes_after(self, position: LogOffsetMetadata) -> int | None:
        """Log bytes from `position` to the LEO; None once its segment is gone (retention)."""
        return self._segments.bytes_from(position)

    @disk_io
    def bytes_from(self, offset: int) -> int:
        """Log bytes from the batch holding `offset` (or the log start, if below it) to the LEO: a follower's
        lag in bytes. An index lookup and a short header scan, as for a read."""
        start = self.offset_metadata_of(min(max(offset, self._log_start_offset), self.log_end_offset))
        found = self._segments.bytes_from(start)
        assert found is not None, start
        return found

    @disk_io
    def read(
        self, offset: int, *, max_bytes: int, upper_bound: int, min_one_batch: bool = True
    ) -> LogReadResult:
        """Whole batches from the one holding `offset`, all with last offset < upper_bound.

        Reads one segment at most, like Kafka. `upper_bound` is the HW for
        consumers and the LEO for followers.
        """
        assert max_bytes >= 0
        if self._high_watermark_metadata.message_offset_only:
            self._convert_high_watermark_metadata()
        # The ends read once into locals: this runs for every partition of every fetch, and for each parked
        # fetch that an append answers.
        end = self._log_end_offset_metadata
        log_end_offset = end.message_offset
        if offset == log_end_offset:
            # Nothing to read (an idle follower's fetch): the LEO's position is known, no lookup needed.
            return self._read_result(None, end)
        self._check_in_range(offset)
        upper_bound = min(upper_bound, log_end_offset)
        hw_metadata = self._high_watermark_metadata
        if offset >= upper_bound and offset == hw_metadata.message_offset and not hw_metadata.message_offset_only:
            # Nothing to read below the HW (a consumer caught up while the followers fetch the latest
            # append): the HW's position is known, no lookup needed.
            return self._read_result(None, hw_metadata)
        active = self._segments.active
        # At or past the active segment's base the offset can only be there (the usual tail read: a follower
        # answered by the append it waited for, a caught-up consumer): no search of the sorted segments.
        segments = (active,) if offset >= active.base_offset else self._segments.from_offset(offset)
        for segment in segments if offset < upper_bound else ():
            if segment.base_offset >= upper_bound:
                break
            max_position = None
            if upper_bound < segment.next_offset:
                bound = segment.translate_offset(upper_bound)
                max_position = bound.position if bound is not None else None
            file_slice = segment.read(offset, max_bytes, max_position, min_one_batch)
            if file_slice is not None:
                # max(): an offset compacted away may lie in the gap before this segment (see LogSegments).
                return self._read_result(file_slice, LogOffsetMetadata(
                    max(offset, segment.base_offset), segment.base_offset, file_slice.position))
            if segment.size > 0 and offset < segment.next_offset:
                break  # the offset is here but nothing fits max_bytes (a cleaned segment may be empty)
        return self._read_result(None, self.offset_metadata_of(offset))

    def _read_result(self, file_slice: FileSlice | None, start: LogOffsetMetadata) -> LogReadResult:
        return LogReadResult(file_slice, start, self._log_end_offset_metadata.message_offset,
                             self._high_watermark_metadata.message_offset, self._log_start_offset)

    @disk_io
    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= `timestamp`."""
        return timestamp_search.offset_for_timestamp(self._segments, self._log_start_offset, timestamp)

    @disk_io
    def offset_of_max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record carrying the log's largest timestamp (KIP-734)."""
        return timestamp_search.offset_of_max_timestamp(self._segments, self._log_start_offset)

    # --------------------------------------------------------- high watermark

    def update_high_watermark(self, value: int) -> int:
        """Set the HW clamped to [log start, LEO] (load, truncation)."""
        self._set_high_watermark(min(max(value, self._log_start_offset), self.log_end_offset))
        return self.high_watermark

    def maybe_increment_high_watermark(self, value: int, metadata: LogOffsetMetadata | None = None) -> bool:
        """Leader: the HW only moves forward, and never past the LEO. `metadata` is where `value` sits when
        the caller knows it (the fetch position of the follower that bounds the HW)."""
        assert value <= self.log_end_offset, (value, self.log_end_offset)
        if value <= self.high_watermark:
            return False
        self._set_high_watermark(value, metadata)
        return True

    def maybe_update_high_watermark(self, value: int) -> bool:
        """Follower: take the leader's HW, capped at the local LEO."""
        new_value = min(value, self.log_end_offset)
        if new_value == self.high_watermark:
            return False
        self._set_high_watermark(new_value)
        return True

    def _set_high_watermark(self, value: int, metadata: LogOffsetMetadata | None = None) -> None:
        """The HW with its position when that is known without I/O: given, or the LEO's when the HW is the
        LEO (Kafka's updateHighWatermarkMetadata); else message offset only, until a read converts it."""
        assert value <= self.log_end_offset, (value, self.log_end_offset)
        if metadata is None:
            metadata = self.log_end_offset_metadata if value == self.log_end_offset else LogOffsetMetadata(value)
        assert metadata.message_offset == value, (metadata, value)
        self._high_watermark_metadata = metadata
        self._changed()

    def _convert_high_watermark_metadata(self) -> None:
        """Look the HW's position up if nobody has: a read does it, because a read handles storage errors
        and a delayed fetch's completion check, which measures from the HW, must not do I/O."""
        hw = self.high_watermark
        if self._high_watermark_metadata.message_offset_only and hw >= self._log_start_offset:
            self._high_watermark_metadata = self.offset_metadata_of(hw)

    # ------------------------------------------------------------------ flush

    def prepare_flush(self, up_to: int | None = None) -> FlushTicket:
        """Files holding offsets in [recovery point, up_to) (default: the LEO), for fsync in an executor."""
        end = self.log_end_offset if up_to is None else min(up_to, self.log_end_offset)
        return self._recovery_point.prepare(self._segments, end, self.directory, self._file_ops)

    def prepare_flush_of_rolled_segments(self) -> FlushTicket | None:
        """The segments rolled since the last flush, up to the active one (Kafka's UnifiedLog.roll flushes
        them and moves the recovery point to the new segment's base, so that recovery after a crash reads
        only what came later); None when there are none."""
        if self.active_segment.base_offset <= self._recovery_point.offset:
            return None
        return self.prepare_flush(up_to=self.active_segment.base_offset)

    def complete_flush(self, ticket: FlushTicket) -> bool:
        """Advance the recovery point; a ticket from before a truncation is ignored."""
        return self._recovery_point.complete(ticket, self.log_end_offset)

    @disk_io
    def flush(self) -> None:
        ticket = self.prepare_flush()
        ticket.fsync()
        self.complete_flush(ticket)

    @disk_io
    def close(self) -> None:
        self.flush()
        for segment in self._segments:
            segment.close()

    def delete(self) -> None:
        for segment in self._segments:
            segment.delete()
        self._segments.clear()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.topic_partition.topic}-{self.topic_partition.partition}, "
            f"start={self._log_start_offset}, hw={self.high_watermark}, leo={self.log_end_offset})"
        )
