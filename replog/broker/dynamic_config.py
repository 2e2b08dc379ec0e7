"""Configs that change while the broker runs (KIP-226): topic overrides and dynamic broker configs, from the
controller's UpdateMetadata (or the single node's own store), applied to every hosted partition at once.

Precedence, as Kafka's: a topic override, else this broker's dynamic config, else the cluster-wide dynamic
default, else the broker's static (server.properties) value, else Kafka's default.
"""

from collections.abc import Mapping

from replog.fetcher.replication_quota import parse_rate
from replog.log.config import LogConfig
from replog.log.dynamic_configs import TOPIC_CONFIGS

from .config import BrokerConfig
from .metadata import MetadataImage
from .replica_manager import ReplicaManager

CLUSTER_DEFAULT = ""  # the entity name of the cluster-wide dynamic broker configs


def dynamic_broker_overrides(broker_configs: Mapping[str, Mapping[str, str]], node_id: int) -> dict[str, str]:
    """This broker's dynamic configs: its own entries over the cluster-wide defaults."""
    return {**broker_configs.get(CLUSTER_DEFAULT, {}), **broker_configs.get(str(node_id), {})}


def topic_defaults_of(broker_overrides: Mapping[str, str]) -> dict[str, str]:
    """The dynamic broker configs as the topic configs they are defaults for (log.retention.ms -> retention.ms)."""
    return {key.name: broker_overrides[key.broker_synonym] for key in TOPIC_CONFIGS.values()
            if key.broker_synonym in broker_overrides}


def configure_replication_quotas(replicas: ReplicaManager, image: MetadataImage, node_id: int) -> None:
    """The throttled rates from this broker's dynamic configs, the throttled partitions from the topics'."""
    overrides = dynamic_broker_overrides(image.broker_configs, node_id)
    topic_configs = {name: topic.configs for name, topic in image.topics.items()}
    for quota, rate_key, replicas_key in (
            (replicas.leader_quota, "leader.replication.throttled.rate", "leader.replication.throttled.replicas"),
            (replicas.follower_quota, "follower.replication.throttled.rate",
             "follower.replication.throttled.replicas")):
        if quota is not None:
            quota.configure(parse_rate(overrides, rate_key), topic_configs, replicas_key, node_id)


def apply_dynamic_configs(replicas: ReplicaManager, image: MetadataImage, static: BrokerConfig) -> int:
    """Bring every hosted partition's log config and min.insync.replicas to the image's configs; returns how
    many partitions changed. Retention, rolls and appends read the log's config, so the change is immediate.
    Runs on every UpdateMetadata: one LogConfig per topic, and a partition is touched only if it differs."""
    defaults = topic_defaults_of(dynamic_broker_overrides(image.broker_configs, static.node_id))
    base = LogConfig.from_topic_configs(defaults, static.log_config())
    default_min_isr = int(defaults.get("min.insync.replicas", static.min_insync_replicas))
    replicas.base_log_config = base
    replicas.default_min_insync_replicas = default_min_isr
    configure_replication_quotas(replicas, image, static.node_id)
    per_topic: dict[str, tuple[LogConfig, int]] = {}
    changed = 0
    for key, partition in replicas.partitions.items():
        wanted = per_topic.get(key.topic)
        if wanted is None:
            topic = image.topics.get(key.topic)
            configs = topic.configs if topic is not None else {}
            wanted = per_topic[key.topic] = (LogConfig.from_topic_configs(configs, base),
                                             int(configs.get("min.insync.replicas", default_min_isr)))
        config, min_isr = wanted
        if partition.log.config != config or partition.min_insync_replicas != min_isr:
            partition.log.update_config(config)
            partition.update_min_insync_replicas(min_isr)
            changed += 1
    return changed
