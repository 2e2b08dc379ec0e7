"""The log cleaner's state on the event loop (Kafka's LogCleanerManager): which compacted log to clean next,
the logs being cleaned, the `cleaner-offset-checkpoint` of each log dir (partition -> first dirty offset),
and the swap of a finished cleaning into its log, unless the log was truncated, deleted or went offline
meanwhile (then the cleaning is discarded).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from replog.log import cleaner_rules
from replog.log.checkpoint import OffsetCheckpointFile
from replog.log.cleaner import CleaningJob, CleaningResult
from replog.log.errors import CorruptCheckpointError, StorageError
from replog.log.log_manager import LogManager
from replog.log.partition_log import PartitionLog, TopicPartition
from replog.log.segment_swap import discard_cleaned

logger = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"


def _read_checkpoint(log_dir: Path) -> dict[TopicPartition, int]:
    """A torn or missing checkpoint means cleaning every compacted log from its start: always safe."""
    try:
        return {TopicPartition(*tp): offset
                for tp, offset in OffsetCheckpointFile(log_dir / CLEANER_OFFSET_CHECKPOINT).read().items()}
    except (CorruptCheckpointError, OSError) as exc:
        logger.warning("%s: %s; compacted logs will be cleaned from their start", log_dir, exc)
        return {}


def write_cleaner_checkpoint(log_dir: Path, entries: dict[TopicPartition, int]) -> None:
    """Blocking (fsync): call it from a cleaner thread."""
    OffsetCheckpointFile(log_dir / CLEANER_OFFSET_CHECKPOINT).write(entries)


class LogCleanerManager:
    def __init__(self, log_manager: LogManager, clock_ms: Callable[[], int]) -> None:
        self._log_manager = log_manager
        self._clock_ms = clock_ms
        self._checkpoints = {log_dir: _read_checkpoint(log_dir) for log_dir in log_manager.online_dirs}
        self._in_progress: dict[TopicPartition, CleaningJob] = {}
        log_manager.add_removal_listener(self.abort)

    @property
    def in_progress(self) -> frozenset[TopicPartition]:
        return frozenset(self._in_progress)

    def first_dirty_offset(self, log: PartitionLog) -> int:
        log_dir = log.log_dir
        checkpoints = self._checkpoints.setdefault(log_dir, {})
        tp = log.topic_partition
        if log.truncated_to_since_cleaning is not None:
            if tp in checkpoints:
                checkpoints[tp] = min(checkpoints[tp], log.truncated_to_since_cleaning)
            log.truncated_to_since_cleaning = None
        return cleaner_rules.first_dirty_offset(checkpoints.get(tp), log_start_offset=log.log_start_offset,
                                                log_end_offset=log.log_end_offset)

    def grab_filthiest(self) -> tuple[PartitionLog, CleaningJob] | None:
        """The compacted log most in need of cleaning (an overdue one first, then the highest dirty ratio
        above its min.cleanable.dirty.ratio), marked in progress, with its cleaning planned; or None."""
        now_ms = self._clock_ms()
        best: tuple[tuple[bool, float], PartitionLog, cleaner_rules.CleanableRange] | None = None
        for log in self._log_manager.all_logs():
            config = log.config
            if not config.compact or log.is_offline or log.topic_partition in self._in_progress:
                continue
            cleanable = cleaner_rules.cleanable_range(
                log.segments, first_dirty=self.first_dirty_offset(log), high_watermark=log.high_watermark,
                now_ms=now_ms, min_compaction_lag_ms=config.min_compaction_lag_ms)
            overdue = cleaner_rules.compaction_overdue(cleanable, now_ms=now_ms,
                                                       max_compaction_lag_ms=config.max_compaction_lag_ms)
            if not cleaner_rules.needs_cleaning(cleanable, min_cleanable_ratio=config.min_cleanable_dirty_ratio,
                                                overdue=overdue):
                continue
            rank = (overdue, cleanable.dirty_ratio)
            if best is None or rank > best[0]:
                best = (rank, log, cleanable)
        if best is None:
            return None
        _, log, cleanable = best
        config = log.config
        clean_section = [segment for segment, after in cleanable.segments if after <= cleanable.first_dirty]
        job = CleaningJob(
            directory=log.directory, cleanable=cleanable,
            groups=cleaner_rules.group_by_size(cleanable.segments, max_bytes=config.segment_bytes),
            last_clean_segment=clean_section[-1] if clean_section else None,
            delete_retention_ms=config.delete_retention_ms, index_interval_bytes=config.index_interval_bytes,
            segment_index_bytes=config.segment_index_bytes, now_ms=now_ms, truncations=log.truncations)
        self._in_progress[log.topic_partition] = job
        return log, job

    def _still_cleanable(self, log: PartitionLog, job: CleaningJob) -> bool:
        if job.aborted.is_set() or log.is_offline or log.truncations != job.truncations:
            return False
        if self._log_manager.get_log(*log.topic_partition) is not log:
            return False
        current = {segment.base_offset: segment for segment in log.segments}
        return all(current.get(segment.base_offset) is segment
                   for group in job.groups for segment, _ in group)

    def complete(self, log: PartitionLog, job: CleaningJob, result: CleaningResult) -> bool:
        """On the event loop: swap the cleaned segments in and move the checkpoint, or discard them if the
        log changed under the cleaning. Returns whether the cleaning took effect."""
        del self._in_progress[log.topic_partition]
        remaining = [group.base_offset for group in result.groups]
        try:
            if not self._still_cleanable(log, job):
                logger.info("cleaning of %s abandoned: the log changed meanwhile", log.topic_partition)
                return False
            for group in result.groups:
                log.replace_segments(group.base_offset, group.sources)
                remaining.pop(0)
        except StorageError:
            logger.warning("swapping cleaned segments into %s failed", log.topic_partition, exc_info=True)
            return False
        finally:
            for base_offset in remaining:
                try:
                    discard_cleaned(job.directory, base_offset)
                except OSError:
                    logger.warning("cannot delete cleaned segment %d of %s", base_offset, log.topic_partition)
        self._checkpoints.setdefault(log.log_dir, {})[log.topic_partition] = result.map_end
        return True

    def abandon(self, log: PartitionLog, job: CleaningJob, error: BaseException) -> None:
        """The cleaning failed in its thread (which deleted its files). An I/O error on a log still in place
        takes its dir offline, as in Kafka; an abort or a vanished log is only logged."""
        del self._in_progress[log.topic_partition]
        if (isinstance(error, OSError) and not job.aborted.is_set()
                and self._log_manager.get_log(*log.topic_partition) is log):
            log.report_disk_failure(error)
        logger.info("cleaning of %s stopped: %s", log.topic_partition, error)

    def abort(self, tp: TopicPartition) -> None:
        job = self._in_progress.get(tp)
        if job is not None:
            job.aborted.set()

    def abort_all(self) -> None:
        for job in self._in_progress.values():
            job.aborted.set()

    def checkpoint_entries(self, log_dir: Path) -> dict[TopicPartition, int]:
        """What the dir's cleaner checkpoint should hold now: only logs still in the dir."""
        present = set(self._log_manager.logs_in(log_dir))
        return {tp: offset for tp, offset in self._checkpoints.get(log_dir, {}).items() if tp in present}
