"""All partition logs of a broker, spread over its log.dirs.

Each log dir holds `<topic>-<partition>` directories, three offset
checkpoints, and `.kafka_cleanshutdown` while the broker is cleanly stopped.
The marker is deleted once the dir is loaded, so a later crash is noticed.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

from replog.log.checkpoint import OffsetCheckpointFile, fsync_directory, write_atomically
from replog.log.config import LogConfig
from replog.log.errors import StorageError
from replog.log.partition_log import PartitionLog, TopicPartition, parse_topic_partition

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"


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
            self._logs[tp] = log
            self._dir_of[tp] = log_dir
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
            if log.config != config:
                log.update_config(config)
            if topic_id is not None and log.topic_id != topic_id:
                log.assign_topic_id(topic_id)
            return log
        log_dir = min(self.log_dirs, key=lambda d: sum(1 for v in self._dir_of.values() if v == d))
        log = PartitionLog.open(
            log_dir / f"{topic}-{partition}",
            config,
            clock_ms=self._clock_ms,
            clean_shutdown=True,
            topic_id=topic_id,
        )
        self._logs[tp] = log
        self._dir_of[tp] = log_dir
        return log

    def delete_log(self, topic: str, partition: int) -> bool:
        tp = TopicPartition(topic, partition)
        log = self._logs.pop(tp, None)
        if log is None:
            return False
        del self._dir_of[tp]
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
