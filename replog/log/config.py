"""Per-log configuration; field names mirror Kafka's topic configs."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

_DAY_MS = 24 * 3600 * 1000

# Topic config key -> (LogConfig field, smallest legal value); Kafka's minimums.
_TOPIC_KEYS = {
    "segment.bytes": ("segment_bytes", 14),
    "segment.ms": ("segment_ms", 1),
    "retention.ms": ("retention_ms", -1),
    "retention.bytes": ("retention_bytes", -1),
    "index.interval.bytes": ("index_interval_bytes", 0),
    "segment.index.bytes": ("segment_index_bytes", 12),
    "max.message.bytes": ("max_message_bytes", 0),
    "file.delete.delay.ms": ("file_delete_delay_ms", 0),
}
_INT32_MAX = (1 << 31) - 1
_INT64_MAX = (1 << 63) - 1
# Fields stored in 32-bit Kafka configs; the rest are longs.
_INT32_FIELDS = {"segment_bytes", "index_interval_bytes", "segment_index_bytes", "max_message_bytes"}


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * _DAY_MS
    retention_ms: int = 7 * _DAY_MS
    retention_bytes: int = -1
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10 * 1024 * 1024
    max_message_bytes: int = 1048588
    file_delete_delay_ms: int = 60000

    def __post_init__(self) -> None:
        for field_name, minimum in _TOPIC_KEYS.values():
            value = getattr(self, field_name)
            maximum = _INT32_MAX if field_name in _INT32_FIELDS else _INT64_MAX
            if not isinstance(value, int) or not minimum <= value <= maximum:
                raise ValueError(f"{field_name}={value!r} must be an integer in [{minimum}, {maximum}]")

    @classmethod
    def from_topic_configs(cls, configs: Mapping[str, str], base: LogConfig | None = None) -> LogConfig:
        """Apply Kafka topic config overrides on top of `base`; other keys are ignored."""
        overrides: dict[str, int] = {}
        for key, raw in configs.items():
            if key not in _TOPIC_KEYS:
                continue
            try:
                overrides[_TOPIC_KEYS[key][0]] = int(raw)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{key}={raw!r} is not an integer") from exc
        return dataclasses.replace(base if base is not None else cls(), **overrides)
