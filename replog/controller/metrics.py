"""What the controller reports: Kafka's KafkaController / ControllerStats gauges, computed from the cluster
metadata when scraped or dumped (docs/metrics-dumps.md, `controller` lines)."""

from collections.abc import Iterator
from dataclasses import asdict, dataclass

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from .cluster import ClusterMetadata


@dataclass(frozen=True, slots=True)
class ControllerGauges:
    active_controller_count: int
    offline_partitions_count: int
    global_partition_count: int
    global_topic_count: int
    fenced_broker_count: int
    active_broker_count: int
    preferred_replica_imbalance_count: int
    controller_epoch: int


def controller_gauges(metadata: ClusterMetadata, controller_epoch: int, active: bool) -> ControllerGauges:
    """The gauges of one controller; every controller replays the same metadata, so only
    ActiveControllerCount tells the active one from the standbys (1 against 0, as Kafka's)."""
    partitions = [p for topic in metadata.topics.values() for p in topic.partitions.values()]
    brokers = metadata.brokers.values()
    return ControllerGauges(
        active_controller_count=int(active),
        offline_partitions_count=sum(1 for p in partitions if not p.has_leader),
        global_partition_count=len(partitions),
        global_topic_count=len(metadata.topics),
        fenced_broker_count=sum(1 for b in brokers if b.fenced),
        active_broker_count=sum(1 for b in brokers if b.is_active),
        preferred_replica_imbalance_count=sum(1 for p in partitions if p.leader != p.preferred_leader),
        controller_epoch=controller_epoch,
    )


def controller_snapshot(metadata: ClusterMetadata, controller_epoch: int, active: bool) -> tuple[str, dict]:
    """The `controller` dump line's fields."""
    brokers = [
        {"broker_id": b.broker_id, "fenced": b.fenced, "in_controlled_shutdown": b.in_controlled_shutdown,
         "broker_epoch": b.epoch}
        for b in sorted(metadata.brokers.values(), key=lambda b: b.broker_id)
    ]
    return "controller", {"controller": asdict(controller_gauges(metadata, controller_epoch, active)), "brokers": brokers}


class ControllerCollector(Collector):
    def __init__(self, controller) -> None:
        self._controller = controller

    def collect(self) -> Iterator:
        controller = self._controller
        gauges = controller_gauges(controller.metadata, controller.controller_epoch, controller.active)
        for attribute, name, help_ in (
            ("active_controller_count", "activecontrollercount", "1 on the active controller"),
            ("offline_partitions_count", "offlinepartitionscount", "Partitions without a leader"),
            ("global_partition_count", "globalpartitioncount", "Partitions in the cluster"),
            ("global_topic_count", "globaltopiccount", "Topics in the cluster"),
            ("fenced_broker_count", "fencedbrokercount", "Registered brokers that are fenced"),
            ("active_broker_count", "activebrokercount", "Registered brokers that are unfenced"),
            ("preferred_replica_imbalance_count", "preferredreplicaimbalancecount",
             "Partitions not led by their preferred replica"),
            ("controller_epoch", "epoch", "The controller epoch"),
        ):
            yield GaugeMetricFamily(f"kafka_controller_kafkacontroller_{name}", help_,
                                    value=getattr(gauges, attribute))
