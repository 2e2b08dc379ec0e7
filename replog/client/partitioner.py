"""Kafka's default partitioner for keyed records, so keys land on the partitions Java clients pick."""


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 (signed 32-bit result), so keys land on the partitions Java clients pick."""
    m = 0x5BD1E995
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    tail = length & ~3
    for i in range(0, tail, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    assert 0 <= h < 2**32
    return h - 2**32 if h >= 2**31 else h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """Kafka's default partitioner for keyed records: toPositive(murmur2(key)) % numPartitions."""
    assert num_partitions > 0
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions

