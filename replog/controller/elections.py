"""ElectLeaders (KIP-460): preferred and unclean leader elections an administrator asks for.

decide_elections is pure: per requested partition, Kafka's answer (ReplicationControlManager.electLeaders)
and the new registrations. Preferred: the first replica leads if it is live and in the ISR, else
PREFERRED_LEADER_NOT_AVAILABLE; ELECTION_NOT_NEEDED when it already leads. Unclean: only a partition without
a leader is elected, first from the ISR, else any live replica (KIP-704 marks it RECOVERING);
ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica is live. Asked for every partition (a null list), the answer
leaves out the partitions that needed no election, as Kafka's does.
"""

import enum
from collections.abc import Collection, Sequence

from kio.schema.errors import ErrorCode

from .cluster import ClusterMetadata
from .registry import LeaderRecoveryState, PartitionRegistration, elect_leader
from .selectors import Elected, ElectionNotNeeded, offline_leader, preferred_leader


class ElectionType(enum.IntEnum):
    PREFERRED = 0
    UNCLEAN = 1


Answer = tuple[ErrorCode, str | None]


def decide_elections(metadata: ClusterMetadata, election_type: ElectionType,
                     requested: Sequence[tuple[str, int]] | None,
                     ) -> tuple[dict[tuple[str, int], Answer], list[PartitionRegistration]]:
    everything = requested is None
    if requested is None:
        requested = [(t.name, p) for t in metadata.topics.values() for p in sorted(t.partitions)]
    answers: dict[tuple[str, int], Answer] = {}
    changes = []
    active = metadata.active_broker_ids()
    for topic, index in requested:
        topic_registration = metadata.topics.get(topic)
        current = None if topic_registration is None else topic_registration.partitions.get(index)
        if current is None:
            answers[(topic, index)] = (ErrorCode.unknown_topic_or_partition, f"no partition {topic}-{index}")
            continue
        offline = metadata.offline_replicas_of(current)
        eligible = [b for b in active if b not in offline] if offline else active
        answer, changed = _elect(current, election_type, eligible)
        if changed is not None:
            changes.append(changed)
        if not (everything and answer[0] == ErrorCode.election_not_needed):
            answers[(topic, index)] = answer
    return answers, changes


def _elect(current: PartitionRegistration, election_type: ElectionType,
           eligible: Collection[int]) -> tuple[Answer, PartitionRegistration | None]:
    if election_type is ElectionType.PREFERRED:
        choice = preferred_leader(current.replicas, current.isr, eligible, current_leader=current.leader)
        if isinstance(choice, ElectionNotNeeded):
            return (ErrorCode.election_not_needed, "Leader election not needed for topic partition."), None
        if not isinstance(choice, Elected):
            return (ErrorCode.preferred_leader_not_available, choice.reason), None
        return (ErrorCode.none, None), elect_leader(current, choice.leader, choice.isr)
    if current.has_leader:
        return (ErrorCode.election_not_needed, "Leader election not needed for topic partition."), None
    choice = offline_leader(current.replicas, current.isr, eligible, unclean_election_enabled=True)
    if not isinstance(choice, Elected):
        return (ErrorCode.eligible_leaders_not_available, choice.reason), None
    recovery = LeaderRecoveryState.RECOVERING if choice.unclean else None
    return (ErrorCode.none, None), elect_leader(current, choice.leader, choice.isr, leader_recovery_state=recovery)
