"""Broker sessions on the controller: registration, heartbeats, fencing on silence, the shutdown handshake.

KRaft replaced seed 003's ZooKeeper ephemeral node with a session the broker keeps alive by heartbeating
(kafka-replication-facts.md, section 10; Kafka's ClusterControlManager.registerBroker,
BrokerHeartbeatManager.calculateNextBrokerState and BrokerHeartbeatTracker):
- A registration gets a new broker epoch, which every later heartbeat must carry; KRaft uses the offset
  of the RegisterBrokerRecord, so the caller supplies it and this class checks that it only grows.
- A registered broker starts FENCED: it may not lead or join an ISR until a heartbeat unfences it.
- A broker silent for longer than broker.session.timeout.ms (lastContact + timeout < now) is fenced.
- A broker that wants to stop still leading partitions goes through CONTROLLED_SHUTDOWN, in which the
  controller moves its leaderships away, and is told SHUTDOWN_NOW once it leads nothing.

Two simplifications, both because there is no metadata log yet:
- Kafka unfences a broker once its metadata offset has reached its registration record. Here the broker's
  own want_fence flag is the readiness signal (Kafka's brokers send want_fence while not caught up), so
  a broker is unfenced by its first heartbeat without want_fence.
- Kafka finishes a controlled shutdown only once every active broker has replayed the records that moved
  the leaderships away (lowestActiveOffset); here, as soon as the broker leads nothing.

Times are milliseconds from the caller's monotonic clock; nothing here reads a clock or sleeps.
"""

import enum
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from .cluster import MAX_BROKERS, ControllerError

BROKER_SESSION_TIMEOUT_MS = 9_000  # broker.session.timeout.ms; brokers heartbeat every 2_000 ms



@dataclass(frozen=True, slots=True)
class HeartbeatAnswer:
    """What a BrokerHeartbeat response tells the broker."""

    is_fenced: bool
    should_shut_down: bool


class BrokerState(enum.Enum):
    """Kafka's BrokerControlState. SHUTDOWN_NOW is only ever an answer: the broker is fenced after it."""

    FENCED = "FENCED"
    UNFENCED = "UNFENCED"
    CONTROLLED_SHUTDOWN = "CONTROLLED_SHUTDOWN"
    SHUTDOWN_NOW = "SHUTDOWN_NOW"


@dataclass(frozen=True, slots=True)
class StateChange:
    """A heartbeat's effect (Kafka's BrokerControlStates). The controller acts on the edges: FENCED ->
    UNFENCED makes the broker eligible again; UNFENCED -> CONTROLLED_SHUTDOWN means moving its leaderships
    away; UNFENCED -> FENCED and any -> SHUTDOWN_NOW mean removing it from ISRs and re-electing leaders."""

    before: BrokerState
    after: BrokerState


class DuplicateBrokerRegistration(ControllerError):
    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.duplicate_broker_registration, message)


class StaleBrokerEpoch(ControllerError):
    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.stale_broker_epoch, message)


@dataclass(slots=True)
class _Session:
    incarnation_id: uuid.UUID  # a new one each time the broker process starts
    broker_epoch: int
    state: BrokerState  # never SHUTDOWN_NOW
    last_contact_ms: int | None  # None once the broker was told SHUTDOWN_NOW: it has left


class BrokerSessions:
    """Every registered broker's epoch, state and last contact."""

    def __init__(self, session_timeout_ms: int = BROKER_SESSION_TIMEOUT_MS) -> None:
        assert session_timeout_ms > 0
        self.session_timeout_ms = session_timeout_ms
        self._sessions: dict[int, _Session] = {}
        self._last_broker_epoch = -1
        self._last_now_ms: int | None = None

    # -------------------------------------------------------------------------------------- requests

    def register(self, broker_id: int, incarnation_id: uuid.UUID, broker_epoch: int,
                 now_ms: int) -> BrokerState | None:
        """Start a session for a new registration with `broker_epoch`, FENCED; the old epoch goes stale.
        Returns the state of the registration this one replaces (None if there was none): if it was not
        FENCED, the broker has just been fenced and the controller must act as for any fencing.

        Another process (a different incarnation) may take over a broker id only once the old session has
        expired, which keeps two brokers with one id from replacing each other. The same incarnation
        registering again is a retry and is accepted. A broker that is shutting down (controlled shutdown,
        or told SHUTDOWN_NOW) may be replaced at once, so a clean restart need not wait out its own session
        (KAFKA-19047).
        """
        assert broker_id >= 0
        assert broker_epoch > self._last_broker_epoch, "broker epochs are record offsets: they only grow"
        self._advance_clock(now_ms)
        existing = self._sessions.get(broker_id)
        if existing is None and len(self._sessions) >= MAX_BROKERS:
            raise ControllerError(ErrorCode.invalid_request, f"more than {MAX_BROKERS} brokers")
        if (existing is not None and existing.incarnation_id != incarnation_id
                and existing.state is not BrokerState.CONTROLLED_SHUTDOWN
                and self._is_alive(existing, now_ms)):
            raise DuplicateBrokerRegistration(
                f"broker {broker_id} is registered by incarnation {existing.incarnation_id}, whose session "
                f"is alive")
        self._sessions[broker_id] = _Session(incarnation_id, broker_epoch, BrokerState.FENCED, now_ms)
        self._last_broker_epoch = broker_epoch
        return None if existing is None else existing.state

    def heartbeat(self, broker_id: int, broker_epoch: int, now_ms: int, *,
                  leads_partitions: Callable[[], bool], want_fence: bool = False,
                  want_shutdown: bool = False) -> StateChange:
        """Renew the session and move the broker along Kafka's calculateNextBrokerState.

        leads_partitions() says whether the broker still leads a partition; it is asked only when the
        answer matters (a shutdown request or a controlled shutdown in progress).
        """
        self._advance_clock(now_ms)
        session = self._sessions.get(broker_id)
        if session is None:
            raise StaleBrokerEpoch(f"broker {broker_id} is not registered")
        if session.broker_epoch != broker_epoch:
            raise StaleBrokerEpoch(f"broker {broker_id} has epoch {session.broker_epoch}, not {broker_epoch}")
        # A heartbeat renews the session even past its deadline if fence_expired has not run yet: the
        # broker is alive, as in Kafka, where the periodic fencing check decides.
        session.last_contact_ms = now_ms
        change = StateChange(session.state, _next_state(session.state, want_fence, want_shutdown,
                                                        leads_partitions))
        if change.after is BrokerState.SHUTDOWN_NOW:
            session.state = BrokerState.FENCED
            session.last_contact_ms = None  # the broker has left: its id is free for the next process
        else:
            session.state = change.after
        return change

    def restore(self, broker_id: int, incarnation_id: uuid.UUID, broker_epoch: int, *, fenced: bool,
                now_ms: int) -> None:
        """The session of a broker registered before this controller started (replayed from the metadata
        log). An unfenced broker gets a full session timeout from now to show it is alive, as the brokers
        get from a newly active Kafka controller: its silence while no controller ran proves nothing."""
        assert broker_id not in self._sessions, broker_id
        self._advance_clock(now_ms)
        # A fenced broker's session ended before the restart (silence or shutdown): its id is free at once
        # for its next process, as it was before.
        state, last_contact_ms = (BrokerState.FENCED, None) if fenced else (BrokerState.UNFENCED, now_ms)
        self._sessions[broker_id] = _Session(incarnation_id, broker_epoch, state, last_contact_ms)
        self._last_broker_epoch = max(self._last_broker_epoch, broker_epoch)

    # ---------------------------------------------------------------------------------------- timers

    def fence_expired(self, now_ms: int) -> list[int]:
        """Fence every unfenced broker (or one in controlled shutdown) whose session has expired, and
        return their ids, ascending. Each expiry is reported once: the broker is fenced from then on,
        until a heartbeat unfences it. A fenced broker leads nothing and is in no ISR, so its silence
        needs no action and is not reported."""
        self._advance_clock(now_ms)
        expired = []
        for broker_id, session in sorted(self._sessions.items()):
            if session.state is BrokerState.FENCED:
                continue
            assert session.last_contact_ms is not None, (broker_id, session)  # unfencing took a heartbeat
            if not self._is_alive(session, now_ms):
                session.state = BrokerState.FENCED
                expired.append(broker_id)
        return expired

    def end_silent_fenced(self, now_ms: int) -> list[int]:
        """End the sessions of fenced brokers that went silent (say, died between registering and being
        unfenced) and return their ids, ascending, once each: such a broker leads nothing and is in no ISR,
        but the controller must stop sending it requests nobody will answer."""
        self._advance_clock(now_ms)
        silent = []
        for broker_id, session in sorted(self._sessions.items()):
            if session.state is BrokerState.FENCED and session.last_contact_ms is not None \
                    and not self._is_alive(session, now_ms):
                session.last_contact_ms = None
                silent.append(broker_id)
        return silent

    def restart_clocks(self, now_ms: int) -> None:
        """Give every live session a full timeout from now, as a newly active controller does: after the
        controller itself stalled, the heartbeats waiting in its sockets are not yet read, so silence seen
        across the stall proves nothing."""
        self._advance_clock(now_ms)
        for session in self._sessions.values():
            if session.state is not BrokerState.FENCED and session.last_contact_ms is not None:
                session.last_contact_ms = max(session.last_contact_ms, now_ms)

    # --------------------------------------------------------------------------------------- queries

    def __contains__(self, broker_id: int) -> bool:
        return broker_id in self._sessions

    def state(self, broker_id: int) -> BrokerState:
        """The state of a registered broker (KeyError otherwise)."""
        return self._sessions[broker_id].state

    def broker_epoch(self, broker_id: int) -> int:
        """The epoch of a registered broker's current registration (KeyError otherwise)."""
        return self._sessions[broker_id].broker_epoch

    def last_contact_ms(self, broker_id: int) -> int | None:
        """When the broker last heartbeat or registered (or its session was restored), by the sessions' clock."""
        return self._sessions[broker_id].last_contact_ms

    def brokers_in(self, *states: BrokerState) -> list[int]:
        """The brokers in any of `states`, ascending. Leaders may be chosen among UNFENCED and
        CONTROLLED_SHUTDOWN brokers; the selectors exclude the latter where Kafka does."""
        assert BrokerState.SHUTDOWN_NOW not in states, "no broker stays in SHUTDOWN_NOW"
        return sorted(broker_id for broker_id, session in self._sessions.items() if session.state in states)

    # -------------------------------------------------------------------------------------- internals

    def _is_alive(self, session: _Session, now_ms: int) -> bool:
        # Kafka's BrokerHeartbeatTracker.isExpired: expired once lastContact + timeout < now, so a session
        # is still alive at exactly lastContact + timeout.
        last_contact_ms = session.last_contact_ms
        return last_contact_ms is not None and now_ms <= last_contact_ms + self.session_timeout_ms

    def _advance_clock(self, now_ms: int) -> None:
        assert self._last_now_ms is None or now_ms >= self._last_now_ms, "the clock must be monotonic"
        self._last_now_ms = now_ms


def _next_state(current: BrokerState, want_fence: bool, want_shutdown: bool,
                leads_partitions: Callable[[], bool]) -> BrokerState:
    """Kafka's BrokerHeartbeatManager.calculateNextBrokerState, less the metadata-offset checks."""
    if current is BrokerState.FENCED:
        if want_shutdown:
            return BrokerState.SHUTDOWN_NOW  # leads nothing, so nothing to hand over
        return BrokerState.FENCED if want_fence else BrokerState.UNFENCED
    if current is BrokerState.UNFENCED:
        if want_fence:  # a broker may ask to be fenced, e.g. when it cannot keep up with metadata
            return BrokerState.SHUTDOWN_NOW if want_shutdown else BrokerState.FENCED
        if want_shutdown:
            return BrokerState.CONTROLLED_SHUTDOWN if leads_partitions() else BrokerState.SHUTDOWN_NOW
        return BrokerState.UNFENCED
    assert current is BrokerState.CONTROLLED_SHUTDOWN, current
    # No way back: the broker has announced it is leaving, whatever its later flags say.
    return BrokerState.CONTROLLED_SHUTDOWN if leads_partitions() else BrokerState.SHUTDOWN_NOW
