"""Asynchronous consumer with manual assignment: positions, offset resets, and fetch rounds per leader.

Each getmany() round sends one Fetch to every leader that owns an assigned partition with nothing
buffered, concurrently, then hands out decoded records. A fetch returns whole batches, so records below
the fetch offset are skipped; a cut-off trailing batch is ignored (it comes back whole next time);
control batches only move the position forward.
"""

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from ..protocol import messages
from ..protocol.apis import ApiKey, response_header_version
from ..protocol.fetch import decode_fetch_response
from ..protocol.headers import decode_response_header
from .cluster import Cluster
from .consumer_records import ConsumerRecord, OffsetAndTimestamp, TopicPartition, decode_fetched
from .errors import STALE_METADATA_CODES, KafkaError, is_retriable
from .group_member import GroupMember
from .offset_lookup import EARLIEST, LATEST, list_offsets
from .rebalance_listener import ConsumerRebalanceListener, call_listener
from .security import ClientSecurity

log = logging.getLogger(__name__)

OFFSET_OUT_OF_RANGE = ErrorCode.offset_out_of_range.value
_RESET_POLICIES = {"earliest": EARLIEST, "latest": LATEST, "none": None}


@dataclass(slots=True)
class _Buffered:
    """Records of one fetch not yet handed out, and where the next fetch starts once they all are."""

    records: list[ConsumerRecord]
    next_index: int
    next_offset: int


class Consumer:
    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        fetch_min_bytes: int = 1,
        fetch_max_wait_ms: int = 500,
        max_partition_fetch_bytes: int = 1_048_576,
        fetch_max_bytes: int = 52_428_800,
        isolation_level: int = 0,
        auto_offset_reset: str = "earliest",
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        max_records: int = 500,
        client_id: str = "replog-consumer",
        group_id: str | None = None,
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5_000,
        session_timeout_ms: int = 45_000,
        heartbeat_interval_ms: int = 3_000,
        security: ClientSecurity | None = None,
    ) -> None:
        """group_id: subscribe() joins this group, and commit() stores offsets there; with
        enable_auto_commit the positions are committed every auto_commit_interval_ms, before a rebalance
        and on close(), as Kafka's consumer does. security: TLS and SASL for every connection (None: PLAINTEXT)."""
        if auto_offset_reset not in _RESET_POLICIES:
            raise ValueError(f"auto_offset_reset must be one of {sorted(_RESET_POLICIES)}")
        assert isolation_level in (0, 1)
        assert fetch_max_wait_ms >= 0
        assert max_records > 0
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.fetch_max_bytes = fetch_max_bytes
        self.isolation_level = isolation_level
        self.reset_timestamp = _RESET_POLICIES[auto_offset_reset]
        self.request_timeout_ms = request_timeout_ms
        self.max_records = max_records
        self.cluster = Cluster(
            bootstrap,
            client_id=client_id,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            security=security,
        )
        self._positions: dict[TopicPartition, int | None] = {}
        self._resets: dict[TopicPartition, int] = {}  # tp -> EARLIEST/LATEST, resolved lazily
        self._buffers: dict[TopicPartition, _Buffered] = {}
        self._iter_queue: list[ConsumerRecord] = []
        self._iter_index = 0
        self._stale_metadata = False
        self.group_id = group_id
        self.enable_auto_commit = enable_auto_commit
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self._membership = {"session_timeout_ms": session_timeout_ms, "heartbeat_interval_ms": heartbeat_interval_ms}
        self._member: GroupMember | None = None
        self._listener = ConsumerRebalanceListener()
        self._last_commit = 0.0

    async def __aenter__(self) -> "Consumer":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        wanted = {(t, int(p)) for t, p in partitions}
        for tp in list(self._positions):
            if tp not in wanted:
                self._forget(tp)
        for tp in wanted:
            self._positions.setdefault(tp, None)
        assert set(self._positions) == wanted

    def subscribe(self, topics: Iterable[str], listener: ConsumerRebalanceListener | None = None) -> None:
        """Consume the topics as a member of group_id: the group decides which partitions are ours; the
        next getmany joins it. Each partition starts at the group's committed offset, else per
        auto_offset_reset. The listener hears of each rebalance (see rebalance_listener.py)."""
        if self.group_id is None:
            raise ValueError("subscribe() needs a group_id")
        self.assign([])
        self._listener = listener or ConsumerRebalanceListener()
        self._member = GroupMember(self.cluster, self.group_id, topics, **self._membership)

    async def commit(self, offsets: dict[TopicPartition, int] | None = None) -> None:
        """Commit offsets (default: the current positions, the next record to read) to the group."""
        if self.group_id is None:
            raise ValueError("commit() needs a group_id")
        if self._member is None:  # a group without membership: generation -1, as Kafka's assign() + commit
            self._member = GroupMember(self.cluster, self.group_id, (), **self._membership)
            self._member.needs_rejoin = False
        if offsets is None:
            offsets = {tp: p for tp, p in self._positions.items() if p is not None}
        if offsets:
            await self._member.commit(offsets)
        self._last_commit = asyncio.get_running_loop().time()

    async def _auto_commit(self) -> None:
        try:
            await self.commit()
        except KafkaError as e:
            log.info("auto-commit for group %s failed: %s", self.group_id, e)

    async def _keep_membership(self) -> None:
        """Rejoin when the group rebalances (committing first, since our partitions may move), and commit
        every auto_commit_interval_ms."""
        member = self._member
        if member is None or not member.topics:
            return
        if member.needs_rejoin:
            # Kafka's onJoinPrepare: auto-commit, then the revoke callback, both still in the old generation.
            revoke_error = None
            if member.generation >= 0:
                if self.enable_auto_commit:
                    await self._auto_commit()
                revoke_error = await call_listener(self._listener.on_partitions_revoked, self.assignment(), "revoke")
            assigned = await member.join()
            self.assign(assigned)
            committed = await member.committed(assigned) if assigned else {}
            for tp, offset in committed.items():
                if offset is not None and tp in self._positions:
                    self._positions[tp] = offset
            self._last_commit = asyncio.get_running_loop().time()
            assign_error = await call_listener(self._listener.on_partitions_assigned, set(assigned), "assign")
            if revoke_error or assign_error:
                raise revoke_error or assign_error
        elif (self.enable_auto_commit
              and asyncio.get_running_loop().time() - self._last_commit >= self.auto_commit_interval_ms / 1000):
            await self._auto_commit()

    def assignment(self) -> set[TopicPartition]:
        return set(self._positions)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._check_assigned(tp)
        assert offset >= 0
        self._positions[tp] = offset
        self._resets.pop(tp, None)
        self._drop_buffered(tp)

    def seek_to_beginning(self, *tps: TopicPartition) -> None:
        """Lazy, like Kafka's: the offset is looked up (ListOffsets -2) on the next position() or fetch."""
        self._seek_to(EARLIEST, tps)

    def seek_to_end(self, *tps: TopicPartition) -> None:
        self._seek_to(LATEST, tps)

    def _seek_to(self, timestamp: int, tps: Sequence[TopicPartition]) -> None:
        for tp in tps or list(self._positions):
            self._check_assigned(tp)
            self._resets[tp] = timestamp
            self._positions[tp] = None
            self._drop_buffered(tp)

    async def position(self, tp: TopicPartition) -> int:
        self._check_assigned(tp)
        await self._resolve_positions()
        position = self._positions[tp]
        assert position is not None
        return position

    def _check_assigned(self, tp: TopicPartition) -> None:
        if tp not in self._positions:
            raise ValueError(f"{tp} is not assigned")

    def _forget(self, tp: TopicPartition) -> None:
        self._positions.pop(tp, None)
        self._resets.pop(tp, None)
        self._drop_buffered(tp)

    def _drop_buffered(self, tp: TopicPartition) -> None:
        """Discard fetched but not yet returned records of tp (after a seek they are from the wrong place)."""
        self._buffers.pop(tp, None)
        queue = self._iter_queue[self._iter_index :]
        self._iter_queue = [r for r in queue if (r.topic, r.partition) != tp]
        self._iter_index = 0

    async def beginning_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        found = await self._list_offsets(dict.fromkeys(tps, EARLIEST))
        return {tp: ot.offset for tp, ot in found.items()}

    async def end_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        found = await self._list_offsets(dict.fromkeys(tps, LATEST))
        return {tp: ot.offset for tp, ot in found.items()}

    async def offsets_for_times(
        self, timestamps: dict[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The earliest offset whose timestamp is >= the given one, per partition (None past the end)."""
        assert all(ts >= 0 for ts in timestamps.values())
        found = await self._list_offsets(timestamps)
        return {tp: (ot if ot.offset >= 0 else None) for tp, ot in found.items()}

    async def close(self) -> None:
        """Commit (with auto-commit), revoke (the listener hears it) and leave the group, then close the
        connections."""
        try:
            if self._member is not None and self._member.topics:
                if self._member.generation >= 0:
                    if self.enable_auto_commit:
                        await self._auto_commit()
                    await call_listener(self._listener.on_partitions_revoked, self.assignment(), "revoke")
                await self._member.leave()
        finally:
            self._buffers.clear()
            await self.cluster.close()

    # Fetching

    async def getmany(
        self, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records from the assigned partitions, waiting up to timeout_ms for some to arrive."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        limit = max_records or self.max_records
        assert limit > 0
        await self._keep_membership()
        while True:
            out = self._drain_buffers(limit)
            remaining_ms = max(0, round((deadline - loop.time()) * 1000))
            if out or (remaining_ms == 0 and timeout_ms > 0):
                return out
            if not self._positions:
                await asyncio.sleep(remaining_ms / 1000)
                return {}
            await self._resolve_positions()
            await self._fetch_round(min(self.fetch_max_wait_ms, remaining_ms))
            if timeout_ms == 0:
                return self._drain_buffers(limit)

    def _drain_buffers(self, limit: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        count = 0
        for tp in list(self._buffers):
            if count >= limit:
                break
            buffered = self._buffers[tp]
            take = buffered.records[buffered.next_index : buffered.next_index + limit - count]
            buffered.next_index += len(take)
            count += len(take)
            if take:
                out[tp] = take
                self._positions[tp] = take[-1].offset + 1
            if buffered.next_index == len(buffered.records):
                self._positions[tp] = buffered.next_offset
                del self._buffers[tp]
        assert count <= limit
        return out

    async def _resolve_positions(self) -> None:
        """Look up offsets for partitions without a position (seek_to_* or auto_offset_reset)."""
        need: dict[TopicPartition, int] = {}
        for tp, position in self._positions.items():
            if position is not None:
                continue
            timestamp = self._resets.get(tp, self.reset_timestamp)
            if timestamp is None:
                raise KafkaError(OFFSET_OUT_OF_RANGE, f"{tp} has no position and auto_offset_reset is 'none'")
            need[tp] = timestamp
        if not need:
            return
        found = await self._list_offsets(need)
        for tp, ot in found.items():
            # Re-check after the await: a seek or unassign in the meantime wins.
            if tp in self._positions and self._positions[tp] is None:
                self._positions[tp] = ot.offset
                self._resets.pop(tp, None)

    async def _fetch_round(self, max_wait_ms: int) -> None:
        fetchable = [tp for tp, pos in self._positions.items() if pos is not None and tp not in self._buffers]
        by_leader = self._group_by_leader(fetchable)
        if by_leader:
            results = await asyncio.gather(
                *(self._fetch_from(node, tps, max_wait_ms) for node, tps in by_leader.items()),
                return_exceptions=True,
            )
            for result in results:
                if isinstance(result, KafkaError) and result.retriable:
                    self._stale_metadata = True
                elif isinstance(result, BaseException):
                    raise result
        if self._stale_metadata or (fetchable and not by_leader):
            self._stale_metadata = False
            try:
                await self.cluster.refresh({t for t, _ in self._positions})
            except KafkaError as e:
                if not e.retriable:
                    raise

    def _group_by_leader(self, tps: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in tps:
            try:
                leader = self.cluster.leader(*tp).leader
            except KafkaError:
                self._stale_metadata = True
                continue
            by_leader.setdefault(leader, []).append(tp)
        return by_leader

    async def _fetch_from(self, node: int, tps: list[TopicPartition], max_wait_ms: int) -> None:
        conn = await self.cluster.connection(node)
        version = conn.pick_version(ApiKey.FETCH)
        offsets = {tp: self._positions[tp] for tp in tps}
        body = messages.encode_request(ApiKey.FETCH, version, self._fetch_request(offsets, max_wait_ms))
        frame = await conn.request(
            ApiKey.FETCH, version, [body], timeout_ms=self.request_timeout_ms + max_wait_ms
        )
        assert frame is not None
        _, start = decode_response_header(frame, response_header_version(ApiKey.FETCH, version))
        response = decode_fetch_response(version, frame, start)
        if response.error_code:
            raise KafkaError(response.error_code, f"fetch from broker {node}")
        for topic in response.topics:
            for p in topic.partitions:
                tp = (topic.topic, p.partition_index)
                if tp not in offsets or self._positions.get(tp) != offsets[tp] or tp in self._buffers:
                    continue  # seeked, unassigned or already filled while this fetch was out
                self._on_partition(tp, p, offsets[tp])

    def _fetch_request(self, offsets: dict[TopicPartition, int], max_wait_ms: int) -> dict:
        topics: dict[str, list[dict]] = {}
        for (topic, partition), offset in offsets.items():
            assert offset is not None and offset >= 0
            topics.setdefault(topic, []).append(
                {
                    "partition": partition,
                    "current_leader_epoch": self.cluster.leader(topic, partition).leader_epoch,
                    "fetch_offset": offset,
                    "last_fetched_epoch": -1,
                    "log_start_offset": -1,
                    "partition_max_bytes": self.max_partition_fetch_bytes,
                }
            )
        return {
            "replica_id": -1,
            "max_wait": max_wait_ms,
            "min_bytes": self.fetch_min_bytes,
            "max_bytes": self.fetch_max_bytes,
            "isolation_level": self.isolation_level,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [],
            "rack_id": "",
        }

    def _on_partition(self, tp: TopicPartition, p, fetch_offset: int) -> None:
        code = p.error_code
        if code == 0:
            records, next_offset = decode_fetched(tp[0], tp[1], p.records, fetch_offset)
            if records or next_offset > fetch_offset:
                self._buffers[tp] = _Buffered(records, 0, next_offset)
        elif code == OFFSET_OUT_OF_RANGE:
            if self.reset_timestamp is None:
                raise KafkaError(code, f"{tp[0]}-{tp[1]} offset {fetch_offset}")
            self._positions[tp] = None  # auto_offset_reset resolves it on the next round
        elif code in STALE_METADATA_CODES or is_retriable(code):
            self._stale_metadata = True
        else:
            raise KafkaError(code, f"fetch {tp[0]}-{tp[1]} at {fetch_offset}")

    async def _list_offsets(self, wanted: dict[TopicPartition, int]) -> dict[TopicPartition, OffsetAndTimestamp]:
        return await list_offsets(self.cluster, self.isolation_level, self._group_by_leader, wanted)

    # Iteration: an endless stream, like Kafka's poll loop

    def __aiter__(self) -> "Consumer":
        return self

    async def __anext__(self) -> ConsumerRecord:
        while self._iter_index >= len(self._iter_queue):
            fetched = await self.getmany(self.fetch_max_wait_ms)
            self._iter_queue = [r for records in fetched.values() for r in records]
            self._iter_index = 0
        record = self._iter_queue[self._iter_index]
        self._iter_index += 1
        return record
