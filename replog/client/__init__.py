"""replog's bundled Kafka client: async Producer, Consumer and Admin, plus blocking wrappers."""

from .admin import Admin, NewTopic, PartitionDescription, TopicDescription
from .cluster import BrokerInfo, Cluster, PartitionInfo
from .connection import Connection
from .consumer import Consumer, ConsumerRecord, OffsetAndTimestamp
from .errors import KafkaError
from .partitioner import murmur2, partition_for_key
from .producer import Producer, RecordMetadata
from .rebalance_listener import ConsumerRebalanceListener
from .sync import SyncAdmin, SyncConsumer, SyncProducer

__all__ = [
    "Admin",
    "BrokerInfo",
    "Cluster",
    "Connection",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "KafkaError",
    "NewTopic",
    "OffsetAndTimestamp",
    "PartitionDescription",
    "PartitionInfo",
    "Producer",
    "RecordMetadata",
    "SyncAdmin",
    "SyncConsumer",
    "SyncProducer",
    "TopicDescription",
    "murmur2",
    "partition_for_key",
]
