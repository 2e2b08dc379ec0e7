"""What happens to partitions when a broker leaves (fenced, or shutting down) or comes back.

Pure functions from registrations and broker eligibility to new registrations, as KRaft's
ReplicationControlManager.generateLeaderAndIsrUpdates does it (kafka-replication-facts.md, section 10):
- A broker that leaves is removed from every ISR. If it was the last member, the ISR keeps it and the
  partition goes leaderless (NO_LEADER): that replica is the only one known to hold every committed record,
  so it must be the one to lead again unless the topic allows unclean election.
- A partition it led gets a new leader from the offline selector (seed 000/001): the first replica in
  assignment order that is eligible and in the ISR; unclean only if unclean.leader.election.enable.
- When a broker becomes eligible again, every leaderless partition tries the same selector.
- Periodically, leadership goes back to preferred replicas where it drifted too far (auto leader rebalance).
Eligible means registered, unfenced and not in controlled shutdown (ClusterMetadata.is_eligible), and, per
partition, not an offline replica: one in a log dir its broker reported failed (KIP-112/KIP-858), given by
`offline(partition)`. Such a replica is treated as if its broker had left, for that partition only.
"""

from collections.abc import Callable, Collection, Iterable

from .registry import NO_LEADER, LeaderRecoveryState, PartitionRegistration, change_isr, elect_leader
from .selectors import Elected, offline_leader, preferred_leader

OfflineReplicas = Callable[[PartitionRegistration], Collection[int]]


def no_offline_replicas(partition: PartitionRegistration) -> Collection[int]:
    return ()


def _eligible_for(partition: PartitionRegistration, eligible: Collection[int],
                  offline: OfflineReplicas) -> Collection[int]:
    offline_here = offline(partition)
    return [b for b in eligible if b not in offline_here] if offline_here else eligible


def without_broker(partitions: Iterable[PartitionRegistration], broker_id: int, eligible: Collection[int],
                   unclean_allowed: Callable[[str], bool],
                   offline: OfflineReplicas = no_offline_replicas) -> list[PartitionRegistration]:
    """The changed registrations after `broker_id` leaves: out of every ISR, its leaderships moved.

    `eligible` must not contain broker_id. unclean_allowed(topic) says whether the topic may elect a
    leader outside the ISR.
    """
    assert broker_id not in eligible
    changes = []
    for current in partitions:
        if broker_id not in current.isr and current.leader != broker_id:
            continue
        remaining = tuple(r for r in current.isr if r != broker_id)
        if current.leader == broker_id:
            changed = _elect_or_go_offline(current, remaining or current.isr,
                                           _eligible_for(current, eligible, offline), unclean_allowed(current.topic))
        elif not remaining:  # the last member of a leaderless partition's ISR stays in it
            continue
        else:
            changed = change_isr(current, remaining)
        if changed is not current:
            changes.append(changed)
    return changes


def elect_offline_partitions(partitions: Iterable[PartitionRegistration], eligible: Collection[int],
                             unclean_allowed: Callable[[str], bool],
                             offline: OfflineReplicas = no_offline_replicas) -> list[PartitionRegistration]:
    """New leaders for leaderless partitions that now have an eligible replica to lead."""
    changes = []
    for current in partitions:
        if current.has_leader:
            continue
        changed = _elect_or_go_offline(current, current.isr, _eligible_for(current, eligible, offline),
                                       unclean_allowed(current.topic))
        if changed is not current:
            changes.append(changed)
    return changes


def _elect_or_go_offline(current: PartitionRegistration, isr: tuple[int, ...], eligible: Collection[int],
                         unclean_allowed: bool) -> PartitionRegistration:
    """`current` with the offline selector's leader, or leaderless keeping `isr`; `current` if unchanged."""
    choice = offline_leader(current.replicas, isr, eligible, unclean_election_enabled=unclean_allowed)
    if isinstance(choice, Elected):
        # KIP-704: a leader from outside the ISR may lack acknowledged records until it has recovered.
        recovery = LeaderRecoveryState.RECOVERING if choice.unclean else None
        return elect_leader(current, choice.leader, choice.isr, leader_recovery_state=recovery)
    if not current.has_leader and current.isr == isr:
        return current
    return elect_leader(current, NO_LEADER, isr)


def preferred_leader_elections(partitions: Iterable[PartitionRegistration], eligible: Collection[int],
                               imbalance_percentage: int,
                               offline: OfflineReplicas = no_offline_replicas) -> list[PartitionRegistration]:
    """Leadership handed back to preferred replicas (Kafka's auto leader rebalance).

    Per broker, among the partitions whose preferred (first) replica it is: if the share it does not lead
    exceeds leader.imbalance.per.broker.percentage, each of them whose preferred replica is eligible and in
    the ISR gets it as leader again (the preferred selector; the ISR is unchanged). Without this, a broker
    that restarted after a failure would lead nothing until some other broker failed.
    """
    assert 0 <= imbalance_percentage <= 100
    by_preferred: dict[int, list[PartitionRegistration]] = {}
    for p in partitions:
        by_preferred.setdefault(p.preferred_leader, []).append(p)
    changes = []
    for broker_id, preferred_here in sorted(by_preferred.items()):
        not_led = [p for p in preferred_here if p.leader != broker_id]
        if broker_id not in eligible or len(not_led) * 100 <= imbalance_percentage * len(preferred_here):
            continue
        for current in not_led:
            choice = preferred_leader(current.replicas, current.isr, _eligible_for(current, eligible, offline),
                                      current_leader=current.leader)
            if isinstance(choice, Elected):
                changes.append(elect_leader(current, choice.leader, choice.isr))
    return changes
