"""Creating, off the event loop, the logs a LeaderAndIsr gives this broker for the first time.

File creation and its fsyncs cost about a millisecond a partition, and one request may carry thousands, so
the logs are opened in worker threads (several: the time goes into fsyncs, which the file system commits
together) and adopted by the LogManager back on the event loop.
"""

import asyncio
import logging
import time
from collections.abc import Container

from kio.schema.errors import ErrorCode

from replog.log.config import LogConfig
from replog.log.errors import LogError, StorageError
from replog.log.log_manager import LogManager, NewLog
from replog.log.partition_log import PartitionLog, TopicPartition
from replog.protocol.control import LeaderAndIsrRequest

log = logging.getLogger(__name__)

LOG_CREATION_THREADS = 4
ADOPTION_SLICE_S = 0.01  # the longest the event loop adopts new logs without a turn for other work


def storage_error_code(failure: LogError | OSError) -> ErrorCode:
    """What a partition answers when its storage failed: the LogError's own code, else a storage error."""
    return failure.error_code if isinstance(failure, LogError) else ErrorCode.kafka_storage_error


async def create_missing_logs(log_manager: LogManager, base_log_config: LogConfig, node_id: int,
                              hosted: Container[TopicPartition],
                              request: LeaderAndIsrRequest) -> dict[TopicPartition, ErrorCode]:
    """Create the logs of the request's partitions that name `node_id` as a replica and are neither `hosted`
    nor on disk. Returns the partitions whose log could not be created, with the error to answer for them."""
    wanted = {}  # by partition: a request naming one twice still creates its log once
    led_epochs: dict[TopicPartition, int] = {}
    for topic in request.topic_states:
        config = None  # one per topic, not per partition
        for state in topic.partition_states:
            key = TopicPartition(topic.topic_name, state.partition_index)
            if (node_id in state.replicas and key not in hosted and key not in wanted
                    and log_manager.get_log(*key) is None):
                if config is None:
                    config = LogConfig.from_topic_configs(topic.configs, base_log_config)
                wanted[key] = (key, config, topic.topic_id)
                if state.leader == node_id:
                    led_epochs[key] = state.leader_epoch
    if not wanted:
        return {}
    try:
        planned = log_manager.plan_new_logs(wanted.values())
    except StorageError as e:
        log.error("cannot create %d logs: %s", len(wanted), e)
        return {key: ErrorCode.kafka_storage_error for key in wanted}
    chunks = [planned[i::LOG_CREATION_THREADS] for i in range(LOG_CREATION_THREADS)]
    results = await asyncio.gather(*(asyncio.to_thread(_open_logs, log_manager, chunk, led_epochs)
                                     for chunk in chunks if chunk))
    opened = {new: result for chunk in results for new, result in chunk}
    errors = {}
    slice_started = time.monotonic()
    for new in planned:
        # Adopting 10,000 logs takes seconds on a loaded machine: the broker's heartbeats to the controller
        # (9 s session) and client requests must keep flowing meanwhile.
        if time.monotonic() - slice_started > ADOPTION_SLICE_S:
            await asyncio.sleep(0)
            slice_started = time.monotonic()
        result = opened[new]
        if isinstance(result, Exception):
            log.error("creating the log of %s-%d failed: %s", *new.topic_partition, result)
            errors[new.topic_partition] = storage_error_code(result)
            if isinstance(result, OSError):  # reported here, on the event loop, not in the worker thread
                log_manager.failure_channel.report(new.directory.parent, result)
        else:
            log_manager.adopt_new_log(new, result)
    return errors


def _open_logs(log_manager: LogManager, planned: list[NewLog],
               led_epochs: dict[TopicPartition, int]) -> list[tuple[NewLog, PartitionLog | Exception]]:
    """Runs in a worker thread: each new log, or the error that kept it from being created. The logs are
    made durable together at the end (one file system sync, not two fsyncs a log), before any is adopted.
    A log this broker will lead starts with its leader epoch at offset 0 in its epoch cache, as
    Partition.make_leader would write it (Kafka's maybeAssignEpochStartOffset), inside that one sync
    rather than with an fsync of its own on the event loop; make_leader then finds nothing to change."""
    opened: list[tuple[NewLog, PartitionLog | Exception]] = []
    for new in planned:
        try:
            log = log_manager.open_new_log(new, sync=False)
            epoch = led_epochs.get(new.topic_partition)
            if epoch is not None and log.log_end_offset == 0:
                log.epoch_cache.assign(epoch, 0, durable=False)
            opened.append((new, log))
        except (OSError, LogError) as e:
            opened.append((new, e))
    try:
        log_manager.sync_new_logs(new for new, result in opened if not isinstance(result, Exception))
    except OSError as e:
        for _, result in opened:
            if not isinstance(result, Exception):
                result.close()
        return [(new, e) for new, _ in opened]
    return opened
