"""Stray logs: replicas on this broker's disks that the cluster no longer assigns to it.

A reassignment removes a replica with StopReplica (delete); a broker that was down then never hears it and
finds the log on disk when it starts. Kafka's KRaft brokers find such stray partitions in the first
metadata they load after starting (ReplicaManager.findStrayPartitionsFromMetadataSnapshot, KAFKA-14616) and
delete them; so does this, from the first UpdateMetadata of each registration: a log that no LeaderAndIsr
claimed, of a topic that exists with the same topic id, whose replicas do not include this broker.
"""

import logging

from replog.log.partition_log import TopicPartition

from .metadata import MetadataImage
from .replica_manager import ReplicaManager

log = logging.getLogger(__name__)


def stray_partitions(replicas: ReplicaManager, image: MetadataImage) -> list[TopicPartition]:
    stray = []
    for partition_log in replicas.log_manager.all_logs():
        key = partition_log.topic_partition
        topic = image.topics.get(key.topic)
        if key in replicas.partitions or topic is None or topic.topic_id != partition_log.topic_id:
            continue  # hosted, or a topic deleted meanwhile (the controller deletes those when we register)
        assigned = topic.partitions.get(key.partition)
        if assigned is not None and replicas.node_id not in assigned.replicas:
            stray.append(key)
    return stray


def delete_stray_logs(replicas: ReplicaManager, image: MetadataImage) -> list[TopicPartition]:
    stray = stray_partitions(replicas, image)
    for key in stray:
        log.warning("%s-%d: not a replica here any more (reassigned while this broker was away): deleting its "
                    "log", key.topic, key.partition)
        replicas.log_manager.delete_log(key.topic, key.partition)
    return stray
