"""Which __consumer_offsets partition, and so which broker, coordinates a group.

Kafka: `Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions` (GroupCoordinatorService.partitionFor).
Clients only ever ask FindCoordinator, but every broker must agree with Kafka's mapping so that offsets
written by one broker are found by another, and so that tools reading __consumer_offsets agree too.
"""

INT32_MIN = -(2**31)


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: h = 31*h + c over UTF-16 code units, in signed 32-bit arithmetic.

    A character outside the BMP counts as its two surrogate code units, as in Java.
    """
    h = 0
    units = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def kafka_abs(n: int) -> int:
    """Kafka's Utils.abs: |n|, except that Integer.MIN_VALUE maps to 0 (Math.abs returns it unchanged)."""
    assert INT32_MIN <= n < 2**31
    return 0 if n == INT32_MIN else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    """The __consumer_offsets partition whose leader coordinates `group_id`."""
    assert num_partitions > 0
    partition = kafka_abs(java_string_hash(group_id)) % num_partitions
    assert 0 <= partition < num_partitions
    return partition
