"""A bounded queue of deadlines: the one timer structure behind a purgatory's expirations.

Kafka keeps delayed operations in a hierarchical timing wheel (facts §5). In Python a binary heap gives the
same properties with less machinery: O(log n) add, expired entries come out in deadline order, and cancel
only marks an entry, in O(1). A marked entry is dropped later, once: by a pop when it reaches the top, or by
a rebuild of the heap when marked entries outnumber live ones, so the heap never holds more than twice the
live entries.

Sans-IO: no clock and no event loop inside. The caller passes now_ms and decides when to call pop_expired.
"""

import heapq
import itertools
from typing import Any


class DeadlineQueueFull(RuntimeError):
    """Adding past max_size: the owner was supposed to refuse the work before getting here."""


class DeadlineEntry:
    """The handle add returns: pass it to cancel. Active until it is cancelled or popped as expired."""

    __slots__ = ("deadline_ms", "item", "active")

    def __init__(self, deadline_ms: int, item: Any) -> None:
        self.deadline_ms = deadline_ms
        self.item = item
        self.active = True


class DeadlineQueue:
    def __init__(self, max_size: int) -> None:
        assert max_size > 0
        self.max_size = max_size
        # (deadline_ms, sequence, entry): the sequence breaks ties by insertion order; entries never compare.
        self._heap: list[tuple[int, int, DeadlineEntry]] = []
        self._sequence = itertools.count()
        self._live = 0
        self._cancelled = 0  # inactive entries still in the heap

    def __len__(self) -> int:
        """Live entries only."""
        return self._live

    @property
    def stored(self) -> int:
        """Entries the heap holds, cancelled ones not yet dropped included; at most 2 * len(self)."""
        return len(self._heap)

    def add(self, deadline_ms: int, item: Any) -> DeadlineEntry:
        if self._live >= self.max_size:
            raise DeadlineQueueFull(f"{self._live} live entries, max_size {self.max_size}")
        entry = DeadlineEntry(deadline_ms, item)
        heapq.heappush(self._heap, (deadline_ms, next(self._sequence), entry))
        self._live += 1
        return entry

    def cancel(self, entry: DeadlineEntry) -> bool:
        """False if the entry was already cancelled or popped as expired."""
        if not entry.active:
            return False
        entry.active = False
        entry.item = None  # let the item go now, not when the heap drops the entry
        self._live -= 1
        self._cancelled += 1
        self._drop_cancelled()
        return True

    def next_deadline(self) -> int | None:
        """The earliest live deadline; None when empty."""
        return self._heap[0][0] if self._heap else None

    def pop_expired(self, now_ms: int) -> list[Any]:
        """Remove and return the items whose deadline is at or before now_ms, earliest first."""
        expired = []
        while self._heap and self._heap[0][0] <= now_ms:
            entry = heapq.heappop(self._heap)[2]
            entry.active = False
            self._live -= 1
            expired.append(entry.item)
            self._drop_cancelled()
        return expired

    def live_items(self) -> list[Any]:
        """A snapshot of the live items, in no particular order."""
        return [entry.item for _, _, entry in self._heap if entry.active]

    def _drop_cancelled(self) -> None:
        # Keeps the top live (so next_deadline is exact) and cancelled entries at most half the heap (so
        # memory follows the live count). A rebuild removes more than half the heap, which pays for it.
        while self._heap and not self._heap[0][2].active:
            heapq.heappop(self._heap)
            self._cancelled -= 1
        if 2 * self._cancelled > len(self._heap):
            self._heap = [slot for slot in self._heap if slot[2].active]
            heapq.heapify(self._heap)
            self._cancelled = 0
        assert 0 <= self._live <= self.max_size
        assert len(self._heap) == self._live + self._cancelled <= 2 * self._live


class KeyedDeadlines:
    """Deadlines by key, over a DeadlineQueue: setting a key's deadline again cancels the earlier one, so at
    most one entry per key is live. The group coordinator's timers (a member's session, a rebalance) are
    values with a key and are replaced this way as members heartbeat and join."""

    def __init__(self, max_size: int) -> None:
        self._queue = DeadlineQueue(max_size)
        self._entries: dict[Any, DeadlineEntry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Any) -> bool:
        return key in self._entries

    def set(self, key: Any, deadline_ms: int, item: Any) -> None:
        self.cancel(key)
        self._entries[key] = self._queue.add(deadline_ms, (key, item))

    def cancel(self, key: Any) -> bool:
        entry = self._entries.pop(key, None)
        return entry is not None and self._queue.cancel(entry)

    def next_deadline(self) -> int | None:
        return self._queue.next_deadline()

    def pop_expired(self, now_ms: int) -> list[Any]:
        """The due items, earliest first; their keys are free again."""
        items = []
        for key, item in self._queue.pop_expired(now_ms):
            del self._entries[key]
            items.append(item)
        assert len(self._entries) == len(self._queue)
        return items

    def clear(self) -> None:
        for key in list(self._entries):
            self.cancel(key)
