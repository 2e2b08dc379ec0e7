"""A classic group's state: its members, generation, protocol, leader and state (Kafka's GroupMetadata /
ClassicGroup and MemberMetadata / ClassicGroupMember). Bookkeeping only; the rules that move a group
between states live in joining.py and liveness.py.

Sans-IO: where Kafka keeps a member's pending JoinGroup and SyncGroup as callbacks, a member here keeps the
id of the parked request (the shell's handle for it), and answers come out of the rules as values addressed
to that id. Timers are values too (outcomes.Timer); the group records the deadline of each live one, so a
timer that fires after it was superseded is recognised as stale and ignored.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from replog.coordinator.consumer_protocol import subscription_topics
from replog.protocol.primitives import DecodeError

CONSUMER_PROTOCOL_TYPE = "consumer"
MEMBER_ID_DELIMITER = "-"


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


S = GroupState
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    S.PREPARING_REBALANCE: frozenset({S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}),
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    S.DEAD: frozenset({S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD}),
    S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
}

Protocols = tuple[tuple[str, bytes], ...]  # (name, metadata) in the member's order of preference


class IllegalGroupTransition(AssertionError):
    """A transition Kafka's GroupState.validPreviousStates forbids: a bug in the rules, never bad input."""


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    join_request: int | None = None  # the parked JoinGroup awaiting the rebalance, if any
    sync_request: int | None = None  # the parked SyncGroup awaiting the assignment, if any
    is_new: bool = False  # joined in this rebalance; may time out while awaiting join
    heartbeat_deadline_ms: int | None = None  # the live session (or new-member join) expiry

    @property
    def awaiting_join(self) -> bool:
        return self.join_request is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_request is not None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise AssertionError(f"member {self.member_id} does not support protocol {protocol!r}")

    def matches(self, protocols: Protocols) -> bool:
        """Same protocols with the same metadata, in the same order (a rejoin that changes nothing)."""
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise AssertionError(f"member {self.member_id} supports none of {sorted(candidates)}")


@dataclass(slots=True)
class JoinTimer:
    """The live rebalance timer: Kafka's DelayedJoin, or its InitialDelayedJoin for a group leaving Empty."""

    deadline_ms: int
    initial: bool
    delay_ms: int = 0  # InitialDelayedJoin only: this round's delay and the time left after it
    remaining_ms: int = 0


@dataclass(slots=True)
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int = -1  # when the group entered its state (currentStateTimestamp)
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)  # insertion order: the next leader is the oldest
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    pending_members: dict[str, int] = field(default_factory=dict)  # KIP-394 member id -> expiry deadline
    pending_sync: set[str] = field(default_factory=set)
    new_member_added: bool = False  # a member joined during the initial delay: extend it
    join_timer: JoinTimer | None = None
    sync_deadline_ms: int | None = None
    subscribed_topics: frozenset[str] | None = None  # consumer groups only; None means unknown

    # ------------------------------------------------------------ questions

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    @property
    def is_consumer_group(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join == len(self.members) and not self.pending_members

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    def rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout among the members: how long a rebalance may wait for rejoins."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def supports_protocols(self, protocol_type: str, protocol_names: set[str]) -> bool:
        """Whether a member with these protocols may join: any protocols to start an Empty group, else the
        group's protocol type and at least one protocol every current member supports."""
        if self.is_(GroupState.EMPTY):
            return bool(protocol_type) and bool(protocol_names)
        if not self.members:
            # Rebalancing with only KIP-394 ids outstanding: as in Kafka, zero members support everything.
            return self.protocol_type == protocol_type and bool(protocol_names)
        return self.protocol_type == protocol_type and bool(protocol_names & self.candidate_protocols())

    def candidate_protocols(self) -> set[str]:
        """The protocols every member supports."""
        members = list(self.members.values())
        if not members:
            return set()
        common = {name for name, _ in members[0].protocols}
        for member in members[1:]:
            common &= {name for name, _ in member.protocols}
        return common

    def select_protocol(self) -> str:
        """Kafka's selectProtocol: each member votes for its preferred candidate; most votes wins.
        Kafka breaks ties by hash order; we break them by the first member's preference, deterministically."""
        assert self.members, "cannot select a protocol for an empty group"
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name])  # max keeps the first of equal counts

    def member_metadata_for_leader(self) -> tuple[tuple[str, str | None, bytes], ...]:
        """(member id, group instance id, metadata for the chosen protocol): what the leader assigns from."""
        assert self.state not in (GroupState.DEAD, GroupState.PREPARING_REBALANCE), self.state
        assert self.protocol_name is not None
        return tuple(
            (m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()
        )

    def current_member_error(self, member_id: str, group_instance_id: str | None) -> ErrorCode | None:
        """Kafka's validateCurrentMember: a static member's instance id must map to this member id (else
        FENCED_INSTANCE_ID, the request comes from a replaced instance), and the member must exist."""
        if group_instance_id is not None:
            current = self.static_members.get(group_instance_id)
            if current is None:
                return ErrorCode.unknown_member_id
            if current != member_id:
                return ErrorCode.fenced_instance_id
        if member_id not in self.members:
            return ErrorCode.unknown_member_id
        return None

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    # ------------------------------------------------------------- changes

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalGroupTransition(f"group {self.group_id}: {self.state.value} -> {state.value}")
        self.state = state
        self.state_timestamp_ms = now_ms

    def add(self, member: Member) -> None:
        if member.group_instance_id is not None:
            assert member.group_instance_id not in self.static_members, member.group_instance_id
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        assert self.protocol_type == member.protocol_type
        assert self.supports_protocols(member.protocol_type, {name for name, _ in member.protocols})
        assert member.member_id not in self.members, member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.pop(member_id, None)
        self.pending_sync.discard(member_id)
        return member

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str) -> Member:
        """KIP-345: a known group.instance.id rejoined with a new member id; the member keeps everything else.
        The caller answers any request the old id had parked with FENCED_INSTANCE_ID first."""
        member = self.members.pop(old_member_id)
        assert self.static_members[instance_id] == old_member_id
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        if old_member_id in self.pending_sync:  # the new incarnation owes the SyncGroup the old one did
            self.pending_sync.remove(old_member_id)
            self.pending_sync.add(new_member_id)
        self.static_members[instance_id] = new_member_id
        return member

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else promote any member that did; False if none did (or no leader)."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    def init_next_generation(self, now_ms: int) -> None:
        """Next generation: pick the protocol and go to CompletingRebalance, or to Empty if nobody is left."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.subscribed_topics = self.compute_subscribed_topics()
        self.pending_sync.clear()

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """The topics a consumer group's members subscribe to, from their metadata for the chosen protocol;
        None when not a consumer group, or not known (no protocol yet, or metadata that does not parse)."""
        if not self.is_consumer_group:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        try:
            return frozenset(
                topic
                for m in self.members.values()
                for topic in subscription_topics(m.metadata(self.protocol_name))
            )
        except DecodeError:
            return None

    def is_subscribed_to(self, topic: str) -> bool:
        """True when unknown, to be safe: OffsetDelete then refuses rather than deleting live offsets."""
        return self.subscribed_topics is None or topic in self.subscribed_topics
