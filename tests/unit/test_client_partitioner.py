"""murmur2 and the keyed partitioner must place keys exactly where Kafka's Java client does."""

import pytest

from replog.client.partitioner import murmur2, partition_for_key

# org.apache.kafka.common.utils.UtilsTest.testMurmur2
JAVA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize(("data", "expected"), JAVA_VECTORS)
def test_murmur2_matches_kafka_utils_test(data, expected):
    assert murmur2(data) == expected


def test_murmur2_covers_every_tail_length():
    # One input per (length % 4) including the empty key; values from the Java implementation.
    assert murmur2(b"") == 275646681
    assert {len(d) % 4 for d, _ in JAVA_VECTORS} == {0, 2, 3}
    assert -(2**31) <= murmur2(b"a") < 2**31


def test_partition_for_key_uses_to_positive():
    # toPositive(-790332482) = 1357151166, and 1357151166 % 50 = 16
    assert partition_for_key(b"foobar", 50) == 16
    assert all(0 <= partition_for_key(b"key-%d" % i, 7) < 7 for i in range(1000))


def test_partition_for_key_is_stable_and_spreads():
    placements = [partition_for_key(b"key-%d" % i, 3) for i in range(3000)]
    assert placements == [partition_for_key(b"key-%d" % i, 3) for i in range(3000)]
    assert all(800 < placements.count(p) < 1200 for p in range(3))
