"""The simulated clock, event queue and network: every source of time and nondeterminism in a run.

All randomness comes from one seeded `random.Random`, and events at the same time run in the order they
were scheduled (a sequence number breaks ties), so a seed always replays the same run.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass


class SimClock:
    """Milliseconds of simulated time; handed to the production cores as their injected clock."""

    def __init__(self) -> None:
        self.now_ms = 0

    def __call__(self) -> int:
        return self.now_ms


class EventQueue:
    """Timed callbacks, run in (time, scheduling order) order."""

    def __init__(self, clock: SimClock) -> None:
        self._clock = clock
        self._heap: list[tuple[int, int, Callable[[], None]]] = []
        self._sequence = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def at(self, time_ms: int, action: Callable[[], None]) -> None:
        assert time_ms >= self._clock.now_ms
        heapq.heappush(self._heap, (time_ms, next(self._sequence), action))

    def after(self, delay_ms: int, action: Callable[[], None]) -> None:
        self.at(self._clock.now_ms + delay_ms, action)

    def run_next(self) -> bool:
        """Advance the clock to the next event and run it; False when nothing is left."""
        if not self._heap:
            return False
        time_ms, _, action = heapq.heappop(self._heap)
        self._clock.now_ms = time_ms
        action()
        return True

    def next_time(self) -> int | None:
        return self._heap[0][0] if self._heap else None


@dataclass(slots=True)
class NetworkFaults:
    """How badly the network behaves; all zero is a perfect network (the heal phase)."""

    loss: float = 0.0
    duplication: float = 0.0
    max_delay_ms: int = 1  # delays are uniform in [1, max_delay_ms], so messages overtake each other

    def __post_init__(self) -> None:
        assert 0 <= self.loss < 1
        assert 0 <= self.duplication < 1
        assert self.max_delay_ms >= 1


class SimNetwork:
    """Point-to-point messages between named nodes, delivered by the event queue.

    A message is a callback run at the receiver at delivery time. It is lost when the link between the two
    nodes is cut, when the sender is down at send time or the receiver at delivery time, or by chance; it may be duplicated and
    delayed (hence reordered). Nodes are down while crashed.
    """

    def __init__(self, events: EventQueue, rng: random.Random, faults: NetworkFaults) -> None:
        self._events = events
        self._rng = rng
        self.faults = faults
        self._cut: set[frozenset[str]] = set()
        self._down: set[str] = set()
        self.sent = 0
        self.delivered = 0

    # ---------------------------------------------------------------- topology

    def cut(self, a: str, b: str) -> None:
        assert a != b
        self._cut.add(frozenset((a, b)))

    def heal(self, a: str, b: str) -> None:
        self._cut.discard(frozenset((a, b)))

    def heal_all(self) -> None:
        self._cut.clear()

    @property
    def cut_links(self) -> list[tuple[str, ...]]:
        return sorted(tuple(sorted(link)) for link in self._cut)

    def set_down(self, node: str, down: bool) -> None:
        if down:
            self._down.add(node)
        else:
            self._down.discard(node)

    def is_down(self, node: str) -> bool:
        return node in self._down

    def connected(self, a: str, b: str) -> bool:
        return a not in self._down and b not in self._down and frozenset((a, b)) not in self._cut

    # --------------------------------------------------------------- messages

    def send(self, source: str, target: str, deliver: Callable[[], None]) -> None:
        self.sent += 1
        if not self.connected(source, target) or self._rng.random() < self.faults.loss:
            return
        copies = 2 if self._rng.random() < self.faults.duplication else 1
        for _ in range(copies):
            delay = self._rng.randint(1, self.faults.max_delay_ms)
            self._events.after(delay, lambda: self._deliver(source, target, deliver))

    def _deliver(self, source: str, target: str, deliver: Callable[[], None]) -> None:
        # A link cut while the message was in flight, or a receiver that crashed meanwhile, loses it; a
        # sender that crashed meanwhile does not: what it sent is on the wire.
        if target in self._down or frozenset((source, target)) in self._cut:
            return
        self.delivered += 1
        deliver()
