"""Which topic configs replog accepts: Kafka's names, values a LogConfig (and the partition) can take."""

from collections.abc import Mapping

from .config import LogConfig

# Topic configs replog understands (Kafka's names); anything else is INVALID_CONFIG.
TOPIC_CONFIG_KEYS = frozenset({
    "segment.bytes", "segment.ms", "retention.ms", "retention.bytes", "max.message.bytes",
    "index.interval.bytes", "min.insync.replicas", "unclean.leader.election.enable", "cleanup.policy",
    "compression.type", "message.timestamp.type", "min.cleanable.dirty.ratio", "min.compaction.lag.ms",
    "max.compaction.lag.ms", "delete.retention.ms", "segment.index.bytes",
})


def topic_config_error(configs: Mapping[str, str], base: LogConfig | None = None) -> str | None:
    """Why topic configs are unacceptable (checked by CreateTopics and by the controller), or None."""
    unknown = sorted(set(configs) - TOPIC_CONFIG_KEYS)
    if unknown:
        return f"unknown topic configs: {', '.join(unknown)}"
    try:
        LogConfig.from_topic_configs(configs, base)
        min_isr = int(configs.get("min.insync.replicas", "1"))
    except ValueError as e:
        return str(e)
    if min_isr < 1:
        return "min.insync.replicas must be at least 1"
    return None
