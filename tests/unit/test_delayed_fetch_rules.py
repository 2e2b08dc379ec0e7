"""When a parked fetch answers (Kafka's DelayedFetch.tryComplete cases A-H), decided from cached values only."""

import pytest

from replog.broker.delayed_fetch_rules import ParkedPartition, bytes_available, delayed_fetch_can_complete
from replog.log.offset_metadata import LogOffsetMetadata as At

# (fetch offset, end offset, max bytes) -> bytes a read could return now, or None: answer at once.
BYTES_AVAILABLE_CASES = [
    ("nothing new: fetch offset is the end", At(10, 0, 500), At(10, 0, 500), 1000, 0),
    ("same offset, end moved to a new segment by a roll", At(10, 0, 500), At(10, 10, 0), 1000, 0),
    ("data on the same segment counts its bytes", At(10, 0, 500), At(14, 0, 800), 1000, 300),
    ("data beyond max_bytes counts max_bytes", At(10, 0, 500), At(14, 0, 800), 200, 200),
    ("F: end truncated below the fetch offset, same segment", At(10, 0, 500), At(8, 0, 400), 1000, None),
    ("F: end truncated below the fetch offset's segment", At(10, 10, 0), At(8, 0, 400), 1000, None),
    ("F: fetch offset on an older segment than the end", At(10, 0, 500), At(30, 20, 100), 1000, None),
    ("F: end on an older segment (truncated and refilled)", At(10, 10, 40), At(30, 0, 900), 1000, None),
    ("end position unknown: the fresh read looks it up", At(10, 0, 500), At(14), 1000, None),
    ("fetch position unknown: the fresh read looks it up", At(10), At(14, 0, 800), 1000, None),
    ("unknown positions do not matter when nothing is new", At(10), At(10), 1000, 0),
]


@pytest.mark.parametrize(("case", "fetch", "end", "max_bytes", "expected"), BYTES_AVAILABLE_CASES,
                         ids=[case[0] for case in BYTES_AVAILABLE_CASES])
def test_bytes_available_from_cached_positions(case, fetch, end, max_bytes, expected):
    assert bytes_available(fetch, end, max_bytes) == expected


FETCHED_AT = At(10, 0, 500)


def parked(*, leads=True, epoch_matches=True, diverges=False, fetch=FETCHED_AT, end=FETCHED_AT,
           max_bytes=1000) -> ParkedPartition:
    return ParkedPartition(leads, epoch_matches, diverges, fetch, end, max_bytes)


WITH_DATA = parked(end=At(14, 0, 800))  # 300 bytes available
# (partitions, min_bytes) -> whether the fetch answers now
CAN_COMPLETE_CASES = [
    ("no data yet: keep waiting", [parked()], 1, False),
    ("A-D: leadership lost, partition gone or its dir offline", [parked(leads=False)], 1, True),
    ("E: the fetch's leader epoch is no longer the leader's", [parked(epoch_matches=False)], 1, True),
    ("H: the fetcher's last fetched epoch now diverges", [parked(diverges=True)], 1, True),
    ("F in any partition answers for all", [parked(), parked(end=At(8, 0, 400))], 1 << 20, True),
    ("G: min_bytes reached on one partition", [WITH_DATA], 300, True),
    ("G: min_bytes not reached", [WITH_DATA], 301, False),
    ("G: bytes add up over partitions", [WITH_DATA, WITH_DATA], 600, True),
    ("G: each partition counts at most its max_bytes", [parked(end=At(14, 0, 800), max_bytes=100)] * 2, 201, False),
    ("a lost partition answers even with other data short", [WITH_DATA, parked(leads=False)], 1 << 20, True),
]


@pytest.mark.parametrize(("case", "partitions", "min_bytes", "expected"), CAN_COMPLETE_CASES,
                         ids=[case[0] for case in CAN_COMPLETE_CASES])
def test_delayed_fetch_completes_on_kafkas_cases_only(case, partitions, min_bytes, expected):
    assert delayed_fetch_can_complete(partitions, min_bytes) is expected
