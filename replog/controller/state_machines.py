"""The controller's partition and replica state machines: which state each partition and each replica is
in, and which moves between states are legal.

Seed 000 (section 1.1 and 1.3) describes both machines as Kafka's ZooKeeper-era controller had them
(PartitionStateMachine.scala, ReplicaStateMachine.scala). The tables below are each state's valid previous
states, in Kafka's own form (`validPreviousStates`). They follow the seed, plus what Kafka added after the
version the seed describes (checked against Kafka 2.x+ sources):
- Offline -> Offline is legal for partitions and replicas: a second broker failure may hit a partition
  that is already offline, and marking it offline again must not fail the whole batch (the seed's
  "NewPartition,OnlinePartition -> OfflinePartition" predates this).
- The three deletion states, which the seed names in its topic-deletion steps (2.2-2.4) but gives no
  table for: Offline -> DeletionStarted -> DeletionSuccessful -> NonExistent, with DeletionIneligible
  for a replica that cannot be deleted now (its broker is down, or the StopReplica failed), from which
  it may come back Online or Offline and be retried.

Only the bookkeeping is here. What a transition does (elect a leader, send LeaderAndIsr or StopReplica)
is the controller's business: `transition` returns every key's previous state so the caller can pick the
action, as Kafka's doHandleStateChanges does (New -> Online initializes leader and ISR, Offline/Online ->
Online runs a leader selector).
"""

import enum
from collections.abc import Collection, Hashable, Iterable, Mapping
from typing import Generic, NamedTuple, TypeVar

from replog.log.partition_log import TopicPartition

from .registry import PartitionRegistration


class PartitionState(enum.Enum):
    NON_EXISTENT = "NonExistentPartition"  # never created, or deleted
    NEW = "NewPartition"  # replicas assigned, no leader or ISR yet
    ONLINE = "OnlinePartition"  # a leader was elected
    OFFLINE = "OfflinePartition"  # the elected leader died


class ReplicaState(enum.Enum):
    NEW = "NewReplica"  # created by topic creation or reassignment; may only be a follower
    ONLINE = "OnlineReplica"  # started; may lead or follow
    OFFLINE = "OfflineReplica"  # its broker died
    DELETION_STARTED = "ReplicaDeletionStarted"  # StopReplica(delete) sent
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"  # the broker deleted it
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"  # deletion failed or cannot start; retried later
    NON_EXISTENT = "NonExistentReplica"  # deleted


_P, _R = PartitionState, ReplicaState

VALID_PREVIOUS_PARTITION_STATES: Mapping[PartitionState, frozenset[PartitionState]] = {
    _P.NEW: frozenset({_P.NON_EXISTENT}),
    _P.ONLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
    _P.OFFLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
    _P.NON_EXISTENT: frozenset({_P.OFFLINE}),
}

VALID_PREVIOUS_REPLICA_STATES: Mapping[ReplicaState, frozenset[ReplicaState]] = {
    _R.NEW: frozenset({_R.NON_EXISTENT}),
    _R.ONLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.OFFLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.DELETION_STARTED: frozenset({_R.OFFLINE}),
    _R.DELETION_SUCCESSFUL: frozenset({_R.DELETION_STARTED}),
    _R.DELETION_INELIGIBLE: frozenset({_R.OFFLINE, _R.DELETION_STARTED}),
    _R.NON_EXISTENT: frozenset({_R.DELETION_SUCCESSFUL}),
}


class PartitionReplica(NamedTuple):
    """One replica of one partition: the replica state machine's key (Kafka's PartitionAndReplica)."""

    partition: TopicPartition
    replica: int  # broker id


class IllegalStateTransition(Exception):
    """A transition the tables forbid: a controller bug, like Kafka's IllegalStateException here."""

    def __init__(self, key: Hashable, current: enum.Enum, target: enum.Enum) -> None:
        super().__init__(f"{key}: illegal transition {current.value} -> {target.value}")
        self.key = key
        self.current = current
        self.target = target


K = TypeVar("K", bound=Hashable)
S = TypeVar("S", bound=enum.Enum)


class StateMachine(Generic[K, S]):
    """The state of every key, moved only along the valid-previous-state table.

    A key not yet seen is in the `absent` state (NonExistent), and a key moved back to it is forgotten,
    so the map holds only partitions and replicas that exist (Kafka removes replica states the same way).
    """

    def __init__(self, valid_previous: Mapping[S, frozenset[S]], absent: S) -> None:
        assert set(valid_previous) == set(type(absent)), "every state needs a row in the table"
        assert absent not in valid_previous[absent], "an absent key cannot become absent: it has no entry"
        self._valid_previous = valid_previous
        self._absent = absent
        self._states: dict[K, S] = {}

    def state(self, key: K) -> S:
        return self._states.get(key, self._absent)

    def is_valid_transition(self, current: S, target: S) -> bool:
        return current in self._valid_previous[target]

    def transition(self, keys: Iterable[K], target: S) -> dict[K, S]:
        """Move every key to `target`; returns each key's previous state, in the order given.

        All or nothing: if any key may not move, IllegalStateTransition names the first such key and no
        key moves, so the caller never has to undo half a batch. A key given twice moves once.
        """
        previous = {key: self.state(key) for key in keys}
        for key, current in previous.items():
            if not self.is_valid_transition(current, target):
                raise IllegalStateTransition(key, current, target)
        for key in previous:
            if target is self._absent:
                del self._states[key]
            else:
                self._states[key] = target
        return previous

    def keys_in(self, state: S) -> list[K]:
        assert state is not self._absent, "absent keys are not tracked"
        return [key for key, current in self._states.items() if current is state]

    def __len__(self) -> int:
        return len(self._states)


class PartitionStateMachine(StateMachine[TopicPartition, PartitionState]):
    def __init__(self) -> None:
        super().__init__(VALID_PREVIOUS_PARTITION_STATES, PartitionState.NON_EXISTENT)


class ReplicaStateMachine(StateMachine[PartitionReplica, ReplicaState]):
    def __init__(self) -> None:
        super().__init__(VALID_PREVIOUS_REPLICA_STATES, ReplicaState.NON_EXISTENT)


class ClusterStates:
    """The controller's two machines, moved by the events that change partitions and replicas.

    The controller calls these as it commits each change, so an illegal move (a controller bug) raises
    IllegalStateTransition at the step that made it rather than leaving a silent inconsistency.
    """

    def __init__(self) -> None:
        self.partitions = PartitionStateMachine()
        self.replicas = ReplicaStateMachine()

    def topic_created(self, partitions: Iterable[PartitionRegistration], live: Collection[int]) -> None:
        """New -> Online (or Offline without a leader) for each partition; New -> Online or Offline for each
        replica, by whether its broker is live."""
        partitions = list(partitions)
        self.partitions.transition([_key(p) for p in partitions], PartitionState.NEW)
        self.replicas.transition([r for p in partitions for r in _replicas(p)], ReplicaState.NEW)
        self.partitions_changed(partitions)
        for p in partitions:
            for key in _replicas(p):
                self.replicas.transition([key], ReplicaState.ONLINE if key.replica in live else ReplicaState.OFFLINE)

    def partitions_changed(self, partitions: Iterable[PartitionRegistration]) -> None:
        """A partition with a leader is Online, one without is Offline."""
        for p in partitions:
            self.partitions.transition([_key(p)], PartitionState.ONLINE if p.has_leader else PartitionState.OFFLINE)

    def broker_changed(self, broker_id: int, partitions: Iterable[PartitionRegistration], *, live: bool) -> None:
        """The broker's replicas go Online (unfenced) or Offline (fenced)."""
        keys = [PartitionReplica(_key(p), broker_id) for p in partitions if broker_id in p.replicas]
        self.replicas.transition(keys, ReplicaState.ONLINE if live else ReplicaState.OFFLINE)

    def topic_deletion_started(self, partitions: Iterable[PartitionRegistration]) -> None:
        """Seed 000, 2.2: partitions Offline; replicas Offline, then DeletionStarted (StopReplica sent)."""
        partitions = list(partitions)
        self.partitions.transition([_key(p) for p in partitions], PartitionState.OFFLINE)
        replicas = [r for p in partitions for r in _replicas(p)]
        self.replicas.transition(replicas, ReplicaState.OFFLINE)
        self.replicas.transition(replicas, ReplicaState.DELETION_STARTED)

    def topic_deletion_finished(self, partitions: Iterable[PartitionRegistration], failed_brokers: Collection[int]) -> None:
        """Replicas whose broker deleted them go DeletionSuccessful -> NonExistent; the others are
        DeletionIneligible. The partitions are gone (NonExistent) either way: the topic name is free."""
        partitions = list(partitions)
        replicas = [r for p in partitions for r in _replicas(p)]
        deleted = [r for r in replicas if r.replica not in failed_brokers]
        self.replicas.transition(deleted, ReplicaState.DELETION_SUCCESSFUL)
        self.replicas.transition(deleted, ReplicaState.NON_EXISTENT)
        self.replicas.transition([r for r in replicas if r.replica in failed_brokers], ReplicaState.DELETION_INELIGIBLE)
        self.partitions.transition([_key(p) for p in partitions], PartitionState.NON_EXISTENT)

    def replicas_added(self, partition: PartitionRegistration, brokers: Iterable[int], live: Collection[int]) -> None:
        """A reassignment adds replicas (seed 000's reassignment step 4): NewReplica, then Online or Offline by
        their broker. A replica whose earlier deletion failed (DeletionIneligible) comes back directly."""
        for broker_id in brokers:
            key = PartitionReplica(_key(partition), broker_id)
            if self.replicas.state(key) is ReplicaState.NON_EXISTENT:
                self.replicas.transition([key], ReplicaState.NEW)
            self.replicas.transition([key], ReplicaState.ONLINE if broker_id in live else ReplicaState.OFFLINE)

    def replicas_removal_started(self, partition: PartitionRegistration, brokers: Iterable[int]) -> None:
        """Reassignment steps 8-10: replicas leaving the assignment go Offline, then DeletionStarted as they
        are sent StopReplica with delete."""
        keys = [PartitionReplica(_key(partition), b) for b in brokers]
        self.replicas.transition(keys, ReplicaState.OFFLINE)
        self.replicas.transition(keys, ReplicaState.DELETION_STARTED)

    def replicas_removal_finished(self, partition: TopicPartition, deleted: Iterable[int],
                                  failed: Iterable[int]) -> None:
        """The brokers answered: NonExistent for those that deleted, DeletionIneligible for the others. A
        replica added back meanwhile (a newer reassignment) is left as it is now."""
        def started(brokers: Iterable[int]) -> list[PartitionReplica]:
            keys = [PartitionReplica(partition, b) for b in brokers]
            return [k for k in keys if self.replicas.state(k) is ReplicaState.DELETION_STARTED]

        done = started(deleted)
        self.replicas.transition(done, ReplicaState.DELETION_SUCCESSFUL)
        self.replicas.transition(done, ReplicaState.NON_EXISTENT)
        self.replicas.transition(started(failed), ReplicaState.DELETION_INELIGIBLE)


def _key(p: PartitionRegistration) -> TopicPartition:
    return TopicPartition(p.topic, p.partition)


def _replicas(p: PartitionRegistration) -> list[PartitionReplica]:
    return [PartitionReplica(_key(p), replica) for replica in p.replicas]
