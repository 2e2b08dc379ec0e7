"""The leader selectors: who leads a partition next, and with which ISR.

Pure functions of the partition's assignment, its ISR and the brokers' liveness; the controller applies
the result with registry.elect_leader, which bumps the leader and partition epochs.

The rules are Kafka's, from seed 000 section 1.1 (the four selectors and the ISR each one yields) and
seed 001 (the code of PartitionLeaderElectionAlgorithms, which picks the leader); the new ISR follows
PartitionStateMachine's leaderForOffline / leaderForReassign / leaderForPreferredReplica /
leaderForControlledShutdown (Kafka 2.x+), which wrap those functions. Every selector walks the replicas
in assignment order, so the preferred replica wins whenever it qualifies and ties never depend on the
order of a set.

"Live" is the caller's set of brokers that may lead: registered and unfenced. A broker in controlled
shutdown may be in it; only controlled_shutdown_leader looks at who is shutting down, as in Kafka.
"""

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from .registry import is_valid_isr, is_valid_replica_list


@dataclass(frozen=True, slots=True)
class Elected:
    leader: int
    isr: tuple[int, ...]
    # The leader was not in the ISR, so it may lack records the old leader acknowledged. The caller
    # counts it (Kafka's uncleanLeaderElectionRate) and marks the leader RECOVERING (KIP-704).
    unclean: bool = False

    def __post_init__(self) -> None:
        assert self.leader in self.isr, self  # DESIGN.md: the ISR always contains the leader
        assert is_valid_replica_list(self.isr), self
        assert not self.unclean or self.isr == (self.leader,), self


@dataclass(frozen=True, slots=True)
class NoLeaderAvailable:
    """No replica qualifies; the partition keeps (or, if offline, stays without) its leader."""

    reason: str


@dataclass(frozen=True, slots=True)
class ElectionNotNeeded:
    """The preferred replica already leads (Kafka answers ELECTION_NOT_NEEDED)."""

    leader: int


def initial_leader(assignment: Sequence[int], live: Collection[int]) -> Elected | NoLeaderAvailable:
    """NewPartition -> OnlinePartition (seed 000, 1.1): the first live replica leads, every live replica is
    in the ISR (Kafka's initializeLeaderAndIsrForPartitions)."""
    assert assignment and is_valid_replica_list(assignment), assignment
    live_replicas = tuple(r for r in assignment if r in live)
    if not live_replicas:
        return NoLeaderAvailable(f"no replica of {list(assignment)} is live")
    return Elected(live_replicas[0], live_replicas)


def offline_leader(assignment: Sequence[int], isr: Sequence[int], live: Collection[int], *,
                   unclean_election_enabled: bool) -> Elected | NoLeaderAvailable:
    """The leader died (OfflinePartitionLeaderSelector): the first live replica that is in the ISR leads,
    and the ISR keeps its live members. With none and unclean.leader.election.enable, the first live
    replica leads alone: availability bought with possible loss of acknowledged records."""
    assert assignment and is_valid_isr(assignment, isr), (assignment, isr)
    clean = _first(assignment, lambda r: r in live and r in isr)
    if clean is not None:
        return Elected(clean, tuple(r for r in isr if r in live))
    if not unclean_election_enabled:
        return NoLeaderAvailable(f"no live replica of {list(assignment)} is in the ISR {list(isr)}")
    unclean = _first(assignment, lambda r: r in live)
    if unclean is None:
        return NoLeaderAvailable(f"no replica of {list(assignment)} is live")
    return Elected(unclean, (unclean,), unclean=True)


def reassigned_leader(target_replicas: Sequence[int], isr: Sequence[int],
                      live: Collection[int]) -> Elected | NoLeaderAvailable:
    """Reassignment step 7 (ReassignedPartitionLeaderSelector): the first live replica of the target
    assignment that is in the ISR leads; the ISR is unchanged. Replicas leaving the assignment stay in
    the ISR until step 8 moves them offline (seed 000's table: 4/{1,2,3,4,5,6})."""
    assert target_replicas and is_valid_replica_list(target_replicas), target_replicas
    assert is_valid_replica_list(isr), isr
    leader = _first(target_replicas, lambda r: r in live and r in isr)
    if leader is None:
        return NoLeaderAvailable(f"no live replica of the target {list(target_replicas)} is in the ISR "
                                 f"{list(isr)}")
    return Elected(leader, tuple(isr))


def preferred_leader(assignment: Sequence[int], isr: Sequence[int], live: Collection[int], *,
                     current_leader: int) -> Elected | ElectionNotNeeded | NoLeaderAvailable:
    """Preferred replica election (PreferredReplicaPartitionLeaderSelector): the first replica of the
    assignment leads if it is live and in the ISR; the ISR is unchanged.

    The seed's function only picks; Kafka's callers skip a partition the preferred replica already leads
    (ELECTION_NOT_NEEDED, as the 0.8 selector's LeaderElectionNotNeededException did), and so does this.
    Availability is checked first, so a dead preferred leader is reported as not available.
    """
    assert assignment and is_valid_isr(assignment, isr), (assignment, isr)
    preferred = assignment[0]
    if preferred not in live or preferred not in isr:
        return NoLeaderAvailable(f"preferred replica {preferred} is not live and in the ISR {list(isr)}")
    if preferred == current_leader:
        return ElectionNotNeeded(preferred)
    return Elected(preferred, tuple(isr))


def controlled_shutdown_leader(assignment: Sequence[int], isr: Sequence[int], live: Collection[int],
                               shutting_down: Collection[int]) -> Elected | NoLeaderAvailable:
    """A broker asked to shut down (ControlledShutdownLeaderSelector): the first live replica in the ISR
    that is not shutting down leads, and the brokers shutting down leave the ISR."""
    assert assignment and is_valid_isr(assignment, isr), (assignment, isr)
    leader = _first(assignment, lambda r: r in live and r in isr and r not in shutting_down)
    if leader is None:
        return NoLeaderAvailable(f"no live member of the ISR {list(isr)} stays up")
    return Elected(leader, tuple(r for r in isr if r not in shutting_down))


def _first(replicas: Sequence[int], qualifies: Callable[[int], bool]) -> int | None:
    return next((r for r in replicas if qualifies(r)), None)
