"""The log cleaner's pure decisions as table tests: first dirty offset, cleanable range and dirty ratio,
compaction lag, grouping, tombstone horizon, which records survive, and the bounded offset map."""

from types import SimpleNamespace

import pytest

from replog.log.cleaner_rules import (
    INT32_MAX,
    OffsetMap,
    cleanable_range,
    compaction_overdue,
    delete_horizon_ms,
    first_dirty_offset,
    group_by_size,
    needs_cleaning,
    retain_record,
)
from replog.log.config import LogConfig

NOW = 1_000_000


def seg(base: int, size: int = 100, ts: int = NOW - 10_000) -> SimpleNamespace:
    return SimpleNamespace(base_offset=base, size=size, max_timestamp_so_far=ts)


@pytest.mark.parametrize(("checkpoint", "log_start", "leo", "expected"), [
    (None, 0, 100, 0),
    (40, 0, 100, 40),
    (40, 50, 100, 50),   # retention or DeleteRecords passed the checkpoint
    (140, 0, 100, 0),    # truncated below the checkpoint: clean from the start
    (100, 0, 100, 100),
], ids=["no checkpoint", "checkpoint", "below log start", "past the log end", "at the log end"])
def test_first_dirty_offset(checkpoint, log_start, leo, expected):
    assert first_dirty_offset(checkpoint, log_start_offset=log_start, log_end_offset=leo) == expected


FOUR = [seg(0), seg(10), seg(20), seg(30, size=5)]  # the last is the active segment
# (segments, first dirty, HW, min lag) -> (end, clean bytes, dirty bytes, bases cleaned)
RANGES = [
    ("all sealed segments, no clean section", FOUR, 0, 35, 0, (30, 0, 300, [0, 10, 20])),
    ("never the active segment", [seg(0, size=5)], 0, 5, 0, (0, 0, 0, [])),
    ("clean section then dirty", FOUR, 20, 35, 0, (30, 200, 100, [0, 10, 20])),
    ("bounded by the HW: whole segments below it", FOUR, 0, 25, 0, (20, 0, 200, [0, 10])),
    ("HW at the first segment's end", FOUR, 0, 10, 0, (10, 0, 100, [0])),
    ("HW inside the first segment: nothing", FOUR, 0, 5, 0, (0, 0, 0, [])),
    ("min lag stops at the first young dirty segment",
     [seg(0), seg(10, ts=NOW - 100), seg(20), seg(30)], 0, 35, 1000, (10, 0, 100, [0])),
    ("min lag ignores the clean section",
     [seg(0, ts=NOW - 100), seg(10), seg(20), seg(30)], 10, 35, 1000, (30, 100, 200, [0, 10, 20])),
    ("nothing dirty", FOUR, 30, 35, 0, (30, 300, 0, [0, 10, 20])),
]


@pytest.mark.parametrize(("segments", "first_dirty", "hw", "lag", "expected"), [c[1:] for c in RANGES],
                         ids=[c[0] for c in RANGES])
def test_cleanable_range(segments, first_dirty, hw, lag, expected):
    found = cleanable_range(segments, first_dirty=first_dirty, high_watermark=hw, now_ms=NOW,
                            min_compaction_lag_ms=lag)
    end, clean, dirty, bases = expected
    assert (found.end, found.clean_bytes, found.dirty_bytes) == (end, clean, dirty)
    assert [s.base_offset for s, _ in found.segments] == bases


@pytest.mark.parametrize(("first_dirty", "ratio", "overdue", "expected"), [
    (0, 0.5, False, True),     # all dirty: ratio 1.0
    (20, 0.5, False, False),   # 100 dirty of 300: ratio 0.33
    (20, 0.3, False, True),
    (10, 2 / 3, False, False),  # exactly the ratio is not above it (Kafka compares with >)
    (20, 0.9, True, True),     # overdue: any dirty bytes
    (30, 0.0, True, False),    # nothing dirty, nothing to do
], ids=["all dirty", "below ratio", "above ratio", "at the ratio", "overdue", "overdue but clean"])
def test_needs_cleaning(first_dirty, ratio, overdue, expected):
    cleanable = cleanable_range(FOUR, first_dirty=first_dirty, high_watermark=35, now_ms=NOW,
                                min_compaction_lag_ms=0)
    assert needs_cleaning(cleanable, min_cleanable_ratio=ratio, overdue=overdue) is expected


def test_dirty_ratio_and_defaults():
    cleanable = cleanable_range(FOUR, first_dirty=10, high_watermark=35, now_ms=NOW, min_compaction_lag_ms=0)
    assert cleanable.dirty_ratio == pytest.approx(2 / 3)
    assert LogConfig().min_cleanable_dirty_ratio == 0.5
    assert LogConfig().delete_retention_ms == 86_400_000


@pytest.mark.parametrize(("max_lag", "expected"), [(5_000, True), (20_000, False)])
def test_compaction_overdue_by_the_first_dirty_segment(max_lag, expected):
    cleanable = cleanable_range(FOUR, first_dirty=10, high_watermark=35, now_ms=NOW, min_compaction_lag_ms=0)
    assert compaction_overdue(cleanable, now_ms=NOW, max_compaction_lag_ms=max_lag) is expected


@pytest.mark.parametrize(("sizes_and_ends", "max_bytes", "groups"), [
    ([(0, 100, 10), (10, 100, 20), (20, 100, 30)], 250, [[0, 10], [20]]),
    ([(0, 0, 10), (10, 0, 20), (20, 300, 30)], 250, [[0, 10], [20]]),
    ([(0, 100, 10), (10, 100, 20)], 50, [[0], [10]]),
    ([(0, 10, 10), (10, 10, INT32_MAX + 5)], 1000, [[0], [10]]),
], ids=["by bytes", "empty cleaned segments merge", "one segment over the limit alone", "int32 offset span"])
def test_group_by_size(sizes_and_ends, max_bytes, groups):
    segments = [(seg(base, size), end) for base, size, end in sizes_and_ends]
    found = group_by_size(segments, max_bytes=max_bytes)
    assert [[s.base_offset for s, _ in group] for group in found] == groups


@pytest.mark.parametrize(("mtime", "retention", "expected"), [(None, 1000, 0), (50_000, 1000, 49_000)])
def test_delete_horizon(mtime, retention, expected):
    assert delete_horizon_ms(mtime, retention) == expected


# (key, value, offset, latest offset of the key, retain tombstones) -> kept
RECORDS = [
    ("latest value", b"k", b"v", 7, 7, False, True),
    ("superseded value", b"k", b"v", 3, 7, False, False),
    ("key only in the clean section", b"k", b"v", 3, None, False, True),
    ("keyless record", None, b"v", 3, None, True, False),
    ("latest tombstone inside the horizon", b"k", None, 7, 7, True, True),
    ("latest tombstone past the horizon", b"k", None, 7, 7, False, False),
    ("superseded tombstone", b"k", None, 3, 7, True, False),
    ("record after the mapped range", b"k", b"v", 9, 7, False, True),
]


@pytest.mark.parametrize(("key", "value", "offset", "latest", "tombstones", "kept"), [r[1:] for r in RECORDS],
                         ids=[r[0] for r in RECORDS])
def test_retain_record(key, value, offset, latest, tombstones, kept):
    assert retain_record(key=key, value=value, offset=offset, latest_offset=latest,
                         retain_tombstones=tombstones) is kept


def test_offset_map_keeps_the_last_offset_and_is_bounded():
    offset_map = OffsetMap(240)  # 10 entries of 24 bytes at 90%: 9
    assert offset_map.capacity == 9
    offset_map.put(b"a", 1)
    offset_map.put(b"a", 5)
    assert offset_map.get(b"a") == 5
    assert offset_map.get(b"b") is None
    for number in range(8):
        offset_map.put(bytes([number]), number)
    assert offset_map.free == 0
    offset_map.put(b"a", 6)  # an existing key still updates when full
    with pytest.raises(AssertionError):
        offset_map.put(b"new", 1)


@pytest.mark.parametrize(("configs", "compact", "delete"), [
    ({}, False, True),
    ({"cleanup.policy": "compact"}, True, False),
    ({"cleanup.policy": "compact,delete"}, True, True),
    ({"cleanup.policy": "delete, compact"}, True, True),
])
def test_cleanup_policy_parsing(configs, compact, delete):
    config = LogConfig.from_topic_configs(configs)
    assert (config.compact, config.delete) == (compact, delete)


@pytest.mark.parametrize("configs", [{"cleanup.policy": "compress"}, {"min.cleanable.dirty.ratio": "-0.1"},
                                     {"min.cleanable.dirty.ratio": "x"}, {"delete.retention.ms": "-1"},
                                     {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}])
def test_bad_compaction_configs_are_refused(configs):
    with pytest.raises(ValueError):
        LogConfig.from_topic_configs(configs)
