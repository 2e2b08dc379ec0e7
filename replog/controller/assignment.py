"""Replica assignment for new topics and partitions: Kafka's round robin, rack-unaware or rack-aware.

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

With broker.rack set, `AdminUtils.assignReplicasToBrokersRackAware`: the same walk over a rack-alternating
list of brokers (rack1's first, rack2's first, ..., rack1's second, ...), where a follower is skipped while
its rack, or the broker itself, already holds a replica of the partition and an unused rack (broker) remains.
A partition's replicas then span min(replication factor, racks) racks, so losing a rack loses no partition
whose replication factor exceeds one. Brokers without a rack count as one rack of their own, as KRaft's
StripedReplicaPlacer treats them, rather than refusing the topic as ZooKeeper-era Kafka's enforced mode did.
"""

import random
from collections.abc import Mapping, Sequence

from kio.schema.errors import ErrorCode

from .cluster import MAX_PARTITIONS_PER_TOPIC, ControllerError
from .registry import is_valid_replica_list


def assign_replicas(brokers: Sequence[int], partitions: int, replication_factor: int, *,
                    start_index: int | None = None, replica_shift: int | None = None,
                    start_partition_id: int = 0, racks: Mapping[int, str | None] | None = None,
                    rng: random.Random | None = None) -> dict[int, tuple[int, ...]]:
    """Replicas for partitions start_partition_id .. start_partition_id + partitions - 1, leader first.

    start_index (the broker, by position among the sorted ids, that leads the first partition) and
    replica_shift (the followers' initial shift) are drawn from rng when not given; Kafka's fixedStartIndex
    fixes both to the same value. start_partition_id is for partitions added to an existing topic. racks
    (broker id -> broker.rack) makes the assignment rack-aware when any broker has one.
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
    rack_of = {b: (racks or {}).get(b) or "" for b in brokers}
    rack_aware = any(rack_of.values())
    # Sorted, as Kafka's getBrokerMetadatas returns them: the result depends only on the set of brokers.
    ordered = rack_alternated(rack_of) if rack_aware else sorted(brokers)
    count = len(ordered)
    rng = rng if rng is not None else random.Random()
    if start_index is None:
        start_index = rng.randrange(count)
    if replica_shift is None:
        replica_shift = rng.randrange(count)
    assert 0 <= start_index < count and 0 <= replica_shift < count, (start_index, replica_shift)

    if rack_aware:
        return _assign_rack_aware(ordered, rack_of, partitions, replication_factor, start_index, replica_shift,
                                  start_partition_id)
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



def rack_alternated(rack_of: Mapping[int, str]) -> list[int]:
    """Kafka's getRackAlternatedBrokerList: the racks in name order, taking each rack's next broker (by id)
    in turn, e.g. {0: r1, 1: r2, 2: r2, 3: r3, 4: r3, 5: r1} -> [0, 1, 3, 5, 2, 4]."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in sorted(rack_of.items()):
        by_rack.setdefault(rack, []).append(broker)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    return [column[row] for row in range(max(map(len, columns))) for column in columns if row < len(column)]


def _assign_rack_aware(ordered: list[int], rack_of: Mapping[int, str], partitions: int, replication_factor: int,
                       start_index: int, replica_shift: int, start_partition_id: int) -> dict[int, tuple[int, ...]]:
    count, rack_count = len(ordered), len(set(rack_of.values()))
    assignment: dict[int, tuple[int, ...]] = {}
    for partition in range(start_partition_id, start_partition_id + partitions):
        if partition > 0 and partition % count == 0:
            replica_shift += 1
        first = (partition + start_index) % count
        replicas = [ordered[first]]
        used_racks, k = {rack_of[ordered[first]]}, 0
        while len(replicas) < replication_factor:
            # Kafka's replicaIndex with the shift scaled by the rack count: followers land on other racks.
            shift = 1 + (replica_shift * rack_count + k) % (count - 1)
            broker = ordered[(first + shift) % count]
            k += 1
            rack_ok = rack_of[broker] not in used_racks or len(used_racks) == rack_count
            if rack_ok and broker not in replicas:
                replicas.append(broker)
                used_racks.add(rack_of[broker])
        assignment[partition] = tuple(replicas)
    return assignment
