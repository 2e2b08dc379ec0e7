"""The node's side of the network: correlation ids, one request in flight per peer, and the outbox.

As Kafka's RequestManager: at most one request is outstanding to a peer; a response is accepted only if it
answers that request (a duplicate, or an answer to a request given up after request.timeout.ms, is dropped).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from replog.raft import messages as m
from replog.raft.messages import Envelope


@dataclass(frozen=True, slots=True)
class InFlight:
    correlation_id: int
    sent_ms: int
    fetch_offset: int  # for a Fetch, the offset asked for: its answer's records start there


class RequestChannel:
    def __init__(self, local_id: int, request_timeout_ms: int) -> None:
        self._local_id = local_id
        self._request_timeout_ms = request_timeout_ms
        self._correlation_ids = itertools.count(1)
        self._in_flight: dict[int, InFlight] = {}
        self._outbox: list[Envelope] = []

    def is_waiting_for(self, destination: int) -> bool:
        return destination in self._in_flight

    @property
    def idle(self) -> bool:
        return not self._in_flight

    def send(self, destination: int, message: m.Request, now_ms: int, fetch_offset: int = -1) -> None:
        """Send unless a request to `destination` is still outstanding."""
        if destination in self._in_flight:
            return
        correlation_id = next(self._correlation_ids)
        self._in_flight[destination] = InFlight(correlation_id, now_ms, fetch_offset)
        self._outbox.append(Envelope(self._local_id, destination, correlation_id, message))

    def respond(self, request: Envelope, message: m.Response) -> None:
        self._outbox.append(Envelope(self._local_id, request.source, request.correlation_id, message))

    def take_answered(self, response: Envelope) -> InFlight | None:
        """The request `response` answers, now settled; None when it answers nothing outstanding."""
        in_flight = self._in_flight.get(response.source)
        if in_flight is None or in_flight.correlation_id != response.correlation_id:
            return None
        del self._in_flight[response.source]
        return in_flight

    def expire(self, now_ms: int) -> None:
        """Give up requests unanswered for request.timeout.ms, so they can be sent again."""
        for destination, in_flight in list(self._in_flight.items()):
            if now_ms >= in_flight.sent_ms + self._request_timeout_ms:
                del self._in_flight[destination]

    def forget_all(self) -> None:
        """A new state: answers to the old state's requests are stale."""
        self._in_flight.clear()

    def next_expiry_ms(self) -> int | None:
        return min((f.sent_ms + self._request_timeout_ms for f in self._in_flight.values()), default=None)

    def drain(self) -> list[Envelope]:
        out, self._outbox = self._outbox, []
        return out
