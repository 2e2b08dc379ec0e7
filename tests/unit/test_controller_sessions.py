"""ClusterController's broker sessions end to end, on a fake clock: registration and unfencing, fencing on
session expiry (leaderships moved, ISRs shrunk, the brokers told), controlled shutdown, brokers that never got
unfenced, and a controller whose own loop stalled. FakeBrokers record what the controller sends."""

import time
import uuid

import pytest
from kio.schema.errors import ErrorCode

from replog.controller.cluster import ControllerError
from replog.controller.heartbeats import BrokerState
from replog.controller.registry import NO_LEADER, LeaderRecoveryState

from .controller_fixtures import (  # noqa: F401 (fixtures)
    ALIVE,
    FENCED,
    GONE,
    LAI,
    SESSION_MS,
    UM,
    alter_partition,
    apis,
    brokers,
    clock,
    controller,
    controllers,
    epoch_of,
    error_of,
    forget_requests,
    heartbeat,
    join,
    last_state,
    let_sessions_expire,
    live_broker_ids,
    partition_states,
    state,
)
from .test_controller_fakes import HOST, FakeBroker, wait_until

# ------------------------------------------------------------------------------------------ registration


async def test_a_registered_broker_is_fenced_until_a_heartbeat_unfences_it(controllers, brokers):
    controller = await controllers.start()
    epoch = controller.register_broker(1, uuid.uuid4(), HOST, brokers[1].port, rack="r1",
                                       cluster_id="replog-cluster")
    await controller.settle()
    registered = controller.metadata.brokers[1]
    assert (registered.epoch, registered.rack, registered.fenced) == (epoch, "r1", True)
    assert controller.sessions.state(1) is BrokerState.FENCED
    assert not controller.metadata.is_eligible(1) and controller.metadata.active_broker_ids() == []
    (metadata,) = brokers[1].requests(UM)  # it learns the cluster, without itself in it
    assert (live_broker_ids(metadata), metadata.broker_epoch) == ([], epoch)
    with pytest.raises(ControllerError) as raised:
        await controller.create_topic("t", {0: [1]})
    assert raised.value.error_code == ErrorCode.invalid_replica_assignment
    with pytest.raises(ControllerError) as raised:
        await controller.create_topic("t")  # round robin over no active broker
    assert raised.value.error_code == ErrorCode.invalid_replication_factor

    assert heartbeat(controller, 1, want_fence=True) == FENCED  # not caught up yet
    assert controller.metadata.brokers[1].fenced
    assert heartbeat(controller, 1) == ALIVE
    assert not controller.metadata.brokers[1].fenced and controller.metadata.active_broker_ids() == [1]
    await controller.settle()
    assert live_broker_ids(brokers[1].requests(UM)[-1]) == [1]
    await controller.create_topic("t", {0: [1]})


async def test_another_incarnation_is_refused_while_the_session_lives(controller, brokers, clock):
    await controller.create_topic("t", {0: [1, 2]})
    epoch = epoch_of(controller, 1)
    clock.advance(SESSION_MS)  # the session is alive up to and including lastContact + timeout
    error = error_of(controller.register_broker, 1, uuid.uuid4(), HOST, brokers[1].port)
    assert error == ErrorCode.duplicate_broker_registration
    assert epoch_of(controller, 1) == epoch and not controller.metadata.brokers[1].fenced
    assert state(controller, "t") == (1, (1, 2), 0, 0)


async def test_a_new_incarnation_is_accepted_once_the_session_expired(controller, brokers, clock):
    await controller.create_topic("t", {0: [1, 2]})
    old_epoch = epoch_of(controller, 1)
    assert let_sessions_expire(controller, clock, 1) == [1]
    new_epoch = controller.register_broker(1, uuid.uuid4(), HOST, brokers[1].port)
    assert new_epoch > old_epoch and controller.metadata.brokers[1].fenced
    assert error_of(controller.broker_heartbeat, 1, old_epoch, want_fence=False, want_shutdown=False) == \
        ErrorCode.stale_broker_epoch
    assert heartbeat(controller, 1) == ALIVE
    assert state(controller, "t") == (2, (2,), 1, 1)  # no preferred election: 2 keeps leading


async def test_a_registration_after_an_unnoticed_expiry_fences_the_old_incarnation(controller, brokers, clock):
    await controller.create_topic("t", {0: [1, 2]})
    clock.advance(SESSION_MS + 1)
    heartbeat(controller, 2)
    heartbeat(controller, 3)  # the periodic check has not run: broker 1 is expired but still unfenced
    assert not controller.metadata.brokers[1].fenced
    controller.register_broker(1, uuid.uuid4(), HOST, brokers[1].port)
    assert state(controller, "t") == (2, (2,), 1, 1)
    assert controller.fence_expired_brokers() == []  # fenced once, by the registration
    await controller.settle()
    assert (last_state(brokers[2], LAI, "t").leader, last_state(brokers[2], LAI, "t").isr) == (2, [2])


async def test_registering_again_while_unfenced_fences_first(controllers, brokers):
    # The same incarnation again (a retry) is accepted, but as a restart: the broker may have lost unflushed
    # records, so it leaves the ISRs and its leaderships move, as for any fencing.
    controller = await controllers.start()
    incarnations = {broker_id: uuid.uuid4() for broker_id in brokers}
    for broker_id, fake in brokers.items():
        join(controller, fake, incarnations[broker_id])
    await controller.settle()
    await controller.create_topic("t", {0: [1, 2]})
    old_epoch = epoch_of(controller, 1)
    forget_requests(brokers)
    epoch = controller.register_broker(1, incarnations[1], HOST, brokers[1].port)
    assert epoch > old_epoch and epoch_of(controller, 1) == epoch
    assert controller.metadata.brokers[1].fenced and state(controller, "t") == (2, (2,), 1, 1)
    await controller.settle()
    assert apis(brokers[1])[:2] == [LAI, UM] and brokers[1].requests(LAI)[0].broker_epoch == epoch  # resynced
    assert heartbeat(controller, 1) == ALIVE
    await controller.settle()
    assert state(controller, "t") == (2, (2,), 1, 1)  # back, but out of the ISR until the leader adds it


async def test_a_foreign_cluster_id_is_refused(controller, brokers):
    error = error_of(controller.register_broker, 4, uuid.uuid4(), HOST, 9, cluster_id="other-cluster")
    assert error == ErrorCode.inconsistent_cluster_id
    assert 4 not in controller.metadata.brokers and 4 not in controller.sessions


async def test_heartbeats_with_a_stale_or_unknown_epoch_are_refused(controller, brokers):
    epoch = epoch_of(controller, 1)
    for broker_id, broker_epoch in ((1, epoch - 1), (1, epoch + 1), (9, 0)):
        error = error_of(controller.broker_heartbeat, broker_id, broker_epoch, want_fence=True,
                         want_shutdown=True)
        assert error == ErrorCode.stale_broker_epoch
    assert not controller.metadata.brokers[1].fenced  # the refused want_fence changed nothing


# --------------------------------------------------------------------------------- fencing on expiry


async def test_a_fenced_leader_is_replaced_by_the_next_replica_in_assignment_order(controller, brokers, clock):
    await controller.create_topic("t", {0: [1, 3, 2]})
    await controller.create_topic("u", {0: [2, 1]})
    assert alter_partition(controller, "t", [1, 2, 3]) == ErrorCode.none  # ISR order differs from assignment
    await controller.settle()
    forget_requests(brokers)
    assert let_sessions_expire(controller, clock, 1) == [1]
    assert controller.metadata.brokers[1].fenced
    # Leader fenced: the first replica in assignment order that is in the ISR leads; both epochs move.
    assert state(controller, "t") == (3, (2, 3), 1, 2)
    # Follower fenced: out of the ISR, the leader and its epoch stay.
    assert state(controller, "u") == (2, (2,), 0, 1)
    await controller.settle()
    assert apis(brokers[1]) == []  # fenced: out of the channel
    to_2 = partition_states(brokers[2].requests(LAI)[0])
    assert set(to_2) == {("t", 0), ("u", 0)}
    assert (to_2[("t", 0)].leader, to_2[("t", 0)].isr, to_2[("t", 0)].leader_epoch,
            to_2[("t", 0)].partition_epoch) == (3, [2, 3], 1, 2)
    assert (to_2[("u", 0)].leader, to_2[("u", 0)].isr, to_2[("u", 0)].leader_epoch) == (2, [2], 0)
    to_3 = partition_states(brokers[3].requests(LAI)[0])
    assert set(to_3) == {("t", 0)}  # not a replica of u
    for survivor in (2, 3):
        assert apis(brokers[survivor])[0] == LAI and apis(brokers[survivor])[-1] == UM
        metadata = brokers[survivor].requests(UM)[-1]
        assert live_broker_ids(metadata) == [2, 3]
        for topic in ("t", "u"):
            pushed = last_state(brokers[survivor], UM, topic)
            assert pushed.offline_replicas == [1]
        assert last_state(brokers[survivor], UM, "t").leader == 3


async def test_the_last_isr_member_stays_in_the_isr_and_leads_again_when_it_returns(controller, brokers, clock):
    await controller.create_topic("t", {0: [1, 2]})
    assert alter_partition(controller, "t", [1]) == ErrorCode.none  # broker 2 fell behind
    await controller.settle()
    assert let_sessions_expire(controller, clock, 1) == [1]
    # Broker 2 is alive but may have missed committed records: no clean leader, and unclean is off.
    assert state(controller, "t") == (NO_LEADER, (1,), 1, 2)
    await controller.settle()
    assert (last_state(brokers[2], LAI, "t").leader, last_state(brokers[2], LAI, "t").isr) == (NO_LEADER, [1])
    assert last_state(brokers[3], UM, "t").leader == NO_LEADER

    forget_requests(brokers)
    controller.register_broker(1, uuid.uuid4(), HOST, brokers[1].port)  # it restarted
    assert state(controller, "t")[0] == NO_LEADER  # registered is not eligible yet
    assert heartbeat(controller, 1) == ALIVE
    assert state(controller, "t") == (1, (1,), 2, 3)
    await controller.settle()
    assert [partition_states(r)[("t", 0)].leader for r in brokers[1].requests(LAI)] == [NO_LEADER, 1]
    assert last_state(brokers[2], LAI, "t").leader == 1 and last_state(brokers[2], LAI, "t").leader_epoch == 2


async def test_unclean_election_when_the_topic_allows_it(controller, brokers, clock):
    await controller.create_topic("dirty", {0: [1, 2, 3]}, {"unclean.leader.election.enable": "true"})
    await controller.create_topic("clean", {0: [1, 2, 3]})
    for topic in ("dirty", "clean"):
        assert alter_partition(controller, topic, [1]) == ErrorCode.none
    await controller.settle()
    assert let_sessions_expire(controller, clock, 1) == [1]
    dirty = controller.registration("dirty", 0)
    assert (dirty.leader, dirty.isr, dirty.leader_epoch, dirty.partition_epoch) == (2, (2,), 1, 2)
    assert dirty.leader_recovery_state == LeaderRecoveryState.RECOVERING
    assert state(controller, "clean") == (NO_LEADER, (1,), 1, 2)
    assert controller.registration("clean", 0).leader_recovery_state == LeaderRecoveryState.RECOVERED
    await controller.settle()
    told = last_state(brokers[3], LAI, "dirty")
    assert (told.leader, told.isr, told.leader_recovery_state) == (2, [2], int(LeaderRecoveryState.RECOVERING))
    # The recovering leader may not grow its ISR before it has recovered; once recovered it may.
    assert alter_partition(controller, "dirty", [2, 3], leader_recovery_state=1) == ErrorCode.invalid_request
    assert alter_partition(controller, "dirty", [2], leader_recovery_state=1) == ErrorCode.none  # no change
    assert alter_partition(controller, "dirty", [2, 3]) == ErrorCode.none  # recovered, and grown
    dirty = controller.registration("dirty", 0)
    assert (dirty.isr, dirty.leader_recovery_state) == ((2, 3), LeaderRecoveryState.RECOVERED)


@pytest.mark.parametrize(("cluster_default", "topic_config", "unclean"), [
    (True, None, True), (True, "false", False), (False, "TRUE", True)])
async def test_the_topic_config_overrides_the_cluster_default(controllers, brokers, clock, cluster_default,
                                                              topic_config, unclean):
    controller = await controllers.start(*brokers.values(), unclean_leader_election_enable=cluster_default)
    configs = {} if topic_config is None else {"unclean.leader.election.enable": topic_config}
    await controller.create_topic("t", {0: [1, 2]}, configs)
    assert alter_partition(controller, "t", [1]) == ErrorCode.none
    assert let_sessions_expire(controller, clock, 1) == [1]
    assert controller.registration("t", 0).leader == (2 if unclean else NO_LEADER)


async def test_fencing_the_last_replica_of_a_partition_leaves_it_leaderless(controller, brokers, clock):
    await controller.create_topic("solo", {0: [3]})
    assert let_sessions_expire(controller, clock, 3) == [3]
    assert state(controller, "solo") == (NO_LEADER, (3,), 1, 1)
    assert let_sessions_expire(controller, clock) == []  # reported once
    assert heartbeat(controller, 3) == ALIVE  # same epoch: fenced by silence, now back and resynced
    assert state(controller, "solo") == (3, (3,), 2, 2)


# ----------------------------------------------------------------------------------- controlled shutdown


async def test_controlled_shutdown_moves_leaderships_before_the_broker_may_stop(controller, brokers):
    await controller.create_topic("t", {0: [1, 2, 3], 1: [2, 1, 3]})
    await controller.create_topic("solo", {0: [1]})
    forget_requests(brokers)
    brokers[2].stall_next[LAI] = 1  # the new leader does not answer its LeaderAndIsr yet

    assert heartbeat(controller, 1, want_shutdown=True) == ALIVE
    assert controller.metadata.brokers[1].in_controlled_shutdown
    assert not controller.metadata.is_eligible(1)
    assert state(controller, "t", 0) == (2, (2, 3), 1, 1)  # leadership moved
    assert state(controller, "t", 1) == (2, (2, 3), 0, 1)  # left the ISR it followed in
    assert state(controller, "solo") == (NO_LEADER, (1,), 1, 1)  # RF=1: leaderless, not blocking
    assert not controller.metadata.leads_any(1)

    await wait_until(lambda: brokers[2].stalled, "the new leader to receive its LeaderAndIsr")
    # It leads nothing, but its successor has not confirmed: not yet. And there is no way back.
    assert heartbeat(controller, 1, want_shutdown=True) == ALIVE
    assert heartbeat(controller, 1) == ALIVE
    assert controller.sessions.state(1) is BrokerState.CONTROLLED_SHUTDOWN
    [(stalled_key, stalled)] = brokers[2].stalled
    assert stalled_key == LAI and partition_states(stalled)[("t", 0)].leader == 2

    brokers[2].close_connections()  # the controller sends the LeaderAndIsr again, and it is answered
    await controller.settle()
    assert last_state(brokers[2], LAI, "t", 0).leader == 2
    assert last_state(brokers[3], LAI, "t", 0).leader == 2
    assert heartbeat(controller, 1, want_shutdown=True) == GONE
    assert controller.metadata.brokers[1].fenced and not controller.metadata.brokers[1].in_controlled_shutdown
    assert state(controller, "solo") == (NO_LEADER, (1,), 1, 1)
    await controller.settle()
    assert live_broker_ids(brokers[2].requests(UM)[-1]) == [2, 3]

    # Its next process need not wait out the old session (KAFKA-19047).
    controller.register_broker(1, uuid.uuid4(), HOST, brokers[1].port)
    assert heartbeat(controller, 1) == ALIVE
    assert state(controller, "solo") == (1, (1,), 2, 2)


async def test_a_broker_leading_nothing_may_shut_down_at_once(controller, brokers):
    await controller.create_topic("t", {0: [1, 3]})
    assert heartbeat(controller, 3, want_shutdown=True) == GONE
    assert controller.metadata.brokers[3].fenced
    assert state(controller, "t") == (1, (1,), 0, 1)
    await controller.settle()
    assert live_broker_ids(brokers[1].requests(UM)[-1]) == [1, 2]


async def test_a_broker_in_controlled_shutdown_is_still_listed_but_gets_no_new_replicas(controller, brokers):
    await controller.create_topic("t", {0: [3, 1]})
    assert heartbeat(controller, 3, want_shutdown=True) == ALIVE
    await controller.settle()
    assert live_broker_ids(brokers[1].requests(UM)[-1]) == [1, 2, 3]  # clients may still reach it
    assert last_state(brokers[1], UM, "t").offline_replicas == []
    with pytest.raises(ControllerError) as raised:
        await controller.create_topic("u", {0: [3]})
    assert raised.value.error_code == ErrorCode.invalid_replica_assignment
    topic = await controller.create_topic("v", partitions=4, replication_factor=2)
    assert all(set(p.replicas) == {1, 2} for p in topic.partitions.values())


# ------------------------------------------------------------------------ brokers that never got unfenced


@pytest.fixture
async def dead_fenced_fourth(controllers, brokers):
    """A controller with brokers 1-3, a short propagation timeout, and broker 4 registered but still fenced."""
    controller = await controllers.start(*brokers.values(), propagation_timeout_ms=300)
    fourth = await FakeBroker(4).start()
    try:
        controller.register_broker(4, uuid.uuid4(), HOST, fourth.port)
        await controller.settle()
        assert apis(fourth) == [UM]  # no partitions: just the metadata
        await fourth.stop()  # it dies before its first unfencing heartbeat
        yield controller
    finally:
        await fourth.stop()


async def test_a_fenced_broker_that_shuts_down_is_told_nothing_more(dead_fenced_fourth):
    controller = dead_fenced_fourth
    assert heartbeat(controller, 4, want_shutdown=True) == GONE
    assert 4 not in controller.channel.broker_ids
    await controller.create_topic("t", {0: [1]})  # no answer awaited from the departed broker
    await controller.settle()


async def test_a_fenced_broker_that_falls_silent_is_told_nothing_more(dead_fenced_fourth, clock):
    controller = dead_fenced_fourth
    clock.advance(SESSION_MS)
    for broker_id in (1, 2, 3):
        heartbeat(controller, broker_id)
    assert controller.fence_expired_brokers() == [] and 4 in controller.channel.broker_ids  # not silent enough
    assert let_sessions_expire(controller, clock, 4) == []  # fenced already: no fencing to report...
    assert 4 not in controller.channel.broker_ids  # ...but no more requests to it
    await controller.create_topic("t", {0: [1]})  # no answer awaited from the departed broker
    await controller.settle()
    # It may come back (a new process, or the same one after a pause): registered and told everything again.
    fourth = await FakeBroker(4).start()
    try:
        controller.register_broker(4, uuid.uuid4(), HOST, fourth.port)
        await controller.settle()
        assert apis(fourth) == [UM] and [t.topic_name for t in fourth.requests(UM)[0].topic_states] == ["t"]
    finally:
        await fourth.stop()


# ----------------------------------------------------------------------------------- controller stall

STALL_SESSION_MS = 3_000  # fence checks every 300 ms: a check 900 ms late is a stall, not a busy loop


async def test_a_controller_whose_own_loop_stalled_fences_nobody_for_the_silence(controllers, brokers, clock):
    # Issue 19: a controller SIGSTOPped past the session timeout fenced every broker on resume, although
    # their heartbeats were waiting in its sockets. Here the stall blocks the loop, and the session clock
    # moves past the timeout meanwhile, as a real one would.
    controller = await controllers.start(*brokers.values(), broker_session_timeout_ms=STALL_SESSION_MS)
    await controller.create_topic("t", {0: [1, 2], 1: [2, 3]})
    leaders_before = {b.broker_id: controller.metadata.leads_any(b.broker_id) for b in brokers.values()}
    clock.advance(STALL_SESSION_MS + 1)
    time.sleep(1.2)  # the stall itself: nothing runs on the loop, as under SIGSTOP
    await wait_until(lambda: controller.stalls == 1, "the fence check noticing the stall")
    assert all(controller.sessions.state(b) is BrokerState.UNFENCED for b in brokers)
    assert {b: controller.metadata.leads_any(b) for b in brokers} == leaders_before
    clock.advance(STALL_SESSION_MS + 1)  # a real silence after the stall is still fenced
    await wait_until(lambda: all(controller.sessions.state(b) is BrokerState.FENCED for b in brokers),
                     "silent brokers fenced a session timeout after the stall")


async def test_without_a_stall_the_background_check_fences_silent_brokers(controllers, brokers, clock):
    controller = await controllers.start(*brokers.values(), broker_session_timeout_ms=STALL_SESSION_MS)
    clock.advance(STALL_SESSION_MS + 1)
    await wait_until(lambda: all(controller.sessions.state(b) is BrokerState.FENCED for b in brokers),
                     "silent brokers fenced by the background check")
    assert controller.stalls == 0
