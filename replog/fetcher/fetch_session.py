"""The follower's side of an incremental fetch session (KIP-227): Kafka's FetchSessionHandler, sans-IO.

One session per leader connection. The first request is a full fetch at epoch 0; when its answer carries a
session id, every later request names only what changed since the previous one: partitions added or whose
fetch parameters moved (offset, epochs, log start offset, byte limit), and the removed ones as forgotten
topics. The leader then answers only partitions with news, so a partition missing from an answer has none.
Any failure — a session error from the leader, a broken or timed-out request — falls back to a full fetch.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from kio.schema.errors import ErrorCode

from replog.log.partition_log import TopicPartition

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
_MAX_EPOCH = 2**31 - 1
P = TypeVar("P")  # a partition's request data; equal values mean nothing changed
_ABSENT = object()


@dataclass(frozen=True, slots=True)
class SessionRequest(Generic[P]):
    """What one Fetch sends: its session id and epoch, the partitions it names, the ones it forgets."""

    session_id: int
    epoch: int
    partitions: dict[TopicPartition, P]
    forgotten: list[TopicPartition]

    @property
    def is_full(self) -> bool:
        return self.epoch == INITIAL_EPOCH


class FetchSessionHandler(Generic[P]):
    """Builds each request from the partitions wanted now; learns from each answer's session id and error."""

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        # What the leader's session holds once the request being built is applied.
        self._session: dict[TopicPartition, P] = {}
        self.partitions_compared = 0  # by incremental builds: the work that scales with what is followed

    def build(self, wanted: Mapping[TopicPartition, P],
              moved: Collection[TopicPartition] | None = None) -> SessionRequest[P]:
        """`moved`: every partition whose entry may differ from the previous build's `wanted` (added, removed
        or replaced), when the caller knows; then only those are compared, not every partition wanted."""
        if self.epoch == INITIAL_EPOCH:
            self._session = dict(wanted)
            return SessionRequest(self.session_id, self.epoch, dict(wanted), [])
        session = self._session
        if moved is None:
            self.partitions_compared += len(wanted)
            forgotten = [] if session.keys() <= wanted.keys() else [tp for tp in session if tp not in wanted]
            # An unchanged partition's entry is usually the very object sent last time: `is` spares the compare.
            changed = {tp: p for tp, p in wanted.items() if (last := session.get(tp)) is not p and last != p}
            self._session = dict(wanted)
            return SessionRequest(self.session_id, self.epoch, changed, forgotten)
        self.partitions_compared += len(moved)
        forgotten, changed = [], {}
        for tp in sorted(moved):  # sorted: the request's order must not depend on hashing
            p = wanted.get(tp, _ABSENT)
            last = session.get(tp, _ABSENT)
            if p is _ABSENT:
                if last is not _ABSENT:
                    forgotten.append(tp)
                    del session[tp]
            elif last is not p and last != p:
                changed[tp] = session[tp] = p
        return SessionRequest(self.session_id, self.epoch, changed, forgotten)

    def on_response(self, request: SessionRequest[P], error_code: int, session_id: int) -> bool:
        """Kafka's FetchSessionHandler.handleResponse: whether the answer's partitions may be used. After a
        session error the next request is a full fetch (a new session, closing ours if it still exists)."""
        if error_code != ErrorCode.none:
            if error_code != ErrorCode.fetch_session_id_not_found:
                self.on_failure()  # keeps the id, so the next full fetch closes that session
            else:
                self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
            return False
        if session_id == INVALID_SESSION_ID:
            # No session: none was granted (the cache is full) or the leader closed ours. Full fetches on.
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
        elif request.is_full:
            self.session_id, self.epoch = session_id, 1
        else:
            self.epoch = 1 if self.epoch == _MAX_EPOCH else self.epoch + 1
        return True

    def on_failure(self) -> None:
        """The request did not complete: what the leader's session holds is unknown, so start over with a
        full fetch that names our session (closing it on the leader) and asks for a new one."""
        self.epoch = INITIAL_EPOCH
