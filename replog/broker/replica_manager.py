"""The broker's partitions: creates them from metadata, appends, reads, and wakes delayed operations.

Handlers parse and encode; this module decides. Wake-up rule (facts §5): any append wakes delayed fetches
on that partition (followers wait for the LEO); a high-watermark move also wakes delayed produces.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from replog.log.config import LogConfig
from replog.log.errors import LogError, OffsetOutOfRangeError
from replog.log.log_manager import LogManager
from replog.log.partition_log import AppendInfo, LogReadResult
from replog.protocol.records import CorruptRecordError, InvalidRecordError

from .metadata import MetadataImage, TopicMetadata
from .partition import LeadershipState, Partition, PartitionError
from .purgatory import Purgatory

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class PartitionAppendResult:
    error_code: ErrorCode
    info: AppendInfo | None = None
    error_message: str | None = None


@dataclass(slots=True)
class PartitionReadResult:
    error_code: ErrorCode
    result: LogReadResult | None = None
    high_watermark: int = -1
    log_start_offset: int = -1


# Everything the log and record layers raise carries the Kafka error code it travels as.
_APPEND_ERRORS = (PartitionError, LogError, CorruptRecordError, InvalidRecordError)


class ReplicaManager:
    def __init__(self, node_id: int, log_manager: LogManager, base_log_config: LogConfig,
                 default_min_insync_replicas: int, *, fetch_purgatory_size: int, produce_purgatory_size: int) -> None:
        self.node_id = node_id
        self.log_manager = log_manager
        self.base_log_config = base_log_config
        self.default_min_insync_replicas = default_min_insync_replicas
        self.partitions: dict[TopicPartition, Partition] = {}
        self.fetch_purgatory = Purgatory("fetch", fetch_purgatory_size)
        self.produce_purgatory = Purgatory("produce", produce_purgatory_size)
        self.on_partition_deleted: Callable[[TopicPartition], None] | None = None

    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def partition_or_error(self, topic: str, index: int) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is None:
            raise PartitionError(ErrorCode.unknown_topic_or_partition)
        return partition

    # metadata
    def apply_metadata(self, image: MetadataImage) -> None:
        """Create local partitions for every topic in image and take the leadership it assigns."""
        for topic in image.topics.values():
            for index, meta in topic.partitions.items():
                if self.node_id in meta.replicas:
                    self._ensure_partition(topic, index, meta)
        live = {(t.name, i) for t in image.topics.values() for i in t.partitions}
        for key in [k for k in self.partitions if k not in live]:
            self.delete_partition(key)

    def _ensure_partition(self, topic: TopicMetadata, index: int, meta) -> None:
        key = (topic.name, index)
        partition = self.partitions.get(key)
        if partition is None:
            config = LogConfig.from_topic_configs(topic.configs, self.base_log_config)
            partition_log = self.log_manager.get_or_create_log(topic.name, index, config, topic.topic_id)
            min_isr = int(topic.configs.get("min.insync.replicas", self.default_min_insync_replicas))
            partition = Partition(topic.name, index, topic.topic_id, partition_log, self.node_id, min_isr)
            self.partitions[key] = partition
        state = LeadershipState(meta.leader, meta.leader_epoch, meta.partition_epoch, tuple(meta.replicas),
                                tuple(meta.isr))
        if meta.leader == self.node_id:
            partition.make_leader(state)
        self._wake(key, hw_moved=True)

    def delete_partition(self, key: TopicPartition) -> None:
        partition = self.partitions.pop(key, None)
        if partition is None:
            return
        self.log_manager.delete_log(*key)
        self._wake(key, hw_moved=True)  # parked requests on it answer NOT_LEADER / UNKNOWN now

    # produce
    def append_to_partition(self, topic: str, index: int, records: memoryview | None,
                            required_acks: int) -> PartitionAppendResult:
        try:
            partition = self.partition_or_error(topic, index)
            if records is None or len(records) == 0:
                raise PartitionError(ErrorCode.corrupt_message, "empty record set")
            hw_before = partition.high_watermark
            info = partition.append_as_leader(records, required_acks)
        except _APPEND_ERRORS as e:
            return PartitionAppendResult(e.error_code, error_message=str(e))
        except OSError as e:
            log.error("append to %s-%d failed: %s", topic, index, e)
            return PartitionAppendResult(ErrorCode.kafka_storage_error, error_message=str(e))
        self._wake((topic, index), hw_moved=partition.high_watermark != hw_before)
        return PartitionAppendResult(ErrorCode.none, info)

    # fetch
    def read_partition(self, topic: str, index: int, fetch_offset: int, *, current_leader_epoch: int,
                       max_bytes: int, from_follower: bool, min_one_batch: bool) -> PartitionReadResult:
        partition = self.partitions.get((topic, index))
        if partition is None:
            return PartitionReadResult(ErrorCode.unknown_topic_or_partition)
        if not partition.is_leader:
            return PartitionReadResult(ErrorCode.not_leader_or_follower)
        epoch_error = partition.check_leader_epoch(current_leader_epoch)
        if epoch_error != ErrorCode.none:
            return PartitionReadResult(epoch_error)
        hw, start = partition.high_watermark, partition.log.log_start_offset
        try:
            result = partition.read(fetch_offset, max_bytes=max_bytes, from_follower=from_follower,
                                    min_one_batch=min_one_batch)
        except OffsetOutOfRangeError:
            return PartitionReadResult(ErrorCode.offset_out_of_range, high_watermark=hw, log_start_offset=start)
        except OSError:
            log.exception("read of %s-%d failed", topic, index)
            return PartitionReadResult(ErrorCode.kafka_storage_error)
        return PartitionReadResult(ErrorCode.none, result, hw, start)

    def _wake(self, key: TopicPartition, *, hw_moved: bool) -> None:
        self.fetch_purgatory.check_and_complete(key)
        if hw_moved:
            self.produce_purgatory.check_and_complete(key)

    def shutdown(self) -> None:
        self.fetch_purgatory.complete_all()
        self.produce_purgatory.complete_all()
