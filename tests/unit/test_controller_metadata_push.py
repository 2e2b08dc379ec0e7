"""Incremental UpdateMetadata (controller/metadata_push.py): what a broker with a view is sent, what a new one
is sent, the chunks a build is cut into, and that the broker's image after the increments equals a full
snapshot's."""

import dataclasses

import pytest

from replog.broker.metadata import MetadataImage
from replog.controller.broker_requests import live_brokers
from replog.controller.cluster import BrokerRegistration, ClusterMetadata
from replog.controller.metadata_push import UPDATE_METADATA_INCREMENTAL, UpdatePlanner
from replog.controller.registry import change_isr, elect_leader
from replog.log.partition_log import TopicPartition
from replog.protocol import control
from replog.protocol.control import LEADER_DURING_DELETE, UPDATE_METADATA_FULL

SENDER = object()  # the channel's sender the view belongs to
EPOCH = 5


def cluster(partitions: int = 6) -> ClusterMetadata:
    metadata = ClusterMetadata()
    for broker_id in (1, 2, 3):
        metadata.add_broker(BrokerRegistration(broker_id, "127.0.0.1", 9000 + broker_id, fenced=False))
    metadata.create_topic("t", {i: [i % 3 + 1, (i + 1) % 3 + 1, (i + 2) % 3 + 1] for i in range(partitions)}, {})
    return metadata


def push(metadata: ClusterMetadata, planner: UpdatePlanner, *, built: bool = False
         ) -> control.UpdateMetadataRequest | None:
    """The request (built now unless `built`) as the broker decodes it."""
    request = (planner if built else planner.run()).request(3000, 7, live_brokers(metadata))
    if request is None:
        return None
    return control.decode_update_metadata_request(memoryview(control.encode_update_metadata_request(request)), 0)


def sent(request: control.UpdateMetadataRequest) -> set[tuple[str, int]]:
    return {(t.topic_name, p.partition_index) for t in request.topic_states for p in t.partition_states}


def image_fields(image: MetadataImage) -> dict:
    return {(t.name, i): (p.leader, p.leader_epoch, p.partition_epoch, p.isr, p.replicas, p.offline_replicas)
            for t in image.topics.values() for i, p in t.partitions.items()}


def test_a_broker_without_a_view_gets_everything_in_a_full_request():
    metadata = cluster()
    metadata.broker_configs[""] = {"log.retention.ms": "1000"}
    planner = UpdatePlanner(metadata, None, SENDER, EPOCH)
    request = push(metadata, planner)
    assert request.type == UPDATE_METADATA_FULL
    assert sent(request) == {("t", i) for i in range(6)}
    assert request.broker_configs == {"": {"log.retention.ms": "1000"}}
    assert [b.id for b in request.live_brokers] == [1, 2, 3]
    assert {p.controller_epoch for t in request.topic_states for p in t.partition_states} == {EPOCH}
    assert planner.full and planner.partition_count == 6


def test_only_the_partitions_that_changed_go_to_a_broker_with_a_view():
    metadata = cluster()
    view = UpdatePlanner(metadata, None, SENDER, EPOCH).run().view
    p1, p4 = metadata.registration("t", 1), metadata.registration("t", 4)
    metadata.apply([elect_leader(p1, p1.replicas[1], p1.isr), change_isr(p4, p4.isr[:2])])
    planner = UpdatePlanner(metadata, view, SENDER, EPOCH)
    request = push(metadata, planner)
    assert request.type == UPDATE_METADATA_INCREMENTAL
    assert sent(request) == {("t", 1), ("t", 4)}
    changed = control_states(request)
    assert changed[("t", 1)].leader == p1.replicas[1] and changed[("t", 4)].isr == list(p4.isr[:2])
    assert request.broker_configs == {} and request.acls == [] and request.scram_credentials == []
    # The next push, with nothing changed since, says nothing.
    assert push(metadata, UpdatePlanner(metadata, planner.view, SENDER, EPOCH)) is None


def control_states(request) -> dict:
    return {(t.topic_name, p.partition_index): p for t in request.topic_states for p in t.partition_states}


def test_a_fenced_broker_changes_the_offline_replicas_of_its_partitions_and_the_live_brokers():
    metadata = cluster(partitions=3)
    metadata.create_topic("elsewhere", {0: [2, 3]}, {})
    view = UpdatePlanner(metadata, None, SENDER, EPOCH).run().view
    metadata.add_broker(dataclasses.replace(metadata.brokers[1], fenced=True))
    request = push(metadata, UpdatePlanner(metadata, view, SENDER, EPOCH))
    assert sent(request) == {("t", 0), ("t", 1), ("t", 2)}  # not elsewhere-0: broker 1 holds no replica of it
    assert {p.offline_replicas[0] for p in control_states(request).values()} == {1}
    assert [b.id for b in request.live_brokers] == [2, 3]


def test_a_broker_registered_again_or_a_change_only_a_full_request_carries_makes_it_full():
    metadata = cluster()
    view = UpdatePlanner(metadata, None, SENDER, EPOCH).run().view
    assert UpdatePlanner(metadata, view, object(), EPOCH).full  # another sender: the broker re-registered
    metadata.broker_configs["1"] = {"log.retention.ms": "5"}
    assert UpdatePlanner(metadata, view, SENDER, EPOCH).full


def test_a_deleted_topic_goes_as_leader_during_delete_and_leaves_the_view():
    metadata = cluster(partitions=2)
    metadata.create_topic("kept", {0: [1]}, {})
    view = UpdatePlanner(metadata, None, SENDER, EPOCH).run().view
    metadata.delete_topic("t")
    planner = UpdatePlanner(metadata, view, SENDER, EPOCH)
    request = push(metadata, planner)
    assert [(t.topic_name, [p.leader for p in t.partition_states]) for t in request.topic_states] == \
        [("t", [LEADER_DURING_DELETE, LEADER_DURING_DELETE])]
    assert set(planner.view.topics) == {"kept"} and set(planner.view.partitions) == {("kept", 0)}


def test_a_config_change_sends_the_topic_without_its_partitions():
    metadata = cluster(partitions=2)
    view = UpdatePlanner(metadata, None, SENDER, EPOCH).run().view
    metadata.topics["t"].configs["retention.ms"] = "60000"
    request = push(metadata, UpdatePlanner(metadata, view, SENDER, EPOCH))
    assert [(t.topic_name, t.configs, t.partition_states) for t in request.topic_states] == \
        [("t", {"retention.ms": "60000"}, [])]


def test_a_replica_in_a_failed_log_dir_is_offline_in_the_next_increment():
    metadata = cluster(partitions=3)
    view = UpdatePlanner(metadata, None, SENDER, EPOCH).run().view
    metadata.mark_replicas_offline(2, [TopicPartition("t", 0)])
    request = push(metadata, UpdatePlanner(metadata, view, SENDER, EPOCH))
    assert {k: p.offline_replicas for k, p in control_states(request).items()} == {("t", 0): [2]}


@pytest.mark.parametrize("partitions, chunk, looked_at", [
    (6, 4, [4, 6]),
    (6, 6, [6]),
    (2_500, 1_000, [1_000, 2_000, 2_500]),
])
def test_a_build_goes_in_chunks_of_at_most_chunk_partitions(partitions, chunk, looked_at):
    metadata = cluster(partitions)
    planner = UpdatePlanner(metadata, None, SENDER, EPOCH, chunk=chunk)
    assert list(planner.steps()) == looked_at
    assert planner.partition_count == partitions


def test_a_change_between_chunks_is_sent_current_and_never_older():
    metadata = cluster()
    planner = UpdatePlanner(metadata, None, SENDER, EPOCH, chunk=3)
    steps = planner.steps()
    next(steps)  # t-0..t-2 built
    p1, p5 = metadata.registration("t", 1), metadata.registration("t", 5)
    metadata.apply([change_isr(p1, p1.isr[:2]), change_isr(p5, p5.isr[:2])])
    list(steps)
    request = push(metadata, planner, built=True)
    states = control_states(request)
    assert states[("t", 5)].isr == list(p5.isr[:2])  # built after the change: the new ISR
    assert states[("t", 1)].isr == list(p1.isr)  # built before it: the next push sends it
    following = push(metadata, UpdatePlanner(metadata, planner.view, SENDER, EPOCH))
    assert sent(following) == {("t", 1)}


def test_the_image_after_increments_equals_the_image_after_one_full_snapshot():
    metadata = cluster(partitions=9)
    by_increments = MetadataImage("c", 3000)
    view = None
    for change in range(4):
        registration = metadata.registration("t", change * 2)
        metadata.apply([elect_leader(registration, registration.replicas[1], registration.isr)])
        if change == 2:
            metadata.create_topic("u", {0: [1, 2]}, {"cleanup.policy": "compact"})
        if change == 3:
            metadata.add_broker(dataclasses.replace(metadata.brokers[3], fenced=True))
        planner = UpdatePlanner(metadata, view, SENDER, EPOCH)
        request = push(metadata, planner)
        by_increments.apply_update_metadata(request)
        view = planner.view
    metadata.delete_topic("u")
    planner = UpdatePlanner(metadata, view, SENDER, EPOCH)
    by_increments.apply_update_metadata(push(metadata, planner))
    full = MetadataImage("c", 3000)
    full.apply_update_metadata(push(metadata, UpdatePlanner(metadata, None, SENDER, EPOCH)))
    assert image_fields(by_increments) == image_fields(full)
    assert set(by_increments.topics) == {"t"} and set(by_increments.brokers) == {1, 2}


def test_a_broker_fenced_between_chunks_leaves_the_liveness_unknown_so_the_next_push_looks_at_all():
    metadata = cluster(partitions=4)
    planner = UpdatePlanner(metadata, None, SENDER, EPOCH, chunk=2)
    steps = planner.steps()
    next(steps)  # t-0, t-1 built with broker 3 live
    metadata.add_broker(dataclasses.replace(metadata.brokers[3], fenced=True))
    list(steps)
    assert planner.view.liveness is None
    following = push(metadata, UpdatePlanner(metadata, planner.view, SENDER, EPOCH))
    assert sent(following) == {("t", 0), ("t", 1)}  # their offline replicas were computed with 3 live
    assert {p.offline_replicas[0] for p in control_states(following).values()} == {3}
