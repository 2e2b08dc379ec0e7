"""The fetch round's appends, in two steps around their writes (ReplicaFetcherThread.processPartitionData):
begun on the loop right after the answer was decided, written by the fetcher's writer (append_writer.py),
finished on the loop once written. Mixed into ReplicaFetcher."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from typing import NamedTuple

from replog.fetcher import decisions
from replog.fetcher.append_writer import wait_for_writes
from replog.fetcher.config import FetchObserver
from replog.fetcher.fetch_plan import FetchPlan, FollowedPartition
from replog.fetcher.fetch_state import PartitionFetchState
from replog.fetcher.replication_quota import ReplicationQuota
from replog.log.errors import LogError
from replog.log.follower_append import FollowerAppend
from replog.log.partition_log import AppendInfo, PartitionLog, TopicPartition
from replog.protocol.records import CorruptRecordError, InvalidRecordError

logger = logging.getLogger(__name__)

# Local failures that end fetching for one partition until it is added again (Kafka's markPartitionFailed:
# storage errors, an append not at the LEO); bad fetched data only backs off, it may be transient.
PARTITION_FAILURES = (LogError, OSError)
BAD_DATA = (CorruptRecordError, InvalidRecordError)


class Writing(NamedTuple):
    """An append of a fetch answer whose write was begun, with what its completion is checked against."""

    tp: TopicPartition
    sent: PartitionFetchState
    action: decisions.Append
    log: PartitionLog
    append: FollowerAppend


class FollowerAppendSteps:
    """ReplicaFetcher provides these attributes and _fail and _back_off."""

    _partitions: dict[TopicPartition, FollowedPartition]
    _plan: FetchPlan
    _writer: Executor
    _on_fetched: FetchObserver | None
    _quota: ReplicationQuota | None
    _fail: Callable[[TopicPartition, str], None]
    _back_off: Callable[[FollowedPartition | None], None]

    def _begin_append(
        self, tp: TopicPartition, followed: FollowedPartition, action: decisions.Append
    ) -> FollowerAppend | None:
        """ReplicaFetcherThread.processPartitionData, first half: check and place the append, and hand its
        write to the writer; None if it failed (the partition backs off or fails)."""
        if self._log_moved(tp, followed):
            return None
        try:
            return followed.log.begin_follower_append(action.records, self._writer)
        except BAD_DATA as exc:
            logger.warning("%r: %s: invalid fetched data: %s", self, tp, exc)
            self._back_off(followed)
        except PARTITION_FAILURES as exc:
            self._fail(tp, f"append at {followed.state.fetch_offset} failed: {exc!r}")
        return None

    def _log_moved(self, tp: TopicPartition, followed: FollowedPartition) -> bool:
        if followed.state.fetch_offset == followed.log.log_end_offset:
            return False
        # Kafka's "Offset mismatch" IllegalStateException: someone else moved the log under us.
        self._fail(tp, f"fetch offset {followed.state.fetch_offset} != log end offset {followed.log.log_end_offset}")
        return True

    async def _finish_appends(self, writing: list[Writing]) -> None:
        """Second half, once the writes are done: publish each append, in the order begun, then take the HW
        and log start from the leader if the partition's state is still the one the request was built from
        (otherwise the log keeps the records and whoever follows it now fetches from its end)."""
        try:
            await wait_for_writes(begun.append for begun in writing)
        except asyncio.CancelledError:
            # The round is cancelled (a partition was added or removed) but its writes are done all the same:
            # finished now, so that a partition still followed fetches on from the end its records put its log
            # at (not failed for an offset mismatch next round), and a fetcher that takes a log over finds it so.
            self._publish_appends(writing)
            raise
        self._publish_appends(writing)

    def _publish_appends(self, writing: list[Writing]) -> None:
        for begun in writing:
            followed = self._partitions.get(begun.tp)
            current = (
                followed is not None
                and followed.log is begun.log
                and decisions.is_current(begun.sent, followed.state)
            )
            try:
                info = begun.log.finish_follower_append(begun.append)
            except PARTITION_FAILURES as exc:
                if current:
                    self._fail(begun.tp, f"append at {begun.sent.fetch_offset} failed: {exc!r}")
                continue
            if current:
                assert followed is not None
                self._after_append(begun.tp, followed, begun.action, info)

    def _after_append(
        self, tp: TopicPartition, followed: FollowedPartition, action: decisions.Append, info: AppendInfo | None
    ) -> None:
        """processPartitionData, the rest: HW and log start from the leader, then the next fetch offset.
        `info` is None for an answer without records (only the leader's HW and log start)."""
        log = followed.log
        try:
            log.maybe_update_high_watermark(
                decisions.follower_high_watermark(
                    action.leader_high_watermark, log.log_start_offset, log.log_end_offset
                )
            )
            new_start = decisions.follower_log_start_offset(
                action.leader_log_start_offset, log.log_start_offset, log.high_watermark
            )
            if new_start is not None and log.maybe_increment_log_start_offset(new_start):
                self._plan.mark(tp)  # the next request carries the new log start
        except PARTITION_FAILURES as exc:
            self._fail(tp, f"HW or log start update at {followed.state.fetch_offset} failed: {exc!r}")
            return
        if self._on_fetched is not None:
            self._on_fetched(tp, 0 if info is None else info.num_bytes, action.leader_high_watermark)
        followed.in_sync = log.log_end_offset >= action.leader_high_watermark
        if info is not None and self._quota is not None:
            self._quota.record_if_throttled(*tp, info.num_bytes)
        if info is None:
            return
        assert log.log_end_offset == info.last_offset + 1
        followed.state = followed.state.fetching_from(log.log_end_offset, action.last_batch_epoch)
