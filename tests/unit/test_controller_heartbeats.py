"""Broker sessions: registration and broker epochs, heartbeats and the broker states they lead to, and
fencing of silent brokers, driven by a fake clock."""

import uuid

import pytest
from kio.schema.errors import ErrorCode

from replog.controller.heartbeats import (
    BROKER_SESSION_TIMEOUT_MS,
    BrokerSessions,
    BrokerState,
    DuplicateBrokerRegistration,
    StaleBrokerEpoch,
    StateChange,
)

FENCED, UNFENCED = BrokerState.FENCED, BrokerState.UNFENCED
CONTROLLED_SHUTDOWN, SHUTDOWN_NOW = BrokerState.CONTROLLED_SHUTDOWN, BrokerState.SHUTDOWN_NOW
TIMEOUT = BROKER_SESSION_TIMEOUT_MS
FIRST, SECOND = uuid.UUID(int=1), uuid.UUID(int=2)  # incarnation ids: one per broker process start


def leads(answer: bool):
    return lambda: answer


def never_asked():
    raise AssertionError("leads_partitions was asked although the answer cannot matter")


class Cluster:
    """BrokerSessions with a fake clock and the caller's broker-epoch counter (KRaft: the record offset)."""

    def __init__(self) -> None:
        self.now_ms = 1_000
        self.next_epoch = 100
        self.sessions = BrokerSessions()

    def advance(self, ms: int) -> None:
        self.now_ms += ms

    def register(self, broker_id: int, incarnation: uuid.UUID = FIRST) -> int:
        epoch = self.next_epoch
        self.sessions.register(broker_id, incarnation, epoch, self.now_ms)
        self.next_epoch += 1  # only a successful registration uses an offset
        return epoch

    def heartbeat(self, broker_id: int, epoch: int, *, leads_partitions=never_asked, **flags) -> StateChange:
        return self.sessions.heartbeat(broker_id, epoch, self.now_ms, leads_partitions=leads_partitions,
                                       **flags)

    def unfenced(self, broker_id: int, incarnation: uuid.UUID = FIRST) -> int:
        epoch = self.register(broker_id, incarnation)
        assert self.heartbeat(broker_id, epoch) == StateChange(FENCED, UNFENCED)
        return epoch

    def fence_expired(self) -> list[int]:
        return self.sessions.fence_expired(self.now_ms)


@pytest.fixture
def cluster() -> Cluster:
    return Cluster()


def test_the_default_session_timeout_is_kafkas():
    assert BrokerSessions().session_timeout_ms == 9_000


# ------------------------------------------------------------------------------------------ registration

def test_a_registered_broker_starts_fenced_and_its_first_heartbeat_unfences_it(cluster):
    epoch = cluster.register(1)
    assert 1 in cluster.sessions and 2 not in cluster.sessions
    assert cluster.sessions.state(1) is FENCED and cluster.sessions.broker_epoch(1) == epoch
    assert cluster.heartbeat(1, epoch) == StateChange(FENCED, UNFENCED)
    assert cluster.heartbeat(1, epoch) == StateChange(UNFENCED, UNFENCED)


def test_a_broker_that_wants_to_stay_fenced_stays_fenced(cluster):
    epoch = cluster.register(1)
    assert cluster.heartbeat(1, epoch, want_fence=True) == StateChange(FENCED, FENCED)  # still catching up
    assert cluster.heartbeat(1, epoch) == StateChange(FENCED, UNFENCED)


def test_a_different_incarnation_cannot_take_an_id_whose_session_is_alive(cluster):
    cluster.register(1, FIRST)
    cluster.advance(TIMEOUT)  # the session is still alive at exactly lastContact + timeout
    with pytest.raises(DuplicateBrokerRegistration) as raised:
        cluster.register(1, SECOND)
    assert raised.value.error_code == ErrorCode.duplicate_broker_registration


def test_a_duplicate_registration_changes_nothing(cluster):
    epoch = cluster.unfenced(1, FIRST)
    with pytest.raises(DuplicateBrokerRegistration):
        cluster.register(1, SECOND)
    assert cluster.sessions.broker_epoch(1) == epoch and cluster.sessions.state(1) is UNFENCED
    assert cluster.heartbeat(1, epoch) == StateChange(UNFENCED, UNFENCED)


def test_a_different_incarnation_takes_over_once_the_session_expired(cluster):
    old = cluster.register(1, FIRST)
    cluster.advance(TIMEOUT + 1)
    new = cluster.register(1, SECOND)
    assert new > old and cluster.sessions.broker_epoch(1) == new


def test_the_same_incarnation_may_register_again(cluster):
    # A retry of a registration whose response was lost: a new epoch, fenced again.
    old = cluster.unfenced(1, FIRST)
    assert cluster.sessions.register(1, FIRST, cluster.next_epoch, cluster.now_ms) is UNFENCED
    assert cluster.sessions.broker_epoch(1) == cluster.next_epoch > old
    assert cluster.sessions.state(1) is FENCED


def test_register_reports_the_state_it_replaced(cluster):
    assert cluster.sessions.register(1, FIRST, 1, cluster.now_ms) is None
    assert cluster.sessions.register(1, FIRST, 2, cluster.now_ms) is FENCED


def test_broker_epochs_must_grow(cluster):
    cluster.sessions.register(1, FIRST, 5, cluster.now_ms)
    with pytest.raises(AssertionError):
        cluster.sessions.register(2, FIRST, 5, cluster.now_ms)


# ---------------------------------------------------------------------------------------- broker epochs

def test_a_heartbeat_with_an_old_epoch_is_stale(cluster):
    old = cluster.unfenced(1, FIRST)
    cluster.advance(TIMEOUT + 1)
    new = cluster.register(1, SECOND)
    for epoch in (old, new + 1):
        with pytest.raises(StaleBrokerEpoch) as raised:
            cluster.heartbeat(1, epoch)
        assert raised.value.error_code == ErrorCode.stale_broker_epoch
    assert cluster.heartbeat(1, new) == StateChange(FENCED, UNFENCED)


def test_a_heartbeat_from_an_unregistered_broker_is_stale(cluster):
    with pytest.raises(StaleBrokerEpoch):
        cluster.heartbeat(7, 0)


def test_a_stale_heartbeat_does_not_renew_the_session(cluster):
    old = cluster.register(1, FIRST)
    new = cluster.register(1, FIRST)
    cluster.advance(TIMEOUT)
    with pytest.raises(StaleBrokerEpoch):
        cluster.heartbeat(1, old)
    cluster.advance(1)
    cluster.register(1, SECOND)  # the session of `new` expired: the stale heartbeat did not count
    assert cluster.sessions.broker_epoch(1) > new


# --------------------------------------------------------------------------------------------- expiry

def test_a_session_expires_only_after_the_timeout(cluster):
    epoch = cluster.unfenced(1)
    cluster.advance(TIMEOUT)
    assert cluster.fence_expired() == []  # lastContact + timeout == now: not yet
    assert cluster.sessions.state(1) is UNFENCED
    cluster.advance(1)
    assert cluster.fence_expired() == [1]
    assert cluster.sessions.state(1) is FENCED
    assert cluster.sessions.broker_epoch(1) == epoch  # fencing keeps the registration


def test_each_expiry_is_reported_once(cluster):
    cluster.unfenced(1)
    cluster.advance(TIMEOUT + 1)
    assert cluster.fence_expired() == [1]
    assert cluster.fence_expired() == []
    cluster.advance(10 * TIMEOUT)
    assert cluster.fence_expired() == []


def test_heartbeats_keep_a_session_alive(cluster):
    epoch = cluster.unfenced(1)
    for _ in range(10):
        cluster.advance(2_000)  # broker.heartbeat.interval.ms
        cluster.heartbeat(1, epoch)
        assert cluster.fence_expired() == []
    cluster.advance(TIMEOUT)
    assert cluster.fence_expired() == []
    cluster.advance(1)
    assert cluster.fence_expired() == [1]


def test_a_fenced_broker_comes_back_with_a_heartbeat_and_can_expire_again(cluster):
    epoch = cluster.unfenced(1)
    cluster.advance(TIMEOUT + 1)
    assert cluster.fence_expired() == [1]
    assert cluster.heartbeat(1, epoch) == StateChange(FENCED, UNFENCED)  # it was only slow
    cluster.advance(TIMEOUT + 1)
    assert cluster.fence_expired() == [1]


def test_a_late_heartbeat_before_the_check_renews_the_session(cluster):
    epoch = cluster.unfenced(1)
    cluster.advance(TIMEOUT + 500)
    assert cluster.heartbeat(1, epoch) == StateChange(UNFENCED, UNFENCED)
    assert cluster.fence_expired() == []


def test_expiry_reports_silent_brokers_in_id_order_and_ignores_fenced_ones(cluster):
    epochs = {broker: cluster.unfenced(broker) for broker in (3, 1, 2)}
    cluster.register(4)  # never heartbeats: fenced from the start, nothing to do when it goes silent
    cluster.advance(TIMEOUT // 2)
    cluster.heartbeat(2, epochs[2])
    cluster.advance(TIMEOUT // 2 + 1)
    assert cluster.fence_expired() == [1, 3]
    assert cluster.sessions.brokers_in(FENCED) == [1, 3, 4]
    assert cluster.sessions.brokers_in(UNFENCED) == [2]


def test_a_broker_fenced_by_expiry_may_be_replaced_by_a_new_incarnation(cluster):
    cluster.unfenced(1, FIRST)
    cluster.advance(TIMEOUT + 1)
    assert cluster.fence_expired() == [1]
    epoch = cluster.register(1, SECOND)  # the process restarted
    assert cluster.heartbeat(1, epoch) == StateChange(FENCED, UNFENCED)


def test_a_broker_in_controlled_shutdown_expires_too(cluster):
    epoch = cluster.unfenced(1)
    change = cluster.heartbeat(1, epoch, want_shutdown=True, leads_partitions=leads(True))
    assert change.after is CONTROLLED_SHUTDOWN
    cluster.advance(TIMEOUT + 1)
    assert cluster.fence_expired() == [1]
    assert cluster.sessions.state(1) is FENCED


def test_the_clock_must_not_go_back(cluster):
    cluster.register(1)
    with pytest.raises(AssertionError):
        cluster.sessions.fence_expired(cluster.now_ms - 1)


# ------------------------------------------------------------------------------------------- shutdown

# (case, state before, want_fence, want_shutdown, leads partitions (None: must not be asked), state after)
TRANSITIONS = [
    ("fenced, wants shutdown", FENCED, False, True, None, SHUTDOWN_NOW),
    ("fenced, wants fence and shutdown", FENCED, True, True, None, SHUTDOWN_NOW),
    ("fenced, wants fence", FENCED, True, False, None, FENCED),
    ("fenced, ready", FENCED, False, False, None, UNFENCED),
    ("unfenced, nothing asked", UNFENCED, False, False, None, UNFENCED),
    ("unfenced, wants fence", UNFENCED, True, False, None, FENCED),
    ("unfenced, wants fence and shutdown", UNFENCED, True, True, None, SHUTDOWN_NOW),
    ("unfenced, wants shutdown, leads", UNFENCED, False, True, True, CONTROLLED_SHUTDOWN),
    ("unfenced, wants shutdown, leads nothing", UNFENCED, False, True, False, SHUTDOWN_NOW),
    ("controlled shutdown, still leads", CONTROLLED_SHUTDOWN, False, True, True, CONTROLLED_SHUTDOWN),
    ("controlled shutdown, leads nothing", CONTROLLED_SHUTDOWN, False, True, False, SHUTDOWN_NOW),
    ("controlled shutdown cannot be taken back", CONTROLLED_SHUTDOWN, False, False, True,
     CONTROLLED_SHUTDOWN),
    ("controlled shutdown ignores want_fence", CONTROLLED_SHUTDOWN, True, False, False, SHUTDOWN_NOW),
]


def broker_in(cluster: Cluster, state: BrokerState) -> int:
    epoch = cluster.register(1)
    if state is not FENCED:
        cluster.heartbeat(1, epoch)
    if state is CONTROLLED_SHUTDOWN:
        cluster.heartbeat(1, epoch, want_shutdown=True, leads_partitions=leads(True))
    assert cluster.sessions.state(1) is state
    return epoch


@pytest.mark.parametrize(("before", "want_fence", "want_shutdown", "leading", "after"),
                         [c[1:] for c in TRANSITIONS], ids=[c[0] for c in TRANSITIONS])
def test_heartbeat_transitions(cluster, before, want_fence, want_shutdown, leading, after):
    epoch = broker_in(cluster, before)
    leads_partitions = never_asked if leading is None else leads(leading)
    change = cluster.heartbeat(1, epoch, want_fence=want_fence, want_shutdown=want_shutdown,
                               leads_partitions=leads_partitions)
    assert change == StateChange(before, after)
    assert cluster.sessions.state(1) is (FENCED if after is SHUTDOWN_NOW else after)


def test_controlled_shutdown_ends_once_leaderships_moved(cluster):
    epoch = cluster.unfenced(1)
    leaderships = {"t-0", "t-1"}

    def leads_partitions() -> bool:
        return bool(leaderships)

    def shutdown_heartbeat() -> StateChange:
        return cluster.heartbeat(1, epoch, want_shutdown=True, leads_partitions=leads_partitions)

    assert shutdown_heartbeat() == StateChange(UNFENCED, CONTROLLED_SHUTDOWN)
    assert cluster.sessions.brokers_in(CONTROLLED_SHUTDOWN) == [1]
    leaderships.discard("t-0")  # the controller moves them one by one (controlled_shutdown_leader)
    assert shutdown_heartbeat() == StateChange(CONTROLLED_SHUTDOWN, CONTROLLED_SHUTDOWN)
    leaderships.clear()
    assert shutdown_heartbeat() == StateChange(CONTROLLED_SHUTDOWN, SHUTDOWN_NOW)
    assert cluster.sessions.state(1) is FENCED
    # Told SHUTDOWN_NOW, the broker has left: it is not reported as silent later.
    cluster.advance(TIMEOUT + 1)
    assert cluster.fence_expired() == []


def test_a_broker_told_to_shut_down_may_restart_at_once(cluster):
    epoch = cluster.unfenced(1, FIRST)
    change = cluster.heartbeat(1, epoch, want_shutdown=True, leads_partitions=leads(False))
    assert change.after is SHUTDOWN_NOW
    new = cluster.register(1, SECOND)  # no waiting out the old session (KAFKA-19047)
    assert cluster.heartbeat(1, new) == StateChange(FENCED, UNFENCED)


def test_a_broker_in_controlled_shutdown_may_be_replaced_at_once(cluster):
    epoch = cluster.unfenced(1, FIRST)
    cluster.heartbeat(1, epoch, want_shutdown=True, leads_partitions=leads(True))
    assert cluster.sessions.register(1, SECOND, cluster.next_epoch, cluster.now_ms) is CONTROLLED_SHUTDOWN
    assert cluster.sessions.state(1) is FENCED
    with pytest.raises(StaleBrokerEpoch):
        cluster.heartbeat(1, epoch)


def test_a_repeated_shutdown_heartbeat_is_answered_again(cluster):
    # The SHUTDOWN_NOW response was lost and the broker asks again with the same epoch.
    epoch = cluster.unfenced(1)
    cluster.heartbeat(1, epoch, want_shutdown=True, leads_partitions=leads(False))
    assert cluster.heartbeat(1, epoch, want_shutdown=True) == StateChange(FENCED, SHUTDOWN_NOW)


def test_brokers_in_states(cluster):
    cluster.register(1)
    cluster.unfenced(2)
    epoch = cluster.unfenced(3)
    cluster.heartbeat(3, epoch, want_shutdown=True, leads_partitions=leads(True))
    assert cluster.sessions.brokers_in(UNFENCED, CONTROLLED_SHUTDOWN) == [2, 3]  # may still lead
    assert cluster.sessions.brokers_in(CONTROLLED_SHUTDOWN) == [3]
    assert cluster.sessions.brokers_in(FENCED) == [1]


def test_a_restored_unfenced_broker_gets_a_full_session_from_the_restart():
    sessions = BrokerSessions()
    sessions.restore(1, FIRST, 7, fenced=False, now_ms=50_000)
    with pytest.raises(DuplicateBrokerRegistration):
        sessions.register(1, SECOND, 8, 50_000 + TIMEOUT)  # still alive at exactly the timeout
    assert sessions.fence_expired(50_000 + TIMEOUT) == []
    assert sessions.fence_expired(50_001 + TIMEOUT) == [1]


def test_a_restored_fenced_broker_may_register_a_new_process_at_once():
    sessions = BrokerSessions()
    sessions.restore(1, FIRST, 7, fenced=True, now_ms=50_000)
    assert sessions.register(1, SECOND, 8, 50_000) is FENCED
    assert (sessions.state(1), sessions.broker_epoch(1)) == (FENCED, 8)


def test_a_fenced_broker_that_falls_silent_is_reported_once():
    sessions = BrokerSessions()
    sessions.register(1, FIRST, 7, 1_000)  # registered, never unfenced
    assert sessions.end_silent_fenced(1_000 + TIMEOUT) == []
    assert sessions.end_silent_fenced(1_001 + TIMEOUT) == [1]
    assert sessions.end_silent_fenced(2_000 + TIMEOUT) == []
    assert sessions.register(1, SECOND, 8, 2_000 + TIMEOUT) is FENCED  # its id is free for a new process


def test_restarted_clocks_give_every_live_session_a_full_timeout_from_then(cluster):
    cluster.unfenced(1)
    cluster.unfenced(2)
    cluster.advance(TIMEOUT + 1)  # both silent past the timeout: the controller itself was stalled
    cluster.sessions.restart_clocks(cluster.now_ms)
    assert cluster.fence_expired() == []
    cluster.advance(TIMEOUT)
    assert cluster.fence_expired() == []  # alive until exactly a full timeout after the restart
    cluster.advance(1)
    assert cluster.fence_expired() == [1, 2]  # really silent: fenced one timeout later than without a stall


def test_restarted_clocks_leave_fenced_brokers_fenced(cluster):
    cluster.register(1)
    cluster.sessions.restart_clocks(cluster.now_ms)
    assert cluster.sessions.state(1) is FENCED
