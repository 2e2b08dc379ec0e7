"""A fake shell around the sans-IO GroupCoordinator for the group tests: a manual clock, request ids, timers
kept by key and fired in deadline order, and writes appended to an in-memory __consumer_offsets log (encoded
with records.py) and completed at once, or held back, or failed, as a test asks.

It checks what the real shell relies on: every request is answered exactly once.
"""

from __future__ import annotations

import itertools

from kio.schema.errors import ErrorCode

from replog.coordinator import records
from replog.coordinator.config import GroupCoordinatorConfig
from replog.coordinator.coordinator import GroupCoordinator
from replog.coordinator.offsets import CommitPartition, CommitRequest
from replog.coordinator.outcomes import (
    AppendTombstones,
    HeartbeatRequest,
    JoinRequest,
    LeaveRequest,
    LeavingMember,
    Outcome,
    Reply,
    StoreGroup,
    StoreOffsets,
    SyncRequest,
    Timer,
    Write,
)

GROUP = "g"
RANGE = (("range", b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"),)  # ConsumerProtocol v0: topic "t"
SESSION_MS = 10_000
REBALANCE_MS = 60_000


def config(**overrides) -> GroupCoordinatorConfig:
    return GroupCoordinatorConfig(**overrides)


class Shell:
    def __init__(self, cfg: GroupCoordinatorConfig | None = None, *, load: bool = True) -> None:
        self.coordinator = GroupCoordinator(cfg or config())
        self.now = 0
        self.timers: dict[tuple, Timer] = {}
        self.replies: dict[int, Reply] = {}
        self.log: list[tuple[bytes, bytes | None]] = []
        self.held: list[Write] = []
        self.hold_writes = False
        self.requests: list[int] = []  # every request id handed out, in order
        self._ids = itertools.count(1)
        self._uuids = itertools.count(1)
        if load:
            for partition in range(self.coordinator.config.offsets_topic_num_partitions):
                self.coordinator.begin_loading(partition)
                self.apply(self.coordinator.finish_loading(partition, [], self.now))

    @property
    def group(self):
        return self.coordinator.groups[GROUP]

    # ----------------------------------------------------------- the shell

    def apply(self, out: Outcome) -> None:
        for reply in out.replies:
            assert reply.request_id not in self.replies, f"request {reply.request_id} answered twice"
            self.replies[reply.request_id] = reply
        for timer in out.timers:
            self.timers[timer.key] = timer
        for write in out.writes:
            self._append(write)
            if self.hold_writes and not isinstance(write, AppendTombstones):
                self.held.append(write)
            else:
                self.complete(write)

    def _append(self, write: Write) -> None:
        if isinstance(write, StoreGroup):
            key = records.encode_key(records.GroupMetadataKey(write.group_id))
            self.log.append((key, records.encode_group_metadata_value(write.value)))
        elif isinstance(write, StoreOffsets):
            for topic, partition, o in write.offsets:
                key = records.encode_key(records.OffsetCommitKey(write.group_id, topic, partition))
                value = records.OffsetCommitValue(
                    o.offset,
                    o.metadata,
                    o.commit_timestamp_ms,
                    o.leader_epoch,
                    -1 if o.expire_timestamp_ms is None else o.expire_timestamp_ms,
                )
                self.log.append((key, records.encode_offset_commit_value(value)))
        else:
            self.log.extend((records.encode_key(key), None) for key in write.keys)

    def complete(self, write: Write, error: ErrorCode = ErrorCode.none) -> None:
        if not isinstance(write, AppendTombstones):
            self.apply(self.coordinator.on_written(write, error, self.now))

    def release(self, error: ErrorCode = ErrorCode.none) -> None:
        held, self.held = self.held, []
        for write in held:
            self.complete(write, error)

    def advance(self, ms: int) -> None:
        """Move the clock, firing due timers in deadline order at their deadlines."""
        target = self.now + ms
        while True:
            due = [t for t in self.timers.values() if t.deadline_ms <= target]
            if not due:
                break
            timer = min(due, key=lambda t: t.deadline_ms)
            del self.timers[timer.key]
            self.now = max(self.now, timer.deadline_ms)
            self.apply(self.coordinator.on_timer(timer, self.now))
        self.now = target

    def answered(self, request_id: int) -> Reply:
        return self.replies[request_id]

    def pending(self, request_id: int) -> bool:
        return request_id not in self.replies

    # ------------------------------------------------------------ requests

    def _request_id(self) -> int:
        rid = next(self._ids)
        self.requests.append(rid)
        return rid

    def join(
        self,
        member_id: str = "",
        *,
        group: str = GROUP,
        instance: str | None = None,
        protocols=RANGE,
        protocol_type: str = "consumer",
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
        client: str = "c",
        require_known: bool = True,
        skip_assignment: bool = False,
    ) -> int:
        rid = self._request_id()
        request = JoinRequest(
            rid,
            group,
            member_id,
            instance,
            client,
            "/127.0.0.1",
            session_ms,
            rebalance_ms,
            protocol_type,
            protocols,
            require_known,
            skip_assignment,
        )
        self.apply(self.coordinator.join(request, self.now, f"u{next(self._uuids)}"))
        return rid

    def join_new(self, **kwargs) -> tuple[str, int]:
        """KIP-394's two steps: a join without an id gets one (MEMBER_ID_REQUIRED); join again with it."""
        first = self.join(**kwargs)
        reply = self.answered(first)
        assert reply.error == ErrorCode.member_id_required, reply
        return reply.member_id, self.join(reply.member_id, **kwargs)

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments=(),
        *,
        group: str = GROUP,
        instance: str | None = None,
        protocol_name: str | None = None,
    ) -> int:
        rid = self._request_id()
        request = SyncRequest(
            rid, group, generation, member_id, instance, None, protocol_name, tuple(assignments)
        )
        self.apply(self.coordinator.sync(request, self.now))
        return rid

    def heartbeat(
        self, member_id: str, generation: int, *, group: str = GROUP, instance: str | None = None
    ) -> int:
        rid = self._request_id()
        self.apply(
            self.coordinator.heartbeat(
                HeartbeatRequest(rid, group, generation, member_id, instance), self.now
            )
        )
        return rid

    def leave(self, *members: LeavingMember, group: str = GROUP) -> int:
        rid = self._request_id()
        self.apply(self.coordinator.leave(LeaveRequest(rid, group, members), self.now))
        return rid

    def commit(
        self,
        member_id: str,
        generation: int,
        offsets: dict,
        *,
        group: str = GROUP,
        instance: str | None = None,
        retention_ms: int = -1,
        metadata: str = "",
    ) -> int:
        rid = self._request_id()
        partitions = tuple(CommitPartition(t, p, o, 1, metadata) for (t, p), o in offsets.items())
        request = CommitRequest(rid, group, generation, member_id, partitions, instance, retention_ms)
        self.apply(self.coordinator.commit(request, self.now))
        return rid

    # ------------------------------------------------------------ scenarios

    def stable_group(self, size: int, *, static: bool = False) -> list[str]:
        """A Stable group of `size` members after one full join/sync round; returns the member ids, leader
        first. Each member's assignment is b"a-<its index>"."""
        ids, joins = [], []
        for i in range(size):
            instance = f"i-{i}" if static else None
            if static:
                rid = self.join(instance=instance)
                joins.append(rid)
                ids.append(None)
            else:
                member_id, rid = self.join_new()
                ids.append(member_id)
                joins.append(rid)
        self.advance(self.coordinator.config.group_initial_rebalance_delay_ms * 2)
        results = [self.answered(rid) for rid in joins]
        ids = [r.member_id for r in results]
        leader = results[0].leader_id
        generation = results[0].generation_id
        assignments = [(m, b"a-%d" % ids.index(m)) for m in ids]
        syncs = [self.sync(m, generation, assignments if m == leader else ()) for m in ids]
        assert all(self.answered(s).error == ErrorCode.none for s in syncs)
        return [leader] + [m for m in ids if m != leader]
