"""Incremental fetch sessions (KIP-227) on the leader: Kafka's FetchSession.scala as a sans-IO core.

A fetcher opens a session with a full fetch at epoch 0; the answer carries the session's id. From then on it
sends, at the next epoch, only the partitions whose fetch parameters changed (and forgets those it no longer
wants); the broker fetches every partition of the session and answers only the partitions with news: data,
an error, a diverging epoch, or a moved HW / log start offset. A wrong epoch answers INVALID_FETCH_SESSION_EPOCH,
an unknown id FETCH_SESSION_ID_NOT_FOUND, and the fetcher starts over with a full fetch. Epoch -1 closes.

The cache holds at most `max.incremental.fetch.session.cache.slots` sessions. When full, a new session may
evict (Kafka's FetchSessionCache.tryEvict): first the least recently used one if it has been idle longer than
MIN_EVICTION_MS; otherwise the least valuable evictable one if the newcomer is worth more, ranked by
(privileged, size): followers are privileged, and a session younger than MIN_EVICTION_MS can only be evicted
by a follower's, and only if it is a consumer's. Decisions take `now_ms` as an argument; nothing here does I/O.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from replog.protocol.fetch import FetchPartitionResult, part_length

from .fetch_params import FetchPartitionParams

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0  # a full fetch that asks for a new session
FINAL_EPOCH = -1  # a full fetch without a session; with a session id, it closes that session
# Kafka's KafkaServer.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS: how long a session is safe from eviction.
MIN_EVICTION_MS = 120_000
_MAX_EPOCH = 2**31 - 1

PartitionKey = tuple[str, int]


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch: 0 (a new session) is followed by 1; past int32 max it wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class CachedPartition:
    """A partition of a session: what the fetcher asked last, and what it was last told (Kafka's
    CachedPartition). -1 means never told, so the partition is in the next answer.

    A partition is quiet when its last read found the fetcher caught up with nothing to say: then
    `quiet_state` is the broker's snapshot of it at that read (leadership, LEO, HW, log start, ...),
    `quiet_position` where that read started and `quiet_since_ms` when. While the snapshot is unchanged and
    the fetcher names it with the same parameters, a read would say nothing new, so it is not read again."""

    params: FetchPartitionParams
    high_watermark: int = -1
    log_start_offset: int = -1
    quiet_state: Hashable | None = None
    quiet_position: object = None
    quiet_since_ms: int = 0

    def must_respond(self, result: FetchPartitionResult) -> bool:
        """Whether this result goes in an incremental answer; records what the fetcher is now told
        (Kafka's CachedPartition.maybeUpdateResponseData)."""
        respond = bool(result.records is not None and part_length(result.records))
        if result.high_watermark != self.high_watermark:
            self.high_watermark = result.high_watermark
            respond = True
        if result.log_start_offset != self.log_start_offset:
            self.log_start_offset = result.log_start_offset
            respond = True
        if result.error_code != ErrorCode.none:
            # Forget the HW, so the partition is sent again once the error is gone.
            self.high_watermark = -1
            respond = True
        return respond or result.diverging_epoch is not None or result.preferred_read_replica >= 0


class FetchSession:
    """One session: its partitions in fetch order (a partition that returned data moves to the back, so a
    response's byte limit does not starve the others) and the epoch its next request must carry."""

    def __init__(self, session_id: int, privileged: bool, partitions: Iterable[FetchPartitionParams],
                 now_ms: int) -> None:
        self.id = session_id
        self.privileged = privileged
        self.partitions: OrderedDict[PartitionKey, CachedPartition] = OrderedDict(
            ((p.topic, p.partition), CachedPartition(p)) for p in partitions)
        self.created_ms = now_ms
        self.last_used_ms = now_ms
        self.epoch = next_epoch(INITIAL_EPOCH)

    def __repr__(self) -> str:
        return f"<FetchSession {self.id} epoch={self.epoch} partitions={len(self.partitions)}>"

    @property
    def size(self) -> int:
        return len(self.partitions)

    def fetch_list(self) -> list[FetchPartitionParams]:
        return [cached.params for cached in self.partitions.values()]

    def update(self, changed: Iterable[FetchPartitionParams], forgotten: Iterable[PartitionKey]) -> None:
        """Apply an incremental request: new or changed partitions first, then the forgotten ones (as Kafka's
        FetchSession.update). A partition new to the session has told nothing yet, so it is answered; one the
        fetcher names again is read again."""
        for p in changed:
            cached = self.partitions.get((p.topic, p.partition))
            if cached is None:
                self.partitions[(p.topic, p.partition)] = CachedPartition(p)
            else:
                cached.params = p
                cached.quiet_state = None
        for key in forgotten:
            self.partitions.pop(key, None)

    def plan_reads(self, state_of: Callable[[PartitionKey], Hashable | None], now_ms: int,
                   refresh_ms: int) -> tuple[list[FetchPartitionParams], dict[PartitionKey, tuple]]:
        """Which partitions an incremental fetch reads: all but the quiet ones whose state is as at their
        last read, which is at most `refresh_ms` old (a follower's reads also keep it in the ISR, so each
        partition is read now and then). Returns (the partitions to read, {quiet partition: (its params,
        where its last read started)})."""
        reads, quiet = [], {}
        for key, cached in self.partitions.items():
            if (cached.quiet_state is not None and now_ms - cached.quiet_since_ms <= refresh_ms
                    and state_of(key) == cached.quiet_state):
                quiet[key] = (cached.params, cached.quiet_position)
            else:
                reads.append(cached.params)
        return reads, quiet

    def record_reads(self, params: Sequence[FetchPartitionParams], quiet_states: Sequence[Hashable | None],
                     positions: Sequence[object], now_ms: int) -> None:
        """After reading `params`: which of them are quiet now (a state) and which are not (None)."""
        for p, state, position in zip(params, quiet_states, positions, strict=True):
            cached = self.partitions.get((p.topic, p.partition))
            if cached is not None:
                cached.quiet_state, cached.quiet_position, cached.quiet_since_ms = state, position, now_ms

    def record_full_response(self, results: Sequence[FetchPartitionResult]) -> None:
        """After the full fetch that opened the session: what the fetcher has been told of each partition."""
        for cached, result in zip(self.partitions.values(), results, strict=True):
            cached.must_respond(result)

    def select_changed(self, params: Sequence[FetchPartitionParams],
                       results: Sequence[FetchPartitionResult]) -> list[int]:
        """The indexes of `results` (one per partition of `params`, a fetch of this session) that an incremental
        answer carries. Partitions forgotten while the fetch waited are left out."""
        selected = []
        for index, (p, result) in enumerate(zip(params, results, strict=True)):
            key = (p.topic, p.partition)
            cached = self.partitions.get(key)
            if cached is None or not cached.must_respond(result):
                continue
            selected.append(index)
            if result.records is not None and part_length(result.records):
                self.partitions.move_to_end(key)
        return selected


@dataclass(frozen=True, slots=True)
class SessionError:
    """Answer with this top-level error and no partitions; the fetcher falls back to a full fetch."""

    error_code: ErrorCode


@dataclass(frozen=True, slots=True)
class Sessionless:
    """A full fetch that keeps no session (epoch -1, or Fetch before v7): answered in full, session id 0."""

    partitions: list[FetchPartitionParams]


@dataclass(frozen=True, slots=True)
class NewSession:
    """A full fetch at epoch 0: answered in full; FetchSessionCache.create then gives it a session if it can."""

    partitions: list[FetchPartitionParams]
    privileged: bool


@dataclass(frozen=True, slots=True)
class Incremental:
    """A fetch in an existing session: fetch every partition of the session, answer only the changed ones."""

    session: FetchSession
    partitions: list[FetchPartitionParams]


FetchContext = SessionError | Sessionless | NewSession | Incremental


class FetchSessionCache:
    def __init__(self, max_slots: int, *, eviction_ms: int = MIN_EVICTION_MS,
                 rng: random.Random | None = None) -> None:
        assert max_slots >= 0 and eviction_ms >= 0
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._rng = rng or random.Random()
        # Least recently used first.
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def new_context(self, session_id: int, epoch: int, partitions: list[FetchPartitionParams],
                    forgotten: Iterable[PartitionKey], *, privileged: bool, now_ms: int) -> FetchContext:
        """What a Fetch request is, given its session id and epoch (Kafka's FetchManager.newContext)."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self._sessions.pop(session_id, None)  # a full fetch naming a session closes it
            if epoch == FINAL_EPOCH:
                return Sessionless(partitions)
            return NewSession(partitions, privileged)
        session = self._sessions.get(session_id)
        if session is None:
            return SessionError(ErrorCode.fetch_session_id_not_found)
        if session.epoch != epoch:
            return SessionError(ErrorCode.invalid_fetch_session_epoch)
        session.update(partitions, forgotten)
        if not session.partitions:
            del self._sessions[session_id]
            return Sessionless([])
        session.epoch = next_epoch(session.epoch)
        session.last_used_ms = now_ms
        self._sessions.move_to_end(session_id)
        return Incremental(session, session.fetch_list())

    def create(self, privileged: bool, partitions: Sequence[FetchPartitionParams],
               results: Sequence[FetchPartitionResult], now_ms: int) -> int:
        """A session for a full fetch just answered; its id, or INVALID_SESSION_ID when no slot is free and
        none may be evicted (the fetcher then keeps sending full fetches). Empty fetches get no session."""
        if not partitions or self.max_slots == 0:
            return INVALID_SESSION_ID
        if len(self._sessions) >= self.max_slots and not self._try_evict(privileged, len(partitions), now_ms):
            return INVALID_SESSION_ID
        session = FetchSession(self._new_id(), privileged, partitions, now_ms)
        session.record_full_response(results)
        self._sessions[session.id] = session
        return session.id

    def _new_id(self) -> int:
        while True:
            session_id = self._rng.randint(1, _MAX_EPOCH)
            if session_id not in self._sessions:
                return session_id

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        """Kafka's tryEvict: a stale session first; else the least valuable session the newcomer may evict,
        if the newcomer ranks above it by (privileged, size)."""
        lru = next(iter(self._sessions.values()))
        if now_ms - lru.last_used_ms > self.eviction_ms:
            return self._evict(lru)
        candidates = [s for s in self._sessions.values() if self._evictable_by(s, privileged, now_ms)]
        if not candidates:
            return False
        weakest = min(candidates, key=lambda s: (s.privileged, s.size, s.id))
        if (privileged, size) <= (weakest.privileged, weakest.size):
            return False
        return self._evict(weakest)

    def _evictable_by(self, session: FetchSession, privileged: bool, now_ms: int) -> bool:
        if now_ms - session.created_ms > self.eviction_ms:
            return True
        return privileged and not session.privileged

    def _evict(self, session: FetchSession) -> bool:
        del self._sessions[session.id]
        self.evictions += 1
        return True
