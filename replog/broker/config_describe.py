"""DescribeConfigs' answer for one resource, as Kafka's ConfigHelper builds it: every key with its value,
its source, read-only and sensitive flags, its type (KIP-569) and, when asked, its synonyms (KIP-226) in
precedence order: topic override, dynamic per-broker, dynamic cluster default, static, default.
"""

from collections.abc import Collection, Mapping
from pathlib import Path

from kio.schema.errors import ErrorCode

from replog.log.dynamic_configs import (
    DYNAMIC_BROKER_KEYS,
    THROTTLE_RATE_KEYS,
    TOPIC_CONFIGS,
    ConfigSource,
    ConfigType,
)
from replog.server.properties import Listener

from .config import BrokerConfig, broker_config_keys
from .dynamic_config import CLUSTER_DEFAULT

SENSITIVE_KEYS = frozenset({"inter.broker.secret", "inter.broker.sasl.password"})
# Kafka's default for the throttle rates: Long.MAX_VALUE, i.e. unthrottled.
_UNTHROTTLED = str((1 << 63) - 1)
_DEFAULTS = BrokerConfig()


def _format(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ",".join(_format(v) or "" for v in value)
    if isinstance(value, Listener):
        return f"{value.name}://{value.host}:{value.port}"
    if isinstance(value, Path):
        return str(value)
    return str(value)


def _type_of(key: str, value: object) -> ConfigType:
    if key in DYNAMIC_BROKER_KEYS:
        return DYNAMIC_BROKER_KEYS[key]
    if isinstance(value, bool):
        return ConfigType.BOOLEAN
    if isinstance(value, int):
        return ConfigType.LONG if key.endswith((".ms", ".bytes")) else ConfigType.INT
    if isinstance(value, list):
        return ConfigType.LIST
    return ConfigType.PASSWORD if key in SENSITIVE_KEYS else ConfigType.STRING


def _broker_key_synonyms(key: str, static: BrokerConfig, dynamic: Mapping[str, Mapping[str, str]],
                         node_id: int | None) -> list[tuple[str, str | None, ConfigSource]]:
    """The values `key` has at each level for broker node_id (None: the cluster-default entity), first wins."""
    synonyms = []
    if node_id is not None and key in dynamic.get(str(node_id), {}):
        synonyms.append((key, dynamic[str(node_id)][key], ConfigSource.DYNAMIC_BROKER_CONFIG))
    if key in dynamic.get(CLUSTER_DEFAULT, {}):
        synonyms.append((key, dynamic[CLUSTER_DEFAULT][key], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
    attribute = broker_config_keys().get(key)
    if attribute is not None and key in static.given_keys:
        synonyms.append((key, _format(getattr(static, attribute)), ConfigSource.STATIC_BROKER_CONFIG))
    if attribute is not None:
        default = _format(getattr(_DEFAULTS, attribute))
    elif key in THROTTLE_RATE_KEYS:
        default = _UNTHROTTLED
    else:
        default = next(k.default for k in TOPIC_CONFIGS.values() if k.broker_synonym == key)
    synonyms.append((key, default, ConfigSource.DEFAULT_CONFIG))
    return synonyms


def _entry(name: str, synonyms, *, read_only: bool, config_type: ConfigType, include_synonyms: bool) -> dict:
    sensitive = name in SENSITIVE_KEYS
    _, value, source = synonyms[0]
    return {
        "name": name, "value": None if sensitive else value, "read_only": read_only,
        "config_source": int(source), "is_sensitive": sensitive, "config_type": int(config_type),
        "documentation": None,
        "synonyms": [{"name": n, "value": None if sensitive else v, "source": int(s)} for n, v, s in synonyms]
        if include_synonyms else [],
    }


def describe_topic(topic_configs: Mapping[str, str], static: BrokerConfig,
                   dynamic: Mapping[str, Mapping[str, str]], *, keys: Collection[str] | None,
                   include_synonyms: bool) -> list[dict]:
    entries = []
    for key in sorted(TOPIC_CONFIGS):
        if keys is not None and key not in keys:
            continue
        spec = TOPIC_CONFIGS[key]
        synonyms = []
        if key in topic_configs:
            synonyms.append((key, topic_configs[key], ConfigSource.TOPIC_CONFIG))
        if spec.broker_synonym is not None:
            synonyms += _broker_key_synonyms(spec.broker_synonym, static, dynamic, static.node_id)
        else:
            synonyms.append((key, spec.default, ConfigSource.DEFAULT_CONFIG))
        entries.append(_entry(key, synonyms, read_only=False, config_type=spec.type,
                              include_synonyms=include_synonyms))
    return entries


def describe_broker(name: str, static: BrokerConfig, dynamic: Mapping[str, Mapping[str, str]], *,
                    keys: Collection[str] | None, include_synonyms: bool) -> tuple[ErrorCode, str | None, list[dict]]:
    """Broker `name` must be this broker (Kafka answers only for itself) or "" (the cluster defaults)."""
    if name == CLUSTER_DEFAULT:
        defaults = dynamic.get(CLUSTER_DEFAULT, {})
        return ErrorCode.none, None, [
            _entry(k, [(k, v, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)], read_only=False,
                   config_type=DYNAMIC_BROKER_KEYS.get(k, ConfigType.STRING), include_synonyms=include_synonyms)
            for k, v in sorted(defaults.items()) if keys is None or k in keys]
    if name != str(static.node_id):
        return ErrorCode.invalid_request, f"Unexpected broker id, expected {static.node_id} or empty string", []
    entries = []
    for key in sorted(set(broker_config_keys()) | set(DYNAMIC_BROKER_KEYS)):
        if keys is not None and key not in keys:
            continue
        synonyms = _broker_key_synonyms(key, static, dynamic, static.node_id)
        attribute = broker_config_keys().get(key)
        sample = getattr(static, attribute) if attribute is not None else None
        entries.append(_entry(key, synonyms, read_only=key not in DYNAMIC_BROKER_KEYS,
                              config_type=_type_of(key, sample), include_synonyms=include_synonyms))
    return ErrorCode.none, None, entries

