"""Replica assignment for new topics: Kafka's rack-unaware round robin.

This is `AdminUtils.assignReplicasToBrokersRackUnaware` (ZooKeeper-era Kafka, still what kafka-topics and
the ZooKeeper controller used), with its example, for 5 brokers, 10 partitions and replication factor 3:

    broker-0  broker-1  broker-2  broker-3  broker-4
    p0        p1        p2        p3        p4        (1st replica)
    p5        p6        p7        p8        p9        (1st replica)
    p4        p0        p1        p2        p3        (2nd replica)
    p8        p9        p5        p6        p7        (2nd replica)
    p3        p4        p0        p1        p2        (3rd replica)
    p7        p8        p9        p5        p6        (3rd replica)

Why: first replicas (the preferred leaders) go round robin from a random broker, so leaders spread evenly
over brokers and over topics. Followers sit at a shift from their leader, and the shift grows by one after
every round of n partitions: the followers of one broker's partitions are then spread over the other
brokers, so when a broker fails its leadership and its fetch load fall on many brokers, not on one.
"""

import random
from collections.abc import Sequence

from kio.schema.errors import ErrorCode

from .cluster import MAX_PARTITIONS_PER_TOPIC, ControllerError
from .registry import is_valid_replica_list


def assign_replicas(brokers: Sequence[int], partitions: int, replication_factor: int, *,
                    start_index: int | None = None, replica_shift: int | None = None,
                    start_partition_id: int = 0,
                    rng: random.Random | None = None) -> dict[int, tuple[int, ...]]:
    """Replicas for partitions start_partition_id .. start_partition_id + partitions - 1, leader first.

    start_index (the broker, by position among the sorted ids, that leads the first partition) and
    replica_shift (the followers' initial shift) are drawn from rng when not given; Kafka's fixedStartIndex
    fixes both to the same value. start_partition_id is for partitions added to an existing topic.
    """
    # Kafka's checks in Kafka's order, with its messages; the partition limit is ours (see cluster.py).
    if partitions <= 0:
        raise ControllerError(ErrorCode.invalid_partitions, "Number of partitions must be larger than 0.")
    if partitions > MAX_PARTITIONS_PER_TOPIC:
        raise ControllerError(ErrorCode.invalid_partitions,
                              f"Number of partitions: {partitions} larger than {MAX_PARTITIONS_PER_TOPIC}.")
    if replication_factor <= 0:
        raise ControllerError(ErrorCode.invalid_replication_factor,
                              "Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise ControllerError(ErrorCode.invalid_replication_factor,
                              f"Replication factor: {replication_factor} larger than available brokers: "
                              f"{len(brokers)}.")
    assert is_valid_replica_list(brokers), brokers
    assert start_partition_id >= 0, start_partition_id
    # Sorted, as Kafka's getBrokerMetadatas returns them: the result depends only on the set of brokers.
    ordered = sorted(brokers)
    count = len(ordered)
    rng = rng if rng is not None else random.Random()
    if start_index is None:
        start_index = rng.randrange(count)
    if replica_shift is None:
        replica_shift = rng.randrange(count)
    assert 0 <= start_index < count and 0 <= replica_shift < count, (start_index, replica_shift)

    assignment: dict[int, tuple[int, ...]] = {}
    for partition in range(start_partition_id, start_partition_id + partitions):
        if partition > 0 and partition % count == 0:
            replica_shift += 1  # a new round: without it, round k would repeat round 0's followers
        first = (partition + start_index) % count
        # Followers at 1 + (shift + j) % (n - 1) positions after the leader: never the leader itself, and
        # distinct for j < n - 1 (n = 1 means replication factor 1, no followers, no division).
        followers = (ordered[(first + 1 + (replica_shift + j) % (count - 1)) % count]
                     for j in range(replication_factor - 1))
        assignment[partition] = (ordered[first], *followers)
    return assignment
