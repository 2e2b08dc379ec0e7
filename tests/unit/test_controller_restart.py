"""A restarted controller replays its metadata log: the next controller epoch, the same brokers, topics and
sessions (every unfenced broker gets a full session timeout), its snapshots; a controlled shutdown cut short by
the restart is forgotten."""

import uuid

from kio.schema.errors import ErrorCode

from replog.controller.heartbeats import BrokerState, HeartbeatAnswer
from replog.controller.server import (
    FIRST_CONTROLLER_EPOCH,
    HeartbeatAnswer,
)
from replog.protocol.apis import ApiKey

from .controller_fixtures import (  # noqa: F401 (fixtures)
    ALIVE,
    GONE,
    LAI,
    SESSION_MS,
    UM,
    alter_partition_request,
    apis,
    brokers,
    clock,
    controller,
    controllers,
    decoded,
    epoch_of,
    forget_requests,
    heartbeat,
    let_sessions_expire,
    partition_states,
    state,
)
from .test_controller_fakes import HOST, wait_until


async def test_a_restarted_controller_replays_its_log_and_takes_the_next_epoch(controllers, brokers, clock):
    first = await controllers.start(*brokers.values())
    await first.create_topic("a", {0: [1, 2, 3], 1: [2, 3, 1]}, {"retention.ms": "60000"})
    await first.create_topic("gone", {0: [1]})
    await first.delete_topic("gone")
    assert let_sessions_expire(first, clock, 3) == [3]
    topic = first.metadata.topics["a"]
    response = first.alter_partition(decoded(ApiKey.ALTER_PARTITION, 2, alter_partition_request(
        topic.topic_id, 0, [1], broker_epoch=epoch_of(first, 1), partition_epoch=1)), 2)
    assert response["topics"][0]["partitions"][0]["error_code"] == ErrorCode.none
    await first.settle()
    before = {p.partition: p for p in topic.partitions.values()}
    registered = dict(first.metadata.brokers)
    assert registered[3].fenced and not registered[1].fenced
    await first.stop()
    forget_requests(brokers)

    second = await controllers.start()  # the same metadata log directory
    assert second.controller_epoch == FIRST_CONTROLLER_EPOCH + 1
    assert second.metadata.brokers == registered  # epochs, incarnations, addresses, fenced flags
    assert set(second.metadata.topics) == {"a"}
    replayed = second.metadata.topics["a"]
    assert (replayed.topic_id, replayed.configs) == (topic.topic_id, {"retention.ms": "60000"})
    assert replayed.partitions == before  # leaders, ISRs, both epochs
    assert (before[0].isr, before[0].partition_epoch) == ((1,), 2)

    # The unfenced brokers are resynced under the new epoch; the fenced one hears nothing until it returns.
    assert apis(brokers[3]) == []
    for broker_id in (1, 2):
        assert apis(brokers[broker_id]) == [LAI, UM]
        (resync,) = brokers[broker_id].requests(LAI)
        assert set(partition_states(resync)) == {("a", 0), ("a", 1)}
        assert resync.controller_epoch == FIRST_CONTROLLER_EPOCH + 1
        assert resync.broker_epoch == registered[broker_id].epoch
        assert brokers[broker_id].requests(UM)[0].controller_epoch == FIRST_CONTROLLER_EPOCH + 1
    # Sessions go on with the same broker epochs.
    assert heartbeat(second, 1) == HeartbeatAnswer(is_fenced=False, should_shut_down=False)
    assert heartbeat(second, 3) == HeartbeatAnswer(is_fenced=False, should_shut_down=False)  # back
    await second.settle()
    forget_requests(brokers)
    await second.create_topic("b", {0: [1, 2]})
    for fake in brokers.values():
        for _, request in fake.received:
            assert request.controller_epoch == FIRST_CONTROLLER_EPOCH + 1
    lai = brokers[1].requests(LAI)[-1]
    assert partition_states(lai)[("b", 0)].controller_epoch == FIRST_CONTROLLER_EPOCH + 1
    # New registrations get epochs above every earlier one: offsets continue across the restart.
    assert second.register_broker(4, uuid.uuid4(), HOST, 9) > max(b.epoch for b in registered.values())


async def test_a_third_start_takes_a_third_epoch(controllers, brokers):
    first = await controllers.start(brokers[1])
    await first.stop()
    second = await controllers.start()
    await second.stop()
    third = await controllers.start()
    assert third.controller_epoch == FIRST_CONTROLLER_EPOCH + 2
    assert not third.metadata.brokers[1].fenced


async def test_a_running_controller_snapshots_its_metadata_and_a_restart_replays_the_snapshot(
        controllers, brokers, tmp_path):
    # KIP-630: a snapshot once metadata.log.max.record.bytes.between.snapshots have committed since the last.
    first = await controllers.start(*brokers.values(), metadata_snapshot_max_bytes=2_000)
    quorum_dir = tmp_path / "metadata" / "__cluster_metadata-0"
    snapshots_at_start = sorted(quorum_dir.glob("*.checkpoint"))
    for i in range(10):
        await first.create_topic(f"t{i}", {0: [1, 2, 3]})
    await wait_until(lambda: sorted(quorum_dir.glob("*.checkpoint")) != snapshots_at_start, "a new snapshot")
    topics, registered = dict(first.metadata.topics), dict(first.metadata.brokers)
    await first.stop()
    second = await controllers.start()
    assert second.metadata.topics == topics and second.metadata.brokers == registered


async def test_controllers_with_other_log_dirs_start_afresh(controllers, brokers, tmp_path):
    first = await controllers.start(brokers[1])
    await first.create_topic("t", {0: [1]})
    other = await controllers.start(log_dir=tmp_path / "other")
    assert (other.controller_epoch, other.metadata.brokers, other.metadata.topics) == (FIRST_CONTROLLER_EPOCH, {}, {})


async def test_a_restarted_controller_replays_sessions_and_gives_unfenced_brokers_a_full_timeout(
        controllers, brokers, clock):
    first = await controllers.start(*brokers.values())
    await first.create_topic("t", {0: [1, 2, 3]})
    assert let_sessions_expire(first, clock, 3) == [3]
    await first.settle()
    epochs = {b: epoch_of(first, b) for b in (1, 2, 3)}
    await first.stop()
    clock.advance(5 * SESSION_MS)  # no controller ran meanwhile: the brokers' silence proves nothing

    second = await controllers.start()
    assert {b: epoch_of(second, b) for b in (1, 2, 3)} == epochs
    assert [second.sessions.state(b) for b in (1, 2, 3)] == \
        [BrokerState.UNFENCED, BrokerState.UNFENCED, BrokerState.FENCED]
    assert [second.metadata.brokers[b].fenced for b in (1, 2, 3)] == [False, False, True]
    assert state(second, "t") == (1, (1, 2), 0, 1)
    assert second.fence_expired_brokers() == []
    clock.advance(SESSION_MS // 2)
    heartbeat(second, 2)
    clock.advance(SESSION_MS - SESSION_MS // 2)  # exactly one timeout after the restart: still alive
    assert second.fence_expired_brokers() == []
    assert not second.metadata.brokers[1].fenced
    clock.advance(1)
    assert second.fence_expired_brokers() == [1]  # broker 2 heartbeated; broker 3 was fenced already
    assert state(second, "t") == (2, (2,), 1, 2)


async def test_a_controlled_shutdown_cut_short_by_a_restart_is_forgotten(controllers, brokers):
    first = await controllers.start(*brokers.values())
    await first.create_topic("u", {0: [3, 1]})
    assert heartbeat(first, 3, want_shutdown=True) == ALIVE
    await first.settle()
    await first.stop()
    second = await controllers.start()
    broker = second.metadata.brokers[3]
    assert (broker.fenced, broker.in_controlled_shutdown) == (False, False)
    assert second.sessions.state(3) is BrokerState.UNFENCED
    assert state(second, "u") == (1, (1,), 1, 1)  # the moves stay
    assert heartbeat(second, 3, want_shutdown=True) == GONE  # leads nothing now
