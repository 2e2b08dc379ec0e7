"""All partition logs of a broker, spread over its log.dirs.

Each log dir holds `<topic>-<partition>` directories, three offset
checkpoints, and `.kafka_cleanshutdown` while the broker is cleanly stopped.
The marker is deleted once the dir is loaded, so a later crash is noticed.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from replog.log.checkpoint import OffsetCheckpointFile, fsync_directory, write_atomically
from replog.log.config import LogConfig
from replog.log.errors import StorageError
from replog.log.partition_log import PartitionLog, TopicPartition, parse_topic_partition

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"


@dataclass(frozen=True, slots=True)
class NewLog:
    """A log to create in `directory`: planned on the event loop, opened in a worker thread."""

    topic_partition: TopicPartition
    directory: Path
    config: LogConfig
    topic_id: uuid.UUID | None


class LogManager:
    def __init__(
        self, log_dirs: list[Path], default_config: LogConfig, *, clock_ms: Callable[[], int]
    ) -> None:
        assert log_dirs
        self.log_dirs = [Path(d) for d in log_dirs]
        assert len(set(self.log_dirs)) == len(self.log_dirs)
        self.default_config = default_config
        self._clock_ms = clock_ms
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._logs_per_dir: Counter[Path] = Counter()
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            self._load_dir(log_dir)

    def _load_dir(self, log_dir: Path) -> None:
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery_points = OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).read()
        log_starts = OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT).read()
        high_watermarks = OffsetCheckpointFile(log_dir / HIGH_WATERMARK_CHECKPOINT).read()
        for child in sorted(log_dir.iterdir()):
            try:
                tp = parse_topic_partition(child)
            except ValueError:
                continue
            if not child.is_dir():
                continue
            if tp in self._logs:
                raise StorageError(f"{tp} found in both {self._dir_of[tp]} and {log_dir}")
            log = PartitionLog.open(
                child,
                self.default_config,
                clock_ms=self._clock_ms,
                recovery_point=recovery_points.get(tp, 0),
                clean_shutdown=clean,
                log_start_offset=log_starts.get(tp, 0),
            )
            log.update_high_watermark(high_watermarks.get(tp, 0))
            self._register(tp, log, log_dir)
        if clean:
            marker.unlink()
            fsync_directory(log_dir)

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get(TopicPartition(topic, partition))

    def get_or_create_log(
        self, topic: str, partition: int, config: LogConfig, topic_id: uuid.UUID | None = None
    ) -> PartitionLog:
        """The partition's log with `config` applied; created in the emptiest log dir."""
        tp = TopicPartition(topic, partition)
        log = self._logs.get(tp)
        if log is not None:
            self._reconfigure(log, config, topic_id)
            return log
        new = self.plan_new_logs([(tp, config, topic_id)])[0]
        log = self.open_new_log(new)
        self.adopt_new_log(new, log)
        return log

    @staticmethod
    def _reconfigure(log: PartitionLog, config: LogConfig, topic_id: uuid.UUID | None) -> None:
        if log.config != config:
            log.update_config(config)
        if topic_id is not None and log.topic_id != topic_id:
            log.assign_topic_id(topic_id)

    def plan_new_logs(
        self, wanted: Iterable[tuple[TopicPartition, LogConfig, uuid.UUID | None]]
    ) -> list[NewLog]:
        """Where each new log goes: the log dir holding the fewest logs, counting the ones planned before it."""
        counts = Counter({d: self._logs_per_dir[d] for d in self.log_dirs})
        planned = []
        for tp, config, topic_id in wanted:
            assert tp not in self._logs, tp
            log_dir = min(self.log_dirs, key=counts.__getitem__)
            counts[log_dir] += 1
            planned.append(NewLog(tp, log_dir / f"{tp.topic}-{tp.partition}", config, topic_id))
        return planned

    def open_new_log(self, new: NewLog) -> PartitionLog:
        """Create the log's files. Reads no mutable LogManager state, so it may run in a worker thread."""
        return PartitionLog.open(new.directory, new.config, clock_ms=self._clock_ms, clean_shutdown=True,
                                 topic_id=new.topic_id)

    def adopt_new_log(self, new: NewLog, log: PartitionLog) -> None:
        """Register a log that open_new_log created; runs on the event loop."""
        if new.topic_partition in self._logs:
            log.close()
            raise StorageError(f"{new.topic_partition} was created twice")
        self._register(new.topic_partition, log, new.directory.parent)

    def _register(self, tp: TopicPartition, log: PartitionLog, log_dir: Path) -> None:
        self._logs[tp] = log
        self._dir_of[tp] = log_dir
        self._logs_per_dir[log_dir] += 1

    def delete_log(self, topic: str, partition: int) -> bool:
        tp = TopicPartition(topic, partition)
        log = self._logs.pop(tp, None)
        if log is None:
            return False
        self._logs_per_dir[self._dir_of.pop(tp)] -= 1
        log.delete()
        return True

    def all_logs(self) -> list[PartitionLog]:
        return list(self._logs.values())

    def _write_checkpoint(self, name: str, value: Callable[[PartitionLog], int]) -> None:
        for log_dir in self.log_dirs:
            offsets = {tp: value(log) for tp, log in self._logs.items() if self._dir_of[tp] == log_dir}
            OffsetCheckpointFile(log_dir / name).write(offsets)

    def checkpoint_high_watermarks(self) -> None:
        self._write_checkpoint(HIGH_WATERMARK_CHECKPOINT, lambda log: log.high_watermark)

    def checkpoint_recovery_points(self) -> None:
        self._write_checkpoint(RECOVERY_POINT_CHECKPOINT, lambda log: log.recovery_point)

    def checkpoint_log_start_offsets(self) -> None:
        self._write_checkpoint(LOG_START_OFFSET_CHECKPOINT, lambda log: log.log_start_offset)

    def cleanup_retention(self) -> int:
        """One retention pass over every log; returns the segments deleted."""
        now = self._clock_ms()
        deleted = 0
        for log in self._logs.values():
            deleted += log.delete_retention_segments()
            log.producer_state.remove_expired(now)
        return deleted

    def shutdown(self) -> None:
        """Flush and close every log, write the checkpoints, then mark each dir clean."""
        logs: Iterable[PartitionLog] = self._logs.values()
        for log in logs:
            log.close()
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()
        for log_dir in self.log_dirs:
            write_atomically(log_dir / CLEAN_SHUTDOWN_FILE, b"")

