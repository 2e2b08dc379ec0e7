"""A fetch answer's append and what follows it (ReplicaFetcherThread.processPartitionData), on the event loop
right after the answer was decided, with no await in between. Mixed into ReplicaFetcher.

The write is inline, not handed to a thread: each fetcher's chain (send the request, receive the answer,
append it, send the next) is sequential by Kafka's rule that the next request leaves only after the append
(the leader takes its fetch offset as this replica's LEO), so a thread could only overlap one fetcher's write
with another's receive, and on the 2-core VM its hand-off (a wake-up each way per answer) cost more CPU than
that overlap saved: docs/profiles/consume.md, "Follower catch-up, fourth pass"."""

from __future__ import annotations

import logging
from collections.abc import Callable

from replog.fetcher import decisions
from replog.fetcher.config import FetchObserver
from replog.fetcher.fetch_plan import FetchPlan, FollowedPartition
from replog.fetcher.replication_quota import ReplicationQuota
from replog.log.errors import LogError
from replog.log.partition_log import TopicPartition
from replog.protocol.records import CorruptRecordError, InvalidRecordError

logger = logging.getLogger(__name__)

# Local failures that end fetching for one partition until it is added again (Kafka's markPartitionFailed:
# storage errors, an append not at the LEO); bad fetched data only backs off, it may be transient.
PARTITION_FAILURES = (LogError, OSError)
BAD_DATA = (CorruptRecordError, InvalidRecordError)


class FollowerAppendSteps:
    """ReplicaFetcher provides these attributes and _fail and _back_off."""

    _plan: FetchPlan
    _on_fetched: FetchObserver | None
    _quota: ReplicationQuota | None
    _fail: Callable[[TopicPartition, str], None]
    _back_off: Callable[[FollowedPartition | None], None]

    def _append(self, tp: TopicPartition, followed: FollowedPartition, action: decisions.Append) -> None:
        """processPartitionData: append the records (all of the answer's batches in one write, or none of
        them), then take the HW and log start from the leader, then move the fetch offset to the new LEO."""
        log = followed.log
        if followed.state.fetch_offset != log.log_end_offset:
            # Kafka's "Offset mismatch" IllegalStateException: someone else moved the log under us.
            self._fail(tp, f"fetch offset {followed.state.fetch_offset} != log end offset {log.log_end_offset}")
            return
        try:
            info = log.append_as_follower(action.records) if len(action.records) else None
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
        except BAD_DATA as exc:
            logger.warning("%r: %s: invalid fetched data: %s", self, tp, exc)
            self._back_off(followed)
            return
        except PARTITION_FAILURES as exc:
            self._fail(tp, f"append at {followed.state.fetch_offset} failed: {exc!r}")
            return
        if self._on_fetched is not None:
            self._on_fetched(tp, 0 if info is None else info.num_bytes, action.leader_high_watermark)
        followed.in_sync = log.log_end_offset >= action.leader_high_watermark
        if info is None:
            return
        if self._quota is not None:
            self._quota.record_if_throttled(*tp, info.num_bytes)
        assert log.log_end_offset == info.last_offset + 1
        followed.state = followed.state.fetching_from(log.log_end_offset, action.last_batch_epoch)
