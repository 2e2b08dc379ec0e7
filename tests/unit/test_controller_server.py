"""ClusterController in-process with the real protocol: fake brokers register, heartbeat and record what it
pushes, and the controller stops cleanly. Sessions use a fake clock (controller_fixtures.py);
test_controller_sessions.py has the fencing and controlled-shutdown cases, test_controller_restart.py the
replay of the metadata log, test_controller_apis.py the requests over the wire."""

import asyncio
import uuid

import pytest
from kio.schema.errors import ErrorCode

from replog.client.connection import Connection
from replog.controller.broker_requests import EPOCH_DURING_DELETE
from replog.controller.cluster import ControllerError
from replog.controller.heartbeats import HeartbeatAnswer
from replog.controller.propagation import PropagationError
from replog.controller.registry import change_isr
from replog.controller.server import (
    FIRST_CONTROLLER_EPOCH,
    HeartbeatAnswer,
)

from .controller_fixtures import (  # noqa: F401 (fixtures)
    CONTROLLER_ID,
    LAI,
    SR,
    UM,
    apis,
    brokers,
    clock,
    controller,
    controllers,
    epoch_of,
    forget_requests,
    heartbeat,
    let_sessions_expire,
    live_broker_ids,
    partition_states,
    state,
)
from .test_controller_fakes import HOST, FakeBroker, connect_as_controller, wait_until

# ------------------------------------------------------------------------------------ propagation


async def test_unfenced_brokers_get_metadata_naming_every_live_broker(controller, brokers):
    for broker_id, fake in brokers.items():
        # A registered broker's first UpdateMetadata is a full snapshot (KIP-866 type 2); later ones carry
        # only what changed (type 1, metadata_push.py), here the brokers registered after it.
        assert fake.requests(UM)[0].type == 2
        last = fake.requests(UM)[-1]
        assert (last.controller_id, last.controller_epoch) == (CONTROLLER_ID, FIRST_CONTROLLER_EPOCH)
        assert last.type == (2 if len(fake.requests(UM)) == 1 else 1)
        assert last.broker_epoch == epoch_of(controller, broker_id)
        assert [(b.id, b.endpoints[0].host, b.endpoints[0].port) for b in last.live_brokers] == \
            [(i, HOST, brokers[i].port) for i in (1, 2, 3)]
        assert fake.requests(LAI) == []  # no partitions yet
    assert controller.metadata.active_broker_ids() == [1, 2, 3]


async def test_create_topic_tells_each_replica_and_every_broker(controller, brokers):
    forget_requests(brokers)
    topic = await controller.create_topic("orders", {0: [1, 2], 1: [2, 3]}, {"min.insync.replicas": "2"})
    assert [apis(brokers[i]) for i in (1, 2, 3)] == [[LAI, UM]] * 3  # LeaderAndIsr first, on every broker
    (to_2,) = brokers[2].requests(LAI)
    assert (to_2.controller_id, to_2.controller_epoch) == (CONTROLLER_ID, FIRST_CONTROLLER_EPOCH)
    assert to_2.broker_epoch == epoch_of(controller, 2)
    assert [(t.topic_name, t.topic_id, t.configs) for t in to_2.topic_states] == \
        [("orders", topic.topic_id, {"min.insync.replicas": "2"})]
    states = partition_states(to_2)
    assert set(states) == {("orders", 0), ("orders", 1)}
    p1 = states[("orders", 1)]
    assert (p1.leader, p1.isr, p1.replicas, p1.leader_epoch, p1.partition_epoch, p1.is_new) == \
        (2, [2, 3], [2, 3], 0, 0, True)
    assert sorted((leader.broker_id, leader.port) for leader in to_2.live_leaders) == \
        [(1, brokers[1].port), (2, brokers[2].port)]
    (to_3,) = brokers[3].requests(LAI)
    assert set(partition_states(to_3)) == {("orders", 1)}
    assert [leader.broker_id for leader in to_3.live_leaders] == [2]
    (metadata,) = brokers[1].requests(UM)
    assert [(t.topic_name, len(t.partition_states)) for t in metadata.topic_states] == [("orders", 2)]


@pytest.mark.parametrize(("partitions", "replication_factor", "error"), [
    (0, None, ErrorCode.invalid_partitions),
    (None, 0, ErrorCode.invalid_replication_factor),
], ids=["zero partitions", "zero replicas"])
async def test_create_topic_refuses_zero_partitions_or_replicas_instead_of_taking_the_default(
        controller, brokers, partitions, replication_factor, error):
    with pytest.raises(ControllerError) as refused:
        await controller.create_topic("zero", partitions=partitions, replication_factor=replication_factor)
    assert refused.value.error_code == error
    assert "zero" not in controller.metadata.topics


async def test_a_partition_error_is_raised_with_broker_and_partition(controller, brokers, clock):
    await controller.create_topic("t", {0: [1, 2], 1: [2, 1]})
    brokers[2].partition_error[("t", 0)] = ErrorCode.kafka_storage_error
    assert let_sessions_expire(controller, clock, 1) == [1]  # broker 2 takes over t-0
    with pytest.raises(PropagationError) as raised:
        await controller.settle()
    assert [(f.broker_id, f.api, f.partition, f.error) for f in raised.value.failures] == \
        [(2, "LEADER_AND_ISR", "t-0", "KAFKA_STORAGE_ERROR")]
    assert controller.registration("t", 0).leader == 2  # decided; the broker must be fixed or resynced


async def test_a_stale_partition_answer_means_the_broker_already_has_it(controller, brokers, clock):
    await controller.create_topic("t", {0: [1, 2]})
    assert let_sessions_expire(controller, clock, 2) == [2]
    await controller.settle()
    brokers[2].partition_error[("t", 0)] = ErrorCode.stale_controller_epoch
    forget_requests(brokers)
    heartbeat(controller, 2)  # back: resynced
    await controller.settle()  # no error: the broker has this state already
    assert partition_states(brokers[2].requests(LAI)[0])[("t", 0)].isr == [1]


async def test_a_stale_controller_epoch_for_the_whole_request_is_raised(controller, brokers):
    brokers[3].request_error[UM] = ErrorCode.stale_controller_epoch
    with pytest.raises(PropagationError) as raised:
        await controller.create_topic("t", {0: [1]})
    assert [(f.broker_id, f.api, f.partition, f.error) for f in raised.value.failures] == \
        [(3, "UPDATE_METADATA", None, "STALE_CONTROLLER_EPOCH")]


async def test_delete_topic_stops_and_deletes_replicas_then_forgets_the_topic(controller, brokers):
    await controller.create_topic("gone", {0: [1, 2], 1: [2, 1]})
    await controller.create_topic("kept", {0: [3]})
    forget_requests(brokers)
    await controller.delete_topic("gone")
    assert [apis(brokers[i]) for i in (1, 2, 3)] == [[SR, UM], [SR, UM], [UM]]
    (stop,) = brokers[1].requests(SR)
    assert [(t.topic_name, [(p.partition_index, p.leader_epoch, p.delete_partition) for p in t.partition_states])
            for t in stop.topic_states] == [("gone", [(0, EPOCH_DURING_DELETE, True), (1, EPOCH_DURING_DELETE, True)])]
    assert list(brokers[3].image.topics) == ["kept"]
    # The deletion reaches a broker with a view as LeaderDuringDelete for each of the topic's partitions.
    assert [(t.topic_name, [p.leader for p in t.partition_states])
            for t in brokers[3].requests(UM)[-1].topic_states] == [("gone", [-2, -2])]
    with pytest.raises(ControllerError):
        controller.registration("gone", 0)
    with pytest.raises(ControllerError) as raised:
        await controller.delete_topic("gone")
    assert raised.value.error_code == ErrorCode.unknown_topic_or_partition


async def test_a_broker_back_from_silence_is_resynced_with_all_its_partitions(controller, brokers, clock):
    await controller.create_topic("a", {0: [1, 2], 1: [2, 3]})
    await controller.create_topic("b", {0: [3, 2]})
    assert let_sessions_expire(controller, clock, 2) == [2]
    await controller.settle()
    forget_requests(brokers)
    assert heartbeat(controller, 2) == HeartbeatAnswer(is_fenced=False, should_shut_down=False)
    await controller.settle()
    assert apis(brokers[1]) == apis(brokers[3]) == [UM]  # nothing changed for them but broker 2's liveness
    assert apis(brokers[2]) == [LAI, UM]
    resync = partition_states(brokers[2].requests(LAI)[0])
    assert set(resync) == {("a", 0), ("a", 1), ("b", 0)}
    assert (resync[("a", 1)].leader, resync[("a", 1)].isr) == (3, [3])  # what it missed while fenced
    assert live_broker_ids(brokers[1].requests(UM)[-1]) == [1, 2, 3]


async def test_a_restarted_broker_on_a_new_port_is_resynced_by_its_registration(controller, brokers, clock):
    await controller.create_topic("t", {0: [1, 2]})
    old_epoch = epoch_of(controller, 2)
    await brokers[2].stop()
    assert let_sessions_expire(controller, clock, 2) == [2]
    restarted = brokers[2] = await FakeBroker(2).start()
    epoch = controller.register_broker(2, uuid.uuid4(), HOST, restarted.port)
    assert epoch > old_epoch
    await controller.settle()
    assert apis(restarted) == [LAI, UM]  # registered, still fenced: its partitions and the metadata
    assert set(partition_states(restarted.requests(LAI)[0])) == {("t", 0)}
    assert restarted.requests(LAI)[0].broker_epoch == epoch
    assert live_broker_ids(restarted.requests(UM)[0]) == [1, 3]  # not itself: it is fenced
    heartbeat(controller, 2)
    await controller.settle()
    ports = {b.id: b.endpoints[0].port for b in brokers[1].requests(UM)[-1].live_brokers}
    assert ports[2] == restarted.port


async def test_a_fenced_broker_leaves_metadata_and_cannot_get_replicas(controller, brokers, clock):
    assert let_sessions_expire(controller, clock, 3) == [3]
    await controller.settle()
    assert live_broker_ids(brokers[1].requests(UM)[-1]) == [1, 2]
    forget_requests(brokers)
    with pytest.raises(ControllerError) as raised:
        await controller.create_topic("t", {0: [3]})
    assert raised.value.error_code == ErrorCode.invalid_replica_assignment
    assert "t" not in controller.metadata.topics
    assert all(fake.received == [] for fake in brokers.values())


async def test_a_silent_broker_times_out_and_is_caught_up_when_it_returns(controllers, brokers):
    controller = await controllers.start(brokers[1], propagation_timeout_ms=200)
    port = brokers[1].port
    await brokers[1].stop()
    forget_requests(brokers)
    with pytest.raises(PropagationError) as raised:
        await controller.create_topic("t", {0: [1]})
    assert {(f.api, f.error) for f in raised.value.failures} == \
        {("LEADER_AND_ISR", "no answer within 200 ms"), ("UPDATE_METADATA", "no answer within 200 ms")}
    await brokers[1].start(port)
    await wait_until(lambda: apis(brokers[1]) == [LAI, UM], "the queued requests to arrive")


# ------------------------------------------------------------------------------------------------- stop


async def test_stop_closes_connections_and_the_listener(controllers, brokers):
    controller = await controllers.start(brokers[1])
    connection = await connect_as_controller(HOST, controller.port)
    port = controller.port
    await controller.stop()
    await wait_until(lambda: connection.closed, "the controller to close the connection")
    await wait_until(lambda: not brokers[1].connections, "the controller's connection to the broker to close")
    with pytest.raises(OSError):
        await asyncio.open_connection(HOST, port)


async def test_stop_ends_the_sender_of_a_fenced_broker_whose_connect_failed_as_it_was_cancelled(controllers, clock):
    # Python 3.11's asyncio.wait_for, which Connection.connect uses, returns the inner outcome instead of
    # raising CancelledError when both arrive together; the sender must not go on retrying after that.
    loop = asyncio.get_running_loop()
    attempts: list[asyncio.Future] = []

    async def connect(host: str, port: int) -> Connection:
        attempt = loop.create_future()
        attempts.append(attempt)
        return await asyncio.wait_for(attempt, 10)

    controller = await controllers.start(connect=connect)
    controller.register_broker(1, uuid.uuid4(), HOST, 9)
    heartbeat(controller, 1)
    await wait_until(lambda: attempts, "the channel to connect to broker 1")
    attempts[-1].set_exception(ConnectionRefusedError(111, "refused"))
    assert let_sessions_expire(controller, clock, 1) == [1]  # out of the channel: its sender is cancelled
    await asyncio.wait_for(controller.stop(), 5)
    assert len(attempts) == 1


# ------------------------------------------------------------------------ incremental UpdateMetadata


async def test_a_second_topic_sends_each_broker_only_its_partitions(controller, brokers):
    await controller.create_topic("first", {i: [1, 2, 3] for i in range(20)})
    forget_requests(brokers)
    await controller.create_topic("second", {0: [1, 2], 1: [2, 3]})
    await controller.settle()
    for fake in brokers.values():
        assert [(t.topic_name, len(t.partition_states), r.type) for r in fake.requests(UM) for t in r.topic_states] \
            == [("second", 2, 1)]
        assert set(fake.image.topics) == {"first", "second"}


async def test_a_broker_that_refused_an_update_gets_a_full_one_next(controller, brokers):
    await controller.create_topic("t", {0: [1, 2], 1: [2, 3]})
    brokers[3].request_error[UM] = ErrorCode.stale_controller_epoch
    with pytest.raises(PropagationError):
        await controller.create_topic("u", {0: [1, 2]})
    del brokers[3].request_error[UM]
    forget_requests(brokers)
    await controller.create_topic("v", {0: [1, 2]})
    assert [r.type for r in brokers[3].requests(UM)] == [2]  # it missed "u": everything again
    assert [r.type for r in brokers[1].requests(UM)] == [1]
    assert set(brokers[3].image.topics) == set(brokers[1].image.topics) == {"t", "u", "v"}


async def test_a_large_push_is_built_in_chunks_with_the_event_loop_free_in_between(controller, brokers):
    """Heartbeats are handled while the controller builds an UpdateMetadata of thousands of partitions."""
    await controller.create_topic("big", {i: [1, 2, 3] for i in range(2_000)})
    await controller.settle()
    forget_requests(brokers)
    # Every partition's ISR shrinks: the next push carries all 2,000 partitions to each broker.
    controller.metadata.apply([change_isr(p, p.isr[:2]) for p in controller.metadata.topics["big"].partitions.values()])
    sent_before = controller.propagator.update_partition_states
    queued_at_each_turn = []

    async def other_work():  # what the event loop runs whenever the build lets it: heartbeats, say
        while not push.done():
            queued_at_each_turn.append(controller.propagator.update_partition_states - sent_before)
            heartbeat(controller, 1)
            await asyncio.sleep(0)

    push = asyncio.create_task(controller.propagator.push_metadata())
    await asyncio.gather(push, other_work())
    await controller.propagator.wait(push.result())
    # Two chunks of 1,000 for the first broker, each followed by a turn of other work, before its request
    # (built in one go, every request would be queued before the other work's first turn).
    assert queued_at_each_turn[:2] == [0, 0]
    assert controller.propagator.update_partition_states - sent_before == 3 * 2_000
    for fake in brokers.values():
        (update,) = fake.requests(UM)
        assert sum(len(t.partition_states) for t in update.topic_states) == 2_000


async def test_a_broker_back_on_a_new_connection_during_a_chunked_push_gets_a_full_update(controller, brokers):
    """Fenced by silence and back while a push was being built for it: it may have missed updates queued to
    its old connection, so what the push sends it is everything."""
    await controller.create_topic("big", {i: [1, 2, 3] for i in range(2_000)})
    await controller.settle()
    controller.metadata.apply([change_isr(p, p.isr[:2]) for p in controller.metadata.topics["big"].partitions.values()])
    forget_requests(brokers)
    push = asyncio.create_task(controller.propagator.push_metadata(broker_ids=[1]))
    await asyncio.sleep(0)  # the first chunk is built
    assert not push.done()
    controller.channel.remove_broker(1)
    controller.channel.add_broker(1, HOST, brokers[1].port)
    await controller.propagator.wait(await push)
    (update,) = brokers[1].requests(UM)
    assert update.type == 2 and sum(len(t.partition_states) for t in update.topic_states) == 2_000


async def test_a_broker_gone_while_an_earlier_brokers_update_is_built_is_skipped(controller, brokers):
    """The push goes through the brokers one after another; one removed meanwhile gets nothing (and everything
    when it returns), and the push goes on to the others."""
    await controller.create_topic("big", {i: [1, 2, 3] for i in range(2_000)})
    await controller.settle()
    controller.metadata.apply([change_isr(p, p.isr[:2]) for p in controller.metadata.topics["big"].partitions.values()])
    forget_requests(brokers)
    push = asyncio.create_task(controller.propagator.push_metadata())
    await asyncio.sleep(0)  # broker 1's first chunk is built
    assert not push.done()
    controller.channel.remove_broker(3)
    await controller.propagator.wait(await push)
    assert not brokers[3].requests(UM)
    for broker_id in (1, 2):
        (update,) = brokers[broker_id].requests(UM)
        assert sum(len(t.partition_states) for t in update.topic_states) == 2_000


async def test_a_partition_changed_during_a_chunked_push_is_sent_as_it_is_now(controller, brokers):
    """Its LeaderAndIsr may already be queued: the UpdateMetadata after it must not carry the older state."""
    await controller.create_topic("big", {i: [1, 2, 3] for i in range(2_000)})
    await controller.settle()
    controller.metadata.apply([change_isr(p, p.isr[:2]) for p in controller.metadata.topics["big"].partitions.values()])
    forget_requests(brokers)
    push = asyncio.create_task(controller.propagator.push_metadata(broker_ids=[1]))
    await asyncio.sleep(0)  # the first chunk, with partition 0, is built
    assert not push.done()
    moved = controller.registration("big", 0)
    controller.metadata.apply([change_isr(moved, moved.isr[:1])])
    await controller.propagator.wait(await push)
    assert brokers[1].image.topics["big"].partitions[0].isr == list(moved.isr[:1])


async def test_a_broker_that_refused_an_increment_gets_a_full_update_without_another_change(controller, brokers):
    await controller.create_topic("t", {0: [1, 2], 1: [2, 3]})
    await controller.settle()
    forget_requests(brokers)
    brokers[3].refuse_next[UM] = 1
    moved = controller.registration("t", 1)
    controller.metadata.apply([change_isr(moved, moved.isr[:1])])
    controller.request_metadata_push()
    with pytest.raises(PropagationError):
        await controller.settle()
    await controller.settle()  # nothing changed since the refusal, which alone brought the full update
    assert [r.type for r in brokers[3].requests(UM)] == [1, 2]
    assert brokers[3].image.topics["t"].partitions[1].isr == [2]
