"""All partition logs of a broker, spread over its log.dirs.

Each log dir holds `<topic>-<partition>` directories, three offset
checkpoints, and `.kafka_cleanshutdown` while the broker is cleanly stopped.
The marker is deleted once the dir is loaded, so a later crash is noticed.

Once the broker runs, checkpoints are written and fsynced in a worker thread (checkpoint_writer.py): the
offset checkpoints of every dir and each log's leader-epoch checkpoint. Crash safety then rests on one
order, kept by the broker: the writer is flushed before a recovery point is checkpointed, and before the
dirs are marked clean (see epoch_cache.py for what a stale epoch checkpoint means at the next start).

A dir whose I/O fails goes offline (dir_failure.py) until the broker restarts: it gets no new logs, its
checkpoints are no longer written, and it is not marked clean at shutdown, so the next start recovers its
logs (truncating any torn write) instead of trusting them.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from replog.log.checkpoint import OffsetCheckpointFile, fsync_directory, sync_filesystem, write_atomically
from replog.log.checkpoint_writer import CheckpointWriter
from replog.log.config import LogConfig
from replog.log.dir_failure import LogDirFailureChannel
from replog.log.dir_lock import DirectoryLock
from replog.log.errors import CorruptCheckpointError, StorageError
from replog.log.file_budget import FileBudget
from replog.log.partition_log import PartitionLog, TopicPartition, parse_topic_partition
from replog.log.segment_files import OS_FILE_OPS, SegmentFileOps

logger = logging.getLogger(__name__)

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


@dataclass(frozen=True, slots=True)
class DirCheckpoints:
    """The broker's CheckpointWriter as one log's epoch cache sees it: a failed write takes `log_dir` offline."""

    writer: CheckpointWriter
    log_dir: Path

    def submit(self, path: Path, data: bytes) -> None:
        self.writer.submit(path, data, self.log_dir)

    def write_now(self, path: Path, data: bytes) -> None:
        self.writer.write_now(path, data)


def _read_or_reset(path: Path, torn: set[str]) -> dict[tuple[str, int], int]:
    """A recovery-point or log-start checkpoint, or {} if it does not parse: every log then recovers from
    its first segment and starts at that segment's base, which is always safe (Kafka's LogManager.loadLogs
    does the same). A torn checkpoint must not keep the broker from starting; its name goes into `torn`."""
    try:
        return OffsetCheckpointFile(path).read()
    except CorruptCheckpointError as exc:
        logger.warning("%s; resetting it (full recovery, log starts at the first segment)", exc)
        torn.add(path.name)
        return {}


class LogManager:
    def __init__(
        self, log_dirs: list[Path], default_config: LogConfig, *, clock_ms: Callable[[], int],
        file_ops: SegmentFileOps = OS_FILE_OPS, file_budget: FileBudget | None = None,
    ) -> None:
        """`file_budget` bounds the segment files held open over all logs (log.open.files.max); None
        keeps every segment's files open once used, as Kafka does."""
        assert log_dirs
        self.file_budget = file_budget
        self.log_dirs = [Path(d) for d in log_dirs]
        assert len(set(self.log_dirs)) == len(self.log_dirs)
        self.default_config = default_config
        self._clock_ms = clock_ms
        self._file_ops = file_ops
        self.failure_channel = LogDirFailureChannel()
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._logs_per_dir: Counter[Path] = Counter()
        self._locks: list[DirectoryLock] = []
        self._removal_listeners: list[Callable[[TopicPartition], None]] = []
        # What each checkpoint file of each dir last received from this process, to skip unchanged rewrites.
        self._last_checkpoints: dict[tuple[str, Path], dict[TopicPartition, int]] = {}
        self._writer: CheckpointWriter | None = None  # while the broker runs: checkpoints off the event loop
        torn: set[str] = set()
        try:
            for log_dir in self.log_dirs:
                try:
                    log_dir.mkdir(parents=True, exist_ok=True)
                    self._locks.append(DirectoryLock.acquire(log_dir))  # held until shutdown, as Kafka's
                    self._load_dir(log_dir, torn)
                except StorageError:
                    raise  # one partition in two dirs: a configuration error, not a disk failure
                except OSError as exc:
                    # Kafka starts with the dirs it can load and reports the others offline.
                    self.failure_channel.report(log_dir, exc)
            if not self.online_dirs:
                # Kafka's LogManager refuses to start when none of the log dirs can be used.
                raise StorageError(f"none of the log dirs {[str(d) for d in self.log_dirs]} can be loaded")
            # A torn checkpoint is rewritten from the loaded logs at once rather than at the first periodic
            # checkpoint, up to a minute later: until then any reader of the dir meets the torn file.
            if RECOVERY_POINT_CHECKPOINT in torn:
                self.checkpoint_recovery_points()
            if LOG_START_OFFSET_CHECKPOINT in torn:
                self.checkpoint_log_start_offsets()
        except BaseException:
            self.release_locks()
            raise

    def directory_id(self, log_dir: Path) -> uuid.UUID:
        """The id the controller knows `log_dir` by (KIP-858's directory id). Derived from the absolute path
        rather than stored in meta.properties (as Kafka does): stable across restarts, unique per broker, and
        known even for a dir that cannot be read."""
        return uuid.uuid5(uuid.NAMESPACE_URL, f"replog-log-dir:{Path(log_dir).resolve()}")

    @property
    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if not self.failure_channel.is_offline(d)]

    def dir_of(self, topic: str, partition: int) -> Path | None:
        return self._dir_of.get(TopicPartition(topic, partition))

    def logs_in(self, log_dir: Path) -> list[TopicPartition]:
        return [tp for tp, d in self._dir_of.items() if d == log_dir]

    def _load_dir(self, log_dir: Path, torn: set[str]) -> None:
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery_points = _read_or_reset(log_dir / RECOVERY_POINT_CHECKPOINT, torn)
        log_starts = _read_or_reset(log_dir / LOG_START_OFFSET_CHECKPOINT, torn)
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
                failure_channel=self.failure_channel,
                file_ops=self._file_ops,
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
        """Where each new log goes: the online log dir holding the fewest logs, counting the ones planned
        before it. Raises StorageError when every dir is offline."""
        online = self.online_dirs
        counts = Counter({d: self._logs_per_dir[d] for d in online})
        planned = []
        for tp, config, topic_id in wanted:
            assert tp not in self._logs, tp
            if not online:
                raise StorageError(f"no online log dir for {tp.topic}-{tp.partition}")
            log_dir = min(online, key=counts.__getitem__)
            counts[log_dir] += 1
            planned.append(NewLog(tp, log_dir / f"{tp.topic}-{tp.partition}", config, topic_id))
        return planned

    def open_new_log(self, new: NewLog, *, sync: bool = True) -> PartitionLog:
        """Create the log's files. Reads no mutable LogManager state, so it may run in a worker thread. With
        `sync=False` nothing is fsynced: call sync_new_logs for a batch of them before adopting any."""
        log = PartitionLog.open(new.directory, new.config, clock_ms=self._clock_ms, clean_shutdown=True,
                                topic_id=new.topic_id, failure_channel=self.failure_channel,
                                file_ops=self._file_ops, sync_metadata=sync)
        if self.file_budget is not None:
            # Thousands may be created before any is adopted (a LeaderAndIsr for a whole new topic): each
            # waits with no descriptor, and reopens its files on its first append.
            log.release_file_handles()
        return log

    @staticmethod
    def sync_new_logs(planned: Iterable[NewLog]) -> None:
        """Make logs opened with sync=False durable (their directories, entries in the log dir, metadata
        files): one file system sync per log dir; may run in a worker thread."""
        for log_dir in {new.directory.parent for new in planned}:
            sync_filesystem(log_dir)

    def adopt_new_log(self, new: NewLog, log: PartitionLog) -> None:
        """Register a log that open_new_log created; runs on the event loop."""
        if new.topic_partition in self._logs:
            log.close()
            raise StorageError(f"{new.topic_partition} was created twice")
        self._register(new.topic_partition, log, new.directory.parent)

    def _register(self, tp: TopicPartition, log: PartitionLog, log_dir: Path) -> None:
        if self.file_budget is not None:
            log.release_file_handles()  # loaded at startup: reopened by its first use, within the budget
            log.attach_file_budget(self.file_budget)
        if self._writer is not None:
            log.epoch_cache.write_in_background(DirCheckpoints(self._writer, log_dir))
        self._logs[tp] = log
        self._dir_of[tp] = log_dir
        self._logs_per_dir[log_dir] += 1

    def start_background_checkpoints(self) -> None:
        """From now on, write checkpoints in a worker thread; on the event loop, before it changes any log."""
        assert self._writer is None
        self._writer = CheckpointWriter(self.failure_channel.report)
        for tp, log in self._logs.items():
            log.epoch_cache.write_in_background(DirCheckpoints(self._writer, self._dir_of[tp]))

    async def flush_background_checkpoints(self) -> None:
        """Until every checkpoint change made so far is on disk (or its dir offline)."""
        if self._writer is not None:
            await self._writer.flush()

    async def stop_background_checkpoints(self) -> None:
        """Flush, then write inline again (shutdown's last checkpoints must be on disk before the clean mark)."""
        writer = self._writer
        if writer is None:
            return
        await writer.flush()
        self._writer = None
        for log in self._logs.values():
            log.epoch_cache.write_in_background(None)
        await writer.close()

    def add_removal_listener(self, listener: Callable[[TopicPartition], None]) -> None:
        """Called with a log's partition just before its files go (the log cleaner aborts its cleaning)."""
        self._removal_listeners.append(listener)

    def delete_log(self, topic: str, partition: int) -> bool:
        tp = TopicPartition(topic, partition)
        log = self._logs.pop(tp, None)
        if log is None:
            return False
        for listener in self._removal_listeners:
            listener(tp)
        self._logs_per_dir[self._dir_of.pop(tp)] -= 1
        if self._writer is None:
            log.delete()
        else:
            with self._writer.deleting(log.directory):
                log.delete()
        return True

    def all_logs(self) -> list[PartitionLog]:
        return list(self._logs.values())

    def _write_checkpoint(self, name: str, value: Callable[[PartitionLog], int]) -> None:
        """Per online dir; a dir whose write fails goes offline and the others are still written (Kafka's
        checkpointLogRecoveryOffsetsInDir). A dir whose offsets are those it last wrote is left alone: an
        idle broker's HW checkpoint every 5 s would otherwise rewrite and fsync the same file each time."""
        online = self.online_dirs
        offsets_by_dir: dict[Path, dict[TopicPartition, int]] = {log_dir: {} for log_dir in online}
        for tp, log in self._logs.items():
            offsets = offsets_by_dir.get(self._dir_of[tp])
            if offsets is not None:
                offsets[tp] = value(log)
        for log_dir in online:
            offsets = offsets_by_dir[log_dir]
            if self._last_checkpoints.get((name, log_dir)) == offsets:
                continue
            checkpoint = OffsetCheckpointFile(log_dir / name)
            if self._writer is not None:
                # Its failure takes the dir offline, and an offline dir gets no more checkpoints.
                self._writer.submit(checkpoint.path, checkpoint.encode(offsets), log_dir)
                self._last_checkpoints[(name, log_dir)] = offsets
                continue
            try:
                checkpoint.write(offsets)
            except OSError as exc:
                self.failure_channel.report(log_dir, exc)
            else:
                self._last_checkpoints[(name, log_dir)] = offsets

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
            if log.is_offline:
                continue
            try:
                deleted += log.delete_retention_segments()
            except StorageError:
                continue  # its dir is offline now; the other dirs' logs still get their pass
            log.producer_state.remove_expired(now)
        return deleted

    def shutdown(self) -> None:
        """Flush and close every log, write the checkpoints, then mark each dir clean. Offline dirs are left
        alone (Kafka does not close their logs either): no clean marker, so the next start recovers them.
        After stop_background_checkpoints, if they were started."""
        assert self._writer is None, "stop_background_checkpoints first"
        logs: Iterable[PartitionLog] = self._logs.values()
        for log in logs:
            if log.is_offline:
                continue
            try:
                log.close()
            except StorageError:
                continue  # reported: its dir is offline and gets no clean marker
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()
        for log_dir in self.online_dirs:
            try:
                write_atomically(log_dir / CLEAN_SHUTDOWN_FILE, b"")
            except OSError as exc:
                self.failure_channel.report(log_dir, exc)
        self.release_locks()

    def release_locks(self) -> None:
        """Let another process use the dirs. Only after the logs are closed (or were never opened)."""
        for lock in self._locks:
            lock.release()
        self._locks.clear()

