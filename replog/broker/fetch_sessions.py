"""Incremental fetch sessions (KIP-227) on the leader: Kafka's FetchSession.scala as a sans-IO core.

A fetcher opens a session with a full fetch at epoch 0; the answer carries the session's id. From then on it
sends, at the next epoch, only the partitions whose fetch parameters changed (and forgets those it no longer
wants); the broker answers only the session's partitions with news: data, an error, a diverging epoch, or a
moved HW / log start offset. A wrong epoch answers INVALID_FETCH_SESSION_EPOCH, an unknown id
FETCH_SESSION_ID_NOT_FOUND, and the fetcher starts over with a full fetch. Epoch -1 closes.

Work per request follows what changed, not the session's size: a partition whose last read found the fetcher
caught up is quiet, and is not read again until the broker reports a change to it (`partition_changed`, from
every append, HW move, ISR or leadership change), the fetcher names it again, or it has been quiet for the
refresh interval. The cache keeps, per partition, the sessions holding it quiet, so a change visits only those.

The cache holds at most `max.incremental.fetch.session.cache.slots` sessions. When full, a new session may
evict (Kafka's FetchSessionCache.tryEvict): first the least recently used one if it has been idle longer than
MIN_EVICTION_MS; otherwise the least valuable evictable one if the newcomer is worth more, ranked by
(privileged, size): followers are privileged, and a session younger than MIN_EVICTION_MS can only be evicted
by a follower's, and only if it is a consumer's. Decisions take `now_ms` as an argument; nothing here does I/O.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable, Sequence
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
    `quiet_position` is where that read started (not None) and `quiet_since_ms` when. Until the broker reports
    a change to it or the fetcher names it with new parameters, a read would say nothing new, so it is not
    read again. `order` is its place in the fetch order (higher: later)."""

    params: FetchPartitionParams
    order: int
    high_watermark: int = -1
    log_start_offset: int = -1
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


# A fetch parked on a session (broker/delayed_fetch.py): told each quiet partition that changes while it waits,
# with the partition's fetch parameters and where its last read started.
QuietWaiter = Callable[[FetchPartitionParams, object], None]


class QuietIndex:
    """Partition -> the sessions that hold it quiet: what a change to a partition visits."""

    def __init__(self) -> None:
        self._sessions: dict[PartitionKey, set[FetchSession]] = {}

    def add(self, key: PartitionKey, session: FetchSession) -> None:
        self._sessions.setdefault(key, set()).add(session)

    def discard(self, key: PartitionKey, session: FetchSession) -> None:
        sessions = self._sessions.get(key)
        if sessions is not None:
            sessions.discard(session)
            if not sessions:
                del self._sessions[key]

    def pop(self, key: PartitionKey) -> set[FetchSession]:
        return self._sessions.pop(key, set())

    def __len__(self) -> int:
        return len(self._sessions)


class FetchSession:
    """One session: its partitions in fetch order (a partition that returned data moves to the back, so a
    response's byte limit does not starve the others), the epoch its next request must carry, which of its
    partitions are active (to be read by the next request) and which quiet, and the fetches parked on it."""

    def __init__(self, session_id: int, privileged: bool, partitions: Iterable[FetchPartitionParams],
                 now_ms: int, quiet_index: QuietIndex | None = None) -> None:
        self.id = session_id
        self.privileged = privileged
        self._order = itertools.count()
        self.partitions: OrderedDict[PartitionKey, CachedPartition] = OrderedDict(
            ((p.topic, p.partition), CachedPartition(p, next(self._order))) for p in partitions)
        self._topics = Counter(key[0] for key in self.partitions)
        self._active: set[PartitionKey] = set(self.partitions)
        # (when a partition went quiet, the partition), oldest first: the refresh takes them from the front.
        self._quiet_since: deque[tuple[int, PartitionKey]] = deque()
        self._quiet_index = quiet_index if quiet_index is not None else QuietIndex()
        self.waiters: set[QuietWaiter] = set()
        self.created_ms = now_ms
        self.last_used_ms = now_ms
        self.epoch = next_epoch(INITIAL_EPOCH)

    def __repr__(self) -> str:
        return f"<FetchSession {self.id} epoch={self.epoch} partitions={len(self.partitions)}>"

    @property
    def size(self) -> int:
        return len(self.partitions)

    @property
    def topics(self) -> set[str]:
        return set(self._topics)

    @property
    def active_count(self) -> int:
        return len(self._active)

    def fetch_list(self) -> list[FetchPartitionParams]:
        return [cached.params for cached in self.partitions.values()]

    def update(self, changed: Iterable[FetchPartitionParams], forgotten: Iterable[PartitionKey]) -> None:
        """Apply an incremental request: new or changed partitions first, then the forgotten ones (as Kafka's
        FetchSession.update). A partition new to the session has told nothing yet, so it is answered; one the
        fetcher names again is read again."""
        for p in changed:
            key = (p.topic, p.partition)
            cached = self.partitions.get(key)
            if cached is None:
                self.partitions[key] = CachedPartition(p, next(self._order))
                self._topics[p.topic] += 1
                self._active.add(key)
            else:
                cached.params = p
                self._activate(key, cached)
        for key in forgotten:
            cached = self.partitions.pop(key, None)
            if cached is not None:
                self._activate(key, cached)
                self._active.discard(key)
                self._topics[key[0]] -= 1
                if not self._topics[key[0]]:
                    del self._topics[key[0]]

    def plan_reads(self, now_ms: int, refresh_ms: int) -> list[FetchPartitionParams]:
        """The partitions an incremental fetch reads, in fetch order: the active ones, and the quiet ones
        quiet for longer than `refresh_ms` (a follower's reads also keep it in the ISR, so each partition is
        read now and then). O(partitions read), whatever the session's size."""
        while self._quiet_since and now_ms - self._quiet_since[0][0] > refresh_ms:
            since, key = self._quiet_since.popleft()
            cached = self.partitions.get(key)
            if cached is not None and cached.quiet_position is not None and cached.quiet_since_ms == since:
                self._activate(key, cached)
        partitions = self.partitions
        return [partitions[key].params for key in sorted(self._active, key=lambda key: partitions[key].order)]

    def record_reads(self, params: Sequence[FetchPartitionParams], quiet_positions: Sequence[object],
                     now_ms: int) -> None:
        """After reading `params`: which of them are quiet now (where their read started) and which are
        not (None)."""
        for p, position in zip(params, quiet_positions, strict=True):
            key = (p.topic, p.partition)
            cached = self.partitions.get(key)
            if cached is None:
                continue
            if position is None:
                self._activate(key, cached)
            else:
                if cached.quiet_position is None:
                    self._quiet_index.add(key, self)
                cached.quiet_position, cached.quiet_since_ms = position, now_ms
                self._active.discard(key)
                self._quiet_since.append((now_ms, key))

    def partition_changed(self, key: PartitionKey) -> None:
        """The broker changed `key`, quiet in this session: it is read by the next request, and a fetch
        parked on the session takes it in now."""
        cached = self.partitions.get(key)
        if cached is None or cached.quiet_position is None:
            return
        position = cached.quiet_position
        self._activate(key, cached)
        for waiter in list(self.waiters):
            waiter(cached.params, position)

    def close(self) -> None:
        """The session leaves the cache: the index forgets its quiet partitions."""
        for key, cached in self.partitions.items():
            self._activate(key, cached)

    def _activate(self, key: PartitionKey, cached: CachedPartition) -> None:
        if cached.quiet_position is not None:
            cached.quiet_position = None
            self._quiet_index.discard(key, self)
        self._active.add(key)

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
                cached.order = next(self._order)
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
    """A fetch in an existing session: read what may have news (FetchSession.plan_reads), answer only the
    changed ones."""

    session: FetchSession

    @property
    def partitions(self) -> list[FetchPartitionParams]:
        """Every partition of the session, in fetch order."""
        return self.session.fetch_list()


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
        self._quiet_index = QuietIndex()
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def partition_changed(self, key: PartitionKey) -> None:
        """The broker changed a partition (an append, a HW or log start move, leadership, the ISR): every
        session holding it quiet reads it again, and a fetch parked on such a session takes it in."""
        for session in self._quiet_index.pop(key):
            session.partition_changed(key)

    def new_context(self, session_id: int, epoch: int, partitions: list[FetchPartitionParams],
                    forgotten: Iterable[PartitionKey], *, privileged: bool, now_ms: int) -> FetchContext:
        """What a Fetch request is, given its session id and epoch (Kafka's FetchManager.newContext)."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self._remove(session_id)  # a full fetch naming a session closes it
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
            self._remove(session_id)
            return Sessionless([])
        session.epoch = next_epoch(session.epoch)
        session.last_used_ms = now_ms
        self._sessions.move_to_end(session_id)
        return Incremental(session)

    def create(self, privileged: bool, partitions: Sequence[FetchPartitionParams],
               results: Sequence[FetchPartitionResult], now_ms: int) -> int:
        """A session for a full fetch just answered; its id, or INVALID_SESSION_ID when no slot is free and
        none may be evicted (the fetcher then keeps sending full fetches). Empty fetches get no session."""
        if not partitions or self.max_slots == 0:
            return INVALID_SESSION_ID
        if len(self._sessions) >= self.max_slots and not self._try_evict(privileged, len(partitions), now_ms):
            return INVALID_SESSION_ID
        session = FetchSession(self._new_id(), privileged, partitions, now_ms, self._quiet_index)
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
        self._remove(session.id)
        self.evictions += 1
        return True

    def _remove(self, session_id: int) -> None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            session.close()
