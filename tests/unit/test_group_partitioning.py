"""Which __consumer_offsets partition coordinates a group: Java's String.hashCode and Kafka's Utils.abs."""

import pytest

from replog.coordinator.partitioning import INT32_MIN, java_string_hash, kafka_abs, partition_for


def polynomial_hash(units: list[int]) -> int:
    """String.hashCode's documented definition, s[0]*31^(n-1) + ... + s[n-1], reduced to a signed int32 once
    at the end (the loop in the module reduces at every step; both must agree)."""
    n = len(units)
    h = sum(u * 31 ** (n - 1 - i) for i, u in enumerate(units)) % 2**32
    return h - 2**32 if h >= 2**31 else h


@pytest.mark.parametrize(
    ("group", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("ab", 97 * 31 + 98),
        ("foo", 101574),  # Kafka's GroupCoordinatorServiceTest uses "foo"
        ("Aa", 2112),  # the textbook collision: "Aa" and "BB" hash alike
        ("BB", 2112),
        # A character outside the BMP is two UTF-16 code units, U+D83D U+DE00.
        ("\U0001f600", 0xD83D * 31 + 0xDE00),
        # Overflow: the sum wraps to exactly Integer.MIN_VALUE (a well-known Java curiosity).
        ("polygenelubricants", INT32_MIN),
    ],
)
def test_java_string_hash_of_known_strings(group, expected):
    assert java_string_hash(group) == expected


@pytest.mark.parametrize("group", ["my-group", "console-consumer-12345", "zzzzzzzzzzzz", "é\U0001f600x"])
def test_java_string_hash_matches_the_polynomial_definition_past_overflow(group):
    data = group.encode("utf-16-be")
    units = [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]  # code units
    assert java_string_hash(group) == polynomial_hash(units)


@pytest.mark.parametrize(("n", "expected"), [(0, 0), (5, 5), (-5, 5), (2**31 - 1, 2**31 - 1), (INT32_MIN, 0)])
def test_kafka_abs_maps_int_min_to_zero(n, expected):
    assert kafka_abs(n) == expected


@pytest.mark.parametrize(
    ("group", "partitions", "expected"),
    [
        ("foo", 50, 101574 % 50),
        ("foo", 10, 4),
        ("", 50, 0),
        ("polygenelubricants", 50, 0),  # abs(MIN_VALUE) is 0 in Kafka, not MIN_VALUE
        ("\U0001f600", 50, 1772899 % 50),
        ("my-group", 50, 1906497762 % 50),  # its hash is negative, -1906497762
    ],
)
def test_partition_for(group, partitions, expected):
    assert partition_for(group, partitions) == expected
