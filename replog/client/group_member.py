"""The bundled consumer's membership of a group (Kafka's classic protocol, as the Java ConsumerCoordinator):
find the coordinator, join (KIP-394: rejoin with the member id given), sync (the leader computes a range
assignment), heartbeat in the background, commit and fetch offsets, leave on close.

A heartbeat answered with REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID marks the member
as needing to rejoin; the consumer rejoins on its next poll, revoking its partitions first.
"""

import asyncio
import logging
import struct
from collections.abc import Iterable

from kio.schema.errors import ErrorCode

from ..protocol.apis import ApiKey
from ..protocol.primitives import Reader
from .cluster import Cluster
from .errors import KafkaError
from .group_admin import consumer_assignment, find_coordinator

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
PROTOCOL_TYPE = "consumer"
RANGE = "range"
NO_GENERATION = -1
REJOIN = (ErrorCode.rebalance_in_progress, ErrorCode.illegal_generation, ErrorCode.unknown_member_id,
          ErrorCode.fenced_instance_id)
FIND_AGAIN = (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
              ErrorCode.coordinator_load_in_progress)
MAX_JOIN_ATTEMPTS = 20


def _string(s: str) -> bytes:
    data = s.encode()
    return struct.pack(">h", len(data)) + data


def encode_subscription(topics: Iterable[str]) -> bytes:
    """ConsumerProtocolSubscription v0: the topics, no user data."""
    topics = sorted(topics)
    return struct.pack(">hi", 0, len(topics)) + b"".join(_string(t) for t in topics) + struct.pack(">i", -1)


def encode_assignment(partitions: Iterable[TopicPartition]) -> bytes:
    """ConsumerProtocolAssignment v0: partitions grouped by topic, no user data."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    out = struct.pack(">hi", 0, len(by_topic))
    for topic, ps in by_topic.items():
        out += _string(topic) + struct.pack(f">i{len(ps)}i", len(ps), *ps)
    return out + struct.pack(">i", -1)


def range_assignment(members: dict[str, set[str]], partitions: dict[str, int]) -> dict[str, list[TopicPartition]]:
    """Kafka's RangeAssignor: per topic, its subscribers in member-id order each take a contiguous range;
    the first (count % subscribers) take one more."""
    out: dict[str, list[TopicPartition]] = {m: [] for m in members}
    for topic, count in sorted(partitions.items()):
        subscribers = sorted(m for m, topics in members.items() if topic in topics)
        if not subscribers:
            continue
        share, extra = divmod(count, len(subscribers))
        start = 0
        for i, member in enumerate(subscribers):
            size = share + (1 if i < extra else 0)
            out[member] += [(topic, p) for p in range(start, start + size)]
            start += size
    return out


class GroupMember:
    def __init__(self, cluster: Cluster, group_id: str, topics: Iterable[str], *, session_timeout_ms: int = 45_000,
                 rebalance_timeout_ms: int = 300_000, heartbeat_interval_ms: int = 3_000) -> None:
        assert group_id and 0 < heartbeat_interval_ms < session_timeout_ms
        self.cluster = cluster
        self.group_id = group_id
        self.topics = frozenset(topics)
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.member_id = ""
        self.generation = NO_GENERATION
        self.needs_rejoin = True
        self._coordinator: int | None = None
        self._heartbeats: asyncio.Task | None = None

    async def _send(self, api_key: int, data: dict, timeout_ms: int | None = None):
        if self._coordinator is None:
            self._coordinator = await find_coordinator(self.cluster, self.group_id)
        conn = await self.cluster.connection(self._coordinator)
        return await conn.send(api_key, data, timeout_ms=timeout_ms)

    def _lost_coordinator(self, error: int) -> bool:
        if error in FIND_AGAIN:
            self._coordinator = None
            return True
        return False

    # ------------------------------------------------------------ membership

    async def join(self) -> list[TopicPartition]:
        """Join (or rejoin) and sync; returns this member's partitions. Retries what Kafka's clients retry."""
        self._stop_heartbeats()
        for _ in range(MAX_JOIN_ATTEMPTS):
            joined = await self._send(ApiKey.JOIN_GROUP, {
                "group_id": self.group_id, "session_timeout": self.session_timeout_ms,
                "rebalance_timeout": self.rebalance_timeout_ms, "member_id": self.member_id,
                "group_instance_id": None, "protocol_type": PROTOCOL_TYPE, "reason": None,
                "protocols": [{"name": RANGE, "metadata": encode_subscription(self.topics)}]},
                timeout_ms=self.rebalance_timeout_ms + 5_000)
            error = joined.error_code
            if error == ErrorCode.member_id_required:  # KIP-394: join again with the id handed out
                self.member_id = joined.member_id
                continue
            if error == ErrorCode.unknown_member_id:
                self.member_id = ""
                continue
            if self._lost_coordinator(error) or error == ErrorCode.rebalance_in_progress:
                await asyncio.sleep(0.1)
                continue
            if error != ErrorCode.none:
                raise KafkaError(int(error), f"joining group {self.group_id!r}")
            self.member_id, self.generation = joined.member_id, joined.generation_id
            assignments = await self._assign(joined) if joined.leader == self.member_id else []
            synced = await self._send(ApiKey.SYNC_GROUP, {
                "group_id": self.group_id, "generation_id": self.generation, "member_id": self.member_id,
                "group_instance_id": None, "protocol_type": PROTOCOL_TYPE, "protocol_name": RANGE,
                "assignments": assignments}, timeout_ms=self.rebalance_timeout_ms + 5_000)
            if synced.error_code in REJOIN or self._lost_coordinator(synced.error_code):
                continue
            if synced.error_code != ErrorCode.none:
                raise KafkaError(int(synced.error_code), f"syncing group {self.group_id!r}")
            self.needs_rejoin = False
            self._heartbeats = asyncio.get_running_loop().create_task(self._heartbeat_loop())
            return list(consumer_assignment(synced.assignment))
        raise KafkaError(int(ErrorCode.rebalance_in_progress), f"group {self.group_id!r} did not settle")

    async def _assign(self, joined) -> list[dict]:
        """As the leader: a range assignment of every member's subscribed topics."""
        members: dict[str, set[str]] = {}
        for m in joined.members:  # each subscription's prefix: version, then the topics
            r = Reader(m.metadata)
            r.int16()
            members[m.member_id] = {r.string(compact=False) for _ in range(max(0, r.array_length(compact=False)))}
        topics = set().union(*members.values())
        if not topics <= set(self.cluster.metadata.topics):
            # As Kafka's leader: fresh metadata only for topics it does not know (others' subscriptions); a
            # refresh right after another would wait out the 100 ms metadata back-off.
            await self.cluster.refresh(sorted(topics))
        partitions = {t: len(await self.cluster.partitions_for(t)) for t in topics}
        plan = range_assignment(members, partitions)
        return [{"member_id": m, "assignment": encode_assignment(tps)} for m, tps in plan.items()]

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval_ms / 1000)
            try:
                response = await self._send(ApiKey.HEARTBEAT, {
                    "group_id": self.group_id, "generation_id": self.generation, "member_id": self.member_id,
                    "group_instance_id": None})
            except KafkaError as e:
                log.info("group %s: heartbeat failed: %s", self.group_id, e)
                self._coordinator = None
                continue
            if response.error_code in REJOIN:
                if response.error_code == ErrorCode.unknown_member_id:
                    self.member_id = ""
                self.needs_rejoin = True
                return
            self._lost_coordinator(response.error_code)

    def _stop_heartbeats(self) -> None:
        if self._heartbeats is not None:
            self._heartbeats.cancel()
            self._heartbeats = None

    async def leave(self) -> None:
        """LeaveGroup, so the others rebalance at once rather than after a session timeout."""
        self._stop_heartbeats()
        if not self.member_id:
            return
        try:
            await self._send(ApiKey.LEAVE_GROUP, {"group_id": self.group_id, "member_id": self.member_id,
                                                  "members": [{"member_id": self.member_id,
                                                               "group_instance_id": None, "reason": None}]})
        except KafkaError as e:
            log.info("group %s: leaving failed (the session timeout removes us): %s", self.group_id, e)
        self.member_id, self.generation, self.needs_rejoin = "", NO_GENERATION, True

    # --------------------------------------------------------------- offsets

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        by_topic: dict[str, list[dict]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                                   "committed_leader_epoch": -1, "committed_metadata": ""})
        response = await self._send(ApiKey.OFFSET_COMMIT, {
            "group_id": self.group_id, "generation_id_or_member_epoch": self.generation,
            "member_id": self.member_id, "group_instance_id": None, "retention_time": -1,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})
        for topic in response.topics:
            for p in topic.partitions:
                if p.error_code != ErrorCode.none:
                    if p.error_code in REJOIN:
                        self.needs_rejoin = True
                    self._lost_coordinator(p.error_code)
                    raise KafkaError(int(p.error_code), f"committing {topic.name}-{p.partition_index}")

    async def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        wanted: dict[str, list[int]] = {}
        for topic, partition in partitions:
            wanted.setdefault(topic, []).append(partition)
        topics = [{"name": t, "partition_indexes": ps} for t, ps in wanted.items()]
        response = await self._send(ApiKey.OFFSET_FETCH, {
            "group_id": self.group_id, "topics": topics, "require_stable": False,
            "groups": [{"group_id": self.group_id, "topics": topics, "member_id": None, "member_epoch": -1}]})
        answer = response.groups[0] if hasattr(response, "groups") else response
        if answer.error_code != ErrorCode.none:
            self._lost_coordinator(answer.error_code)
            raise KafkaError(int(answer.error_code), f"fetching the offsets of group {self.group_id!r}")
        return {(t.name, p.partition_index): (p.committed_offset if p.committed_offset >= 0 else None)
                for t in answer.topics for p in t.partitions}
