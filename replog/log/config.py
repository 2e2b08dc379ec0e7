"""Per-log configuration; field names mirror Kafka's topic configs."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

_DAY_MS = 24 * 3600 * 1000
_INT32_MAX = (1 << 31) - 1
_INT64_MAX = (1 << 63) - 1

# Integer topic configs: key -> (LogConfig field, smallest legal value); Kafka's minimums.
_TOPIC_KEYS = {
    "segment.bytes": ("segment_bytes", 14),
    "segment.ms": ("segment_ms", 1),
    "retention.ms": ("retention_ms", -1),
    "retention.bytes": ("retention_bytes", -1),
    "index.interval.bytes": ("index_interval_bytes", 0),
    "segment.index.bytes": ("segment_index_bytes", 12),
    "max.message.bytes": ("max_message_bytes", 0),
    "file.delete.delay.ms": ("file_delete_delay_ms", 0),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", 0),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", 1),
    "delete.retention.ms": ("delete_retention_ms", 0),
}
# Fields stored in 32-bit Kafka configs; the rest are longs.
_INT32_FIELDS = {"segment_bytes", "index_interval_bytes", "segment_index_bytes", "max_message_bytes"}

CLEANUP_DELETE = "delete"
CLEANUP_COMPACT = "compact"
# Kafka's cleanup.policy is a list of `delete` and `compact`; order does not matter.
CLEANUP_POLICIES = frozenset({"delete", "compact", "compact,delete", "delete,compact"})


def parse_cleanup_policy(raw: str) -> str:
    """`delete`, `compact` or `compact,delete` (the canonical spelling of both together)."""
    words = sorted({word.strip() for word in raw.split(",")})
    if not words or not set(words) <= {CLEANUP_DELETE, CLEANUP_COMPACT}:
        raise ValueError(f"cleanup.policy={raw!r} must be delete, compact or compact,delete")
    return ",".join(words)


def _parse_ratio(raw: str) -> float:
    try:
        return float(raw)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"min.cleanable.dirty.ratio={raw!r} is not a number") from exc


# Non-integer topic configs: key -> (LogConfig field, parser).
_OTHER_TOPIC_KEYS: dict[str, tuple[str, Callable[[str], object]]] = {
    "cleanup.policy": ("cleanup_policy", parse_cleanup_policy),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", _parse_ratio),
}


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
    cleanup_policy: str = CLEANUP_DELETE
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = _INT64_MAX
    delete_retention_ms: int = _DAY_MS
    # The broker's log.writeback.interval.bytes (replog's own, not a topic config): every this many bytes
    # appended to a segment, start their writeback (writeback.py); 0: off.
    writeback_interval_bytes: int = 0

    def __post_init__(self) -> None:
        for field_name, minimum in _TOPIC_KEYS.values():
            value = getattr(self, field_name)
            maximum = _INT32_MAX if field_name in _INT32_FIELDS else _INT64_MAX
            if not isinstance(value, int) or not minimum <= value <= maximum:
                raise ValueError(f"{field_name}={value!r} must be an integer in [{minimum}, {maximum}]")
        if not isinstance(self.writeback_interval_bytes, int) or self.writeback_interval_bytes < 0:
            raise ValueError(f"log.writeback.interval.bytes={self.writeback_interval_bytes!r} must not be negative")
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise ValueError(f"min.cleanable.dirty.ratio={self.min_cleanable_dirty_ratio} must be in [0, 1]")
        if self.cleanup_policy != parse_cleanup_policy(self.cleanup_policy):
            raise ValueError(f"cleanup.policy={self.cleanup_policy!r} is not canonical")
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise ValueError("min.compaction.lag.ms must not exceed max.compaction.lag.ms")

    @property
    def compact(self) -> bool:
        """The log cleaner compacts this log (cleanup.policy compact or compact,delete)."""
        return CLEANUP_COMPACT in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        """Retention deletes old segments (cleanup.policy delete or compact,delete)."""
        return CLEANUP_DELETE in self.cleanup_policy.split(",")

    @classmethod
    def from_topic_configs(cls, configs: Mapping[str, str], base: LogConfig | None = None) -> LogConfig:
        """Apply Kafka topic config overrides on top of `base`; other keys are ignored."""
        overrides: dict[str, object] = {}
        for key, raw in configs.items():
            if key in _OTHER_TOPIC_KEYS:
                field_name, parse = _OTHER_TOPIC_KEYS[key]
                overrides[field_name] = parse(raw)
                continue
            if key not in _TOPIC_KEYS:
                continue
            try:
                overrides[_TOPIC_KEYS[key][0]] = int(raw)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{key}={raw!r} is not an integer") from exc
        return dataclasses.replace(base if base is not None else cls(), **overrides)


@dataclass(frozen=True)
class CleanerConfig:
    """The broker's log.cleaner.* settings (Kafka's CleanerConfig), with Kafka's defaults. The topic-level
    defaults log.cleaner.min.cleanable.ratio and log.cleaner.delete.retention.ms go into LogConfig."""

    enable: bool = True
    threads: int = 1
    # Shared by the threads, as Kafka's: each gets dedupe_buffer_size / threads for its offset map.
    dedupe_buffer_size: int = 128 * 1024 * 1024
    backoff_ms: int = 15_000

    def __post_init__(self) -> None:
        if self.threads < 1:
            raise ValueError("log.cleaner.threads must be at least 1")
        if self.dedupe_buffer_size // self.threads < 1024 * 1024:
            raise ValueError("log.cleaner.dedupe.buffer.size must give each cleaner thread at least 1 MiB")
        if self.backoff_ms < 0:
            raise ValueError("log.cleaner.backoff.ms must not be negative")
