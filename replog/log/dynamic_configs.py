"""Configs that change at run time: topic overrides and dynamic broker configs, Kafka's names and rules.

Pure: what each key is (type, default, broker-level synonym), how AlterConfigs and IncrementalAlterConfigs
(KIP-339: SET, DELETE, APPEND, SUBTRACT) turn an entity's current overrides into new ones, and whether the
result is acceptable. The controller (cluster) and the single node's local controller both decide with it;
brokers describe with it (DescribeConfigs' sources and synonyms, as Kafka's ConfigHelper reports them).
"""

import enum
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .config import LogConfig
from .topic_config import topic_config_error


class ConfigType(enum.IntEnum):
    """DescribeConfigs v3+ config_type (KIP-569)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(enum.IntEnum):
    """DescribeConfigs' config_source / synonym source (KIP-226)."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class ResourceType(enum.IntEnum):
    TOPIC = 2
    BROKER = 4


class AlterOp(enum.IntEnum):
    """IncrementalAlterConfigs' config_operation (KIP-339)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class TopicConfigKey:
    name: str
    type: ConfigType
    default: str
    broker_synonym: str | None  # the broker config a topic without an override inherits


# The topic configs replog acts on. Defaults are Kafka's (and replog's LogConfig's).
TOPIC_CONFIGS: dict[str, TopicConfigKey] = {k.name: k for k in (
    TopicConfigKey("cleanup.policy", ConfigType.LIST, "delete", "log.cleanup.policy"),
    TopicConfigKey("compression.type", ConfigType.STRING, "producer", "compression.type"),
    TopicConfigKey("index.interval.bytes", ConfigType.INT, "4096", "log.index.interval.bytes"),
    TopicConfigKey("max.message.bytes", ConfigType.INT, "1048588", "message.max.bytes"),
    TopicConfigKey("message.timestamp.type", ConfigType.STRING, "CreateTime", "log.message.timestamp.type"),
    TopicConfigKey("min.insync.replicas", ConfigType.INT, "1", "min.insync.replicas"),
    TopicConfigKey("retention.bytes", ConfigType.LONG, "-1", "log.retention.bytes"),
    TopicConfigKey("retention.ms", ConfigType.LONG, "604800000", "log.retention.ms"),
    TopicConfigKey("segment.bytes", ConfigType.INT, "1073741824", "log.segment.bytes"),
    TopicConfigKey("segment.ms", ConfigType.LONG, "604800000", "log.roll.ms"),
    TopicConfigKey("unclean.leader.election.enable", ConfigType.BOOLEAN, "false", "unclean.leader.election.enable"),
    TopicConfigKey("segment.index.bytes", ConfigType.INT, "10485760", "log.index.size.max.bytes"),
    # Compaction (the log cleaner).
    TopicConfigKey("min.cleanable.dirty.ratio", ConfigType.DOUBLE, "0.5", "log.cleaner.min.cleanable.ratio"),
    TopicConfigKey("min.compaction.lag.ms", ConfigType.LONG, "0", "log.cleaner.min.compaction.lag.ms"),
    TopicConfigKey("max.compaction.lag.ms", ConfigType.LONG, "9223372036854775807", "log.cleaner.max.compaction.lag.ms"),
    TopicConfigKey("delete.retention.ms", ConfigType.LONG, "86400000", "log.cleaner.delete.retention.ms"),
    # Replication throttles (KIP-73): which replicas of the topic are throttled; stored and propagated.
    TopicConfigKey("leader.replication.throttled.replicas", ConfigType.LIST, "", None),
    TopicConfigKey("follower.replication.throttled.replicas", ConfigType.LIST, "", None),
)}

THROTTLE_RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
# Broker configs that AlterConfigs may set dynamically: the topic configs' broker synonyms (cluster-wide
# defaults, as Kafka's DynamicLogConfig) and the throttle rates (KIP-73, bytes/s).
DYNAMIC_BROKER_KEYS: dict[str, ConfigType] = {
    **{k.broker_synonym: k.type for k in TOPIC_CONFIGS.values() if k.broker_synonym is not None},
    **dict.fromkeys(THROTTLE_RATE_KEYS, ConfigType.LONG),
}
_TOPIC_KEY_OF_BROKER_KEY = {k.broker_synonym: k.name for k in TOPIC_CONFIGS.values() if k.broker_synonym}
MAX_CONFIG_VALUE_CHARS = 32_767  # a config value longer than a Kafka STRING cannot be real


class InvalidConfigError(ValueError):
    """INVALID_CONFIG (or INVALID_REQUEST for a bad operation); the message names the key."""


def is_throttled_replicas_value(value: str) -> bool:
    """Kafka's ThrottledReplicaListValidator: "*" or a list of partition:broker pairs."""
    if value.strip() in ("", "*"):
        return True
    for item in value.split(","):
        partition, sep, broker = item.strip().partition(":")
        if not sep or not partition.isdigit() or not broker.isdigit():
            return False
    return True


def topic_configs_error(configs: Mapping[str, str], base: LogConfig | None = None) -> str | None:
    """Why a topic's whole set of overrides is unacceptable, naming the key, or None (CreateTopics and the
    config changes check the same way; `base` is the broker's log config the overrides apply to)."""
    throttled = {k: v for k, v in configs.items() if k.endswith(".replication.throttled.replicas")}
    for key, value in throttled.items():
        if not is_throttled_replicas_value(value):
            return f"Invalid value {value} for configuration {key}: must be * or partition:broker pairs"
    return topic_config_error({k: v for k, v in configs.items() if k not in throttled}, base)


def broker_configs_error(configs: Mapping[str, str]) -> str | None:
    """Why dynamic broker configs are unacceptable, naming the key, or None."""
    for key, value in configs.items():
        if key not in DYNAMIC_BROKER_KEYS:
            return f"Invalid config {key}: not a dynamically updatable broker config"
        if key in THROTTLE_RATE_KEYS:
            if not value.lstrip("-").isdigit() or int(value) < 0:
                return f"Invalid value {value} for configuration {key}: must be a long >= 0"
            continue
        error = topic_config_error({_TOPIC_KEY_OF_BROKER_KEY[key]: value})
        if error is not None:
            return f"Invalid value {value} for configuration {key}: {error}"
    return None


@dataclass(frozen=True, slots=True)
class ConfigChange:
    name: str
    value: str | None
    op: AlterOp = AlterOp.SET


def altered(current: Mapping[str, str], changes: Sequence[ConfigChange], *, incremental: bool,
            key_types: Mapping[str, ConfigType]) -> dict[str, str]:
    """The overrides after `changes`. AlterConfigs (not incremental) replaces the whole set, so keys it does
    not name go back to their defaults; IncrementalAlterConfigs touches only the keys named.
    Raises InvalidConfigError for a key named twice, an unknown key, or APPEND/SUBTRACT on a non-list."""
    duplicates = sorted(n for n, times in Counter(c.name for c in changes).items() if times > 1)
    if duplicates:
        raise InvalidConfigError(f"Config {duplicates[0]} appears more than once in the request")
    result = {} if not incremental else dict(current)
    for change in changes:
        if change.name not in key_types:
            raise InvalidConfigError(f"Unknown config {change.name}")
        if change.value is not None and len(change.value) > MAX_CONFIG_VALUE_CHARS:
            raise InvalidConfigError(f"Invalid value for configuration {change.name}: too long")
        if change.op in (AlterOp.APPEND, AlterOp.SUBTRACT) and key_types[change.name] is not ConfigType.LIST:
            # Kafka: "Config value append is not allowed for config key ..." (INVALID_CONFIG).
            raise InvalidConfigError(f"Config value {change.op.name.lower()} is not allowed for config key "
                                     f"{change.name}: it is not a list")
        if change.op is AlterOp.DELETE or (change.op is AlterOp.SET and change.value is None):
            result.pop(change.name, None)
        elif change.op is AlterOp.SET:
            result[change.name] = change.value
        else:
            items = _list_items(result.get(change.name, ""))
            given = _list_items(change.value or "")
            if change.op is AlterOp.APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            result[change.name] = ",".join(items)
    return result


@dataclass(frozen=True, slots=True)
class ConfigResource:
    """One resource of an AlterConfigs / IncrementalAlterConfigs request."""

    resource_type: int
    name: str
    changes: Sequence[ConfigChange]


def resources_of_request(request, *, incremental: bool) -> list[ConfigResource]:
    """The resources of a decoded AlterConfigs or IncrementalAlterConfigs request (kio entities)."""
    resources = []
    for resource in request.resources:
        changes = []
        for config in resource.configs:
            if not incremental:
                changes.append(ConfigChange(config.name, config.value))
            elif config.config_operation not in AlterOp.__members__.values():
                raise InvalidConfigError(f"Unknown operation {config.config_operation} for {config.name}")
            else:
                changes.append(ConfigChange(config.name, config.value, AlterOp(config.config_operation)))
        resources.append(ConfigResource(resource.resource_type, resource.resource_name, changes))
    return resources


def altered_entity(resource_type: ResourceType, current: Mapping[str, str], changes: Sequence[ConfigChange], *,
                   incremental: bool) -> dict[str, str]:
    """A topic's or a broker entity's overrides after `changes`, validated; raises InvalidConfigError."""
    key_types = topic_key_types() if resource_type is ResourceType.TOPIC else DYNAMIC_BROKER_KEYS
    new = altered(current, changes, incremental=incremental, key_types=key_types)
    error = topic_configs_error(new) if resource_type is ResourceType.TOPIC else broker_configs_error(new)
    if error is not None:
        raise InvalidConfigError(error)
    return new


def is_broker_entity_name(name: str) -> bool:
    """"" (the cluster-wide default) or a broker id, as Kafka's ConfigResource for BROKER."""
    return name == "" or (name.isdigit() and int(name) < 2**31)


def _list_items(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def topic_key_types() -> dict[str, ConfigType]:
    return {k.name: k.type for k in TOPIC_CONFIGS.values()}
