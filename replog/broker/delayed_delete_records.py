"""DeleteRecords on the leader, and DelayedDeleteRecords: the answer waits until every in-sync replica's log
start offset has reached the requested offset (Kafka's DelayedDeleteRecords), or the request's timeout."""

import asyncio

from kio.schema.errors import ErrorCode

from replog.log.errors import OffsetOutOfRangeError
from replog.log.partition_log import TopicPartition

from .partition import Partition
from .purgatory import DelayedOperation

HIGH_WATERMARK = -1  # Kafka's DeleteRecordsRequest.HIGH_WATERMARK: delete everything below the HW

# (low watermark, error) per partition; -1 while not known
DeleteResults = dict[TopicPartition, tuple[int, ErrorCode]]


def low_watermark(partition: Partition) -> int:
    """The smallest log start offset among the leader and its in-sync followers (-1 for a follower that has
    not fetched yet). Kafka takes every follower on a live broker; the ISR is this broker's view of those."""
    starts = [partition.log.log_start_offset]
    starts += [f.log_start_offset for broker, f in partition.followers.items() if broker in partition.state.isr]
    return min(starts)


def move_log_start(partition: Partition | None, offset: int) -> tuple[int, ErrorCode]:
    """Move the leader's log start offset to `offset` (-1: the HW); (the offset it moved to, error)."""
    if partition is None:
        return -1, ErrorCode.unknown_topic_or_partition
    if partition.storage_failed:
        return -1, ErrorCode.kafka_storage_error
    if not partition.is_leader:
        return -1, ErrorCode.not_leader_or_follower
    log = partition.log
    target = log.high_watermark if offset == HIGH_WATERMARK else offset
    if target < 0 or target > log.high_watermark:
        return -1, ErrorCode.offset_out_of_range
    try:
        log.maybe_increment_log_start_offset(target)
    except OffsetOutOfRangeError:
        return -1, ErrorCode.offset_out_of_range
    return max(target, log.log_start_offset), ErrorCode.none


class DelayedDeleteRecords(DelayedOperation):
    def __init__(self, partition_of, timeout_ms: int, results: DeleteResults, required: dict[TopicPartition, int]):
        super().__init__(max(0, timeout_ms))
        self._partition_of = partition_of
        self._results = results
        self._required = dict(required)
        for key in required:  # until its replicas have caught up, a partition's answer is a timeout
            results[key] = (-1, ErrorCode.request_timed_out)
        self.future = asyncio.get_running_loop().create_future()

    def try_complete(self) -> bool:
        for key, offset in list(self._required.items()):
            partition = self._partition_of(key)
            if partition is None or not partition.is_leader:
                self._results[key] = (-1, ErrorCode.not_leader_or_follower)
            elif (low := low_watermark(partition)) >= offset:
                self._results[key] = (low, ErrorCode.none)
            else:
                continue
            del self._required[key]
        return not self._required and self.force_complete()

    def on_complete(self) -> None:
        if not self.future.done():
            self.future.set_result(self._results)
