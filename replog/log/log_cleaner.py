"""The log cleaner (Kafka's LogCleaner): log.cleaner.threads workers that compact logs with cleanup.policy
compact (or compact,delete), off the event loop.

Each worker is an asyncio task: on the loop it picks the filthiest log and plans its cleaning
(cleaner_manager.py); a cleaner thread builds the offset map and writes the `.cleaned` segments
(cleaner.py); back on the loop the segments are swapped in (a few renames, and the in-memory segment list);
the thread then writes the dir's cleaner checkpoint. Produce and fetch never wait for any of it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from replog.log.cleaner import CleaningResult, clean_log
from replog.log.cleaner_manager import LogCleanerManager, write_cleaner_checkpoint
from replog.log.cleaner_rules import OffsetMap
from replog.log.config import CleanerConfig
from replog.log.log_manager import LogManager
from replog.log.partition_log import TopicPartition

logger = logging.getLogger(__name__)


class LogCleaner:
    def __init__(self, log_manager: LogManager, config: CleanerConfig, *, clock_ms: Callable[[], int]) -> None:
        self.config = config
        self.manager = LogCleanerManager(log_manager, clock_ms)
        self._executor = ThreadPoolExecutor(config.threads, thread_name_prefix="log-cleaner")
        self._tasks: list[asyncio.Task] = []
        self._wakeup = asyncio.Event()
        # One offset map a thread, each a share of the dedupe buffer (Kafka divides it the same way).
        self._free_maps = [OffsetMap(config.dedupe_buffer_size // config.threads) for _ in range(config.threads)]
        # (partition, CleaningResult) of every cleaning that took effect, newest last; bounded.
        self.completed: list[tuple[TopicPartition, CleaningResult]] = []

    def start(self) -> None:
        if self.config.enable:
            self._tasks = [asyncio.create_task(self._run_worker(), name=f"log-cleaner-{number}")
                           for number in range(self.config.threads)]

    def wake(self) -> None:
        """Look for work now rather than after log.cleaner.backoff.ms."""
        self._wakeup.set()

    async def _run_worker(self) -> None:
        while True:
            if not await self.clean_filthiest():
                self._wakeup.clear()
                try:
                    await asyncio.wait_for(self._wakeup.wait(), self.config.backoff_ms / 1000)
                except TimeoutError:
                    pass

    async def clean_filthiest(self) -> bool:
        """One cleaning of the filthiest log; False when no log needs one."""
        grabbed = self.manager.grab_filthiest()
        if grabbed is None:
            return False
        log, job = grabbed
        offset_map = self._free_maps.pop()
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(self._executor, clean_log, job, offset_map)
        except asyncio.CancelledError:
            job.aborted.set()  # the thread stops at its next batch and deletes its files
            self.manager.abandon(log, job, asyncio.CancelledError())
            raise
        except Exception as exc:  # noqa: BLE001 - one log's failure must not stop the cleaner
            self.manager.abandon(log, job, exc)
            return True
        finally:
            offset_map.clear()
            self._free_maps.append(offset_map)
        if self.manager.complete(log, job, result):
            self._record(log.topic_partition, result)
            entries = self.manager.checkpoint_entries(log.log_dir)
            try:
                await loop.run_in_executor(self._executor, write_cleaner_checkpoint, log.log_dir, entries)
            except OSError as exc:
                log.report_disk_failure(exc)
        return True

    def _record(self, tp: TopicPartition, result: CleaningResult) -> None:
        megabytes = result.dirty_bytes / 1e6
        logger.info("cleaned %s-%d: %.1f MB dirty, %d -> %d bytes, %d of %d records kept, %.2f s (%.1f MB/s)",
                    tp.topic, tp.partition, megabytes, result.bytes_read, result.bytes_written,
                    result.records_kept, result.records_read, result.seconds,
                    megabytes / result.seconds if result.seconds else 0.0)
        self.completed.append((tp, result))
        del self.completed[:-100]

    async def stop(self) -> None:
        """Abort running cleanings and wait for the threads: the logs may be closed afterwards."""
        self.manager.abort_all()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        await asyncio.to_thread(self._executor.shutdown, True)
