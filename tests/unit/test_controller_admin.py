"""The controller's admin operations against fake brokers: config changes reach every broker in
UpdateMetadata, rack-aware placement of new topics and partitions when brokers have broker.rack."""

import uuid

import pytest

from replog.controller import admin
from replog.controller.channel import ChannelConfig
from replog.controller.server import ClusterController, ControllerConfig
from replog.log.dynamic_configs import AlterOp, ConfigChange, ConfigResource, ResourceType
from replog.protocol.apis import ApiKey

from .test_controller_fakes import HOST, SECRET, FakeBroker, FakeClock

RACKS = {1: "east", 2: "east", 3: "west", 4: "west"}


@pytest.fixture
async def brokers():
    fakes = {i: await FakeBroker(i).start() for i in RACKS}
    yield fakes
    for fake in fakes.values():
        await fake.stop()


@pytest.fixture
async def controller(tmp_path, brokers):
    clock = FakeClock()
    controller = ClusterController(ControllerConfig(
        inter_broker_secret=SECRET, metadata_log_dir=tmp_path / "metadata",
        channel=ChannelConfig(retry_backoff_ms=10), propagation_timeout_ms=5_000), clock_ms=clock)
    await controller.start()
    for broker_id, fake in brokers.items():
        epoch = controller.register_broker(broker_id, uuid.uuid4(), HOST, fake.port, rack=RACKS[broker_id])
        controller.broker_heartbeat(broker_id, epoch, want_fence=False, want_shutdown=False)
    await controller.settle()
    yield controller
    await controller.stop()


async def test_new_topics_and_partitions_span_both_racks(controller):
    topic = await controller.create_topic("spread", partitions=8, replication_factor=2)
    assert all({RACKS[b] for b in p.replicas} == {"east", "west"} for p in topic.partitions.values())
    await admin.create_partitions(controller, "spread", 12, None, validate_only=False)
    partitions = controller.metadata.topics["spread"].partitions
    assert sorted(partitions) == list(range(12))
    assert all({RACKS[b] for b in p.replicas} == {"east", "west"} for p in partitions.values())


async def test_config_changes_reach_every_broker_and_validate_only_changes_nothing(controller, brokers):
    await controller.create_topic("tuned", {0: [1, 3]})
    await controller.settle()
    for fake in brokers.values():
        fake.received.clear()
    change = [ConfigResource(ResourceType.TOPIC, "tuned", [ConfigChange("retention.ms", "5000", AlterOp.SET)])]
    outcomes = await admin.alter_configs(controller, change, incremental=True, validate_only=True)
    assert [o.error_code for o in outcomes] == [0]
    assert controller.metadata.topics["tuned"].configs == {}
    await admin.alter_configs(controller, change, incremental=True, validate_only=False)
    assert controller.metadata.topics["tuned"].configs == {"retention.ms": "5000"}
    for fake in brokers.values():  # each broker, replica or not, has the topic's configs in its metadata
        update = fake.requests(ApiKey.UPDATE_METADATA)[-1]
        assert [t.configs for t in update.topic_states if t.topic_name == "tuned"] == [{"retention.ms": "5000"}]


async def test_dynamic_cluster_default_enables_unclean_elections_for_topics_without_an_override(controller):
    await controller.create_topic("lenient", {0: [1, 3]})
    await controller.create_topic("strict", {0: [1, 3]}, {"unclean.leader.election.enable": "false"})
    assert not controller.replication_control.unclean_allowed("lenient")
    default = [ConfigResource(ResourceType.BROKER, "", [ConfigChange("unclean.leader.election.enable", "true")])]
    await admin.alter_configs(controller, default, incremental=True, validate_only=False)
    assert controller.replication_control.unclean_allowed("lenient") and not controller.replication_control.unclean_allowed("strict")
