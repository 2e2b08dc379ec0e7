"""Which leading segments retention deletes: retention.ms, retention.bytes and the log start offset, never
the active segment nor one holding offsets the HW has not passed."""

from types import SimpleNamespace

import pytest

from replog.log.config import LogConfig
from replog.log.retention import segments_past_retention

NOW_MS = 100_000


def segment(base_offset: int, *, size: int = 100, max_timestamp: int = NOW_MS) -> SimpleNamespace:
    return SimpleNamespace(base_offset=base_offset, size=size, max_timestamp_so_far=max_timestamp)


OLD = NOW_MS - 10_000  # past a retention.ms of 5 s
# (segments, config, high watermark, log start) -> base offsets deleted
CASES = [
    ("nothing expired, no size limit", [segment(0), segment(10), segment(20)], LogConfig(), 20, 0, []),
    ("expired segments go, oldest first", [segment(0, max_timestamp=OLD), segment(10, max_timestamp=OLD),
                                           segment(20)], LogConfig(retention_ms=5000), 20, 0, [0, 10]),
    ("an expired segment after a live one stays", [segment(0), segment(10, max_timestamp=OLD), segment(20)],
     LogConfig(retention_ms=5000), 20, 0, []),
    ("the active segment stays however old", [segment(0, max_timestamp=OLD)], LogConfig(retention_ms=5000), 0, 0,
     []),
    ("not past the HW: consumers may not have it", [segment(0, max_timestamp=OLD), segment(10, max_timestamp=OLD),
                                                    segment(20)], LogConfig(retention_ms=5000), 15, 0, [0]),
    ("retention.bytes keeps at least that much", [segment(0), segment(10), segment(20)],
     LogConfig(retention_bytes=150), 20, 0, [0]),
    ("below the log start offset", [segment(0), segment(10), segment(20)], LogConfig(), 20, 10, [0]),
    ("compact only: no time or size retention", [segment(0, max_timestamp=OLD), segment(10), segment(20)],
     LogConfig(retention_ms=5000, retention_bytes=150, cleanup_policy="compact"), 20, 0, []),
    ("compact only: still below the log start offset", [segment(0), segment(10), segment(20)],
     LogConfig(cleanup_policy="compact"), 20, 10, [0]),
    ("compact,delete: retention applies", [segment(0, max_timestamp=OLD), segment(10), segment(20)],
     LogConfig(retention_ms=5000, cleanup_policy="compact,delete"), 20, 0, [0]),
]


@pytest.mark.parametrize(("case", "segments", "config", "high_watermark", "log_start", "deleted"), CASES,
                         ids=[case[0] for case in CASES])
def test_segments_past_retention(case, segments, config, high_watermark, log_start, deleted):
    chosen = segments_past_retention(segments, now_ms=NOW_MS, config=config, high_watermark=high_watermark,
                                     log_start_offset=log_start)
    assert [s.base_offset for s in chosen] == deleted
