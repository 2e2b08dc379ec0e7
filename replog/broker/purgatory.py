"""Delayed operations (Kafka's purgatory): requests that wait for a condition or a timeout.

An operation completes exactly once: by its condition (try_complete), by force, or by expiry. Waking is
event-driven: whoever changes a partition (append, high-watermark move, leadership change) calls
check_and_complete(key) for it. Kafka's try / watch / try-again dance is not needed on one event loop:
try_complete_else_watch runs without suspending, so no wake-up can slip in between.

Expirations live in one bounded DeadlineQueue per purgatory, served by one event-loop timer armed for the
earliest deadline, instead of one loop timer per operation.
"""

import asyncio
import logging
import time
from collections.abc import Callable, Hashable, Iterable

from .timer import DeadlineEntry, DeadlineQueue

log = logging.getLogger(__name__)


class DelayedOperation:
    def __init__(self, timeout_ms: int) -> None:
        assert timeout_ms >= 0
        self.timeout_ms = timeout_ms
        self.completed = False
        self.keys: tuple[Hashable, ...] = ()
        self._expiration: DeadlineEntry | None = None
        self._purgatory: Purgatory | None = None

    def try_complete(self) -> bool:
        """Check the completion condition; if it holds, call force_complete and return True."""
        raise NotImplementedError

    def try_complete_for(self, key: Hashable) -> bool:
        """try_complete after a change to `key`, one of its keys: an operation over many keys may look at
        that one first."""
        return self.try_complete()

    def on_complete(self) -> None:
        """Produce the result; runs exactly once, whatever completed the operation."""
        raise NotImplementedError

    def on_expiration(self) -> None:
        """Hook for expiry bookkeeping (metrics); on_complete still runs after it."""

    def force_complete(self) -> bool:
        if self.completed:
            return False
        self.completed = True
        if self._purgatory is not None:
            self._purgatory._unwatch(self)
        self.on_complete()
        return True


def monotonic_ms() -> int:
    """The deadlines' clock. Not the loop's time: asyncio.get_running_loop() makes a getpid system call on every
    call, and every parked request reads the clock (docs/profiles/rf3-produce-path.md). The loop
    timer is armed with a delay, so the two clocks need not agree, and a timer that fires early is handled."""
    return time.monotonic_ns() // 1_000_000


class Purgatory:
    def __init__(self, name: str, max_size: int, *, clock_ms: Callable[[], int] = monotonic_ms) -> None:
        assert max_size > 0
        self.name = name
        self.max_size = max_size
        self._clock_ms = clock_ms
        self._watchers: dict[Hashable, set[DelayedOperation]] = {}
        self._count = 0
        self._expirations = DeadlineQueue(max_size)
        # The one loop timer: armed while any operation waits, never later than the earliest deadline.
        self._wakeup: asyncio.TimerHandle | None = None
        self._wakeup_deadline_ms: int | None = None
        self.expired_total = 0

    @property
    def size(self) -> int:
        return self._count

    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> bool:
        """True if op completed at once; otherwise it waits for a key's check or its timeout."""
        assert not op.completed
        assert op._purgatory is None
        if op.try_complete():
            return True
        if self._count >= self.max_size:
            # Full: answer now with what there is rather than grow without bound.
            op.force_complete()
            return True
        op._expiration = self._expirations.add(self._clock_ms() + op.timeout_ms, op)
        op.keys = tuple(keys)
        op._purgatory = self
        for key in op.keys:
            self._watchers.setdefault(key, set()).add(op)
        self._count += 1
        self._check_counts()
        self._arm()
        return False

    def watch(self, op: DelayedOperation, key: Hashable) -> None:
        """A waiting operation watches one more key (a fetch taking in a partition of its session)."""
        if op.completed or op._purgatory is not self or key in op.keys:
            return
        op.keys += (key,)
        self._watchers.setdefault(key, set()).add(op)

    def check_and_complete(self, key: Hashable) -> int:
        """Try every operation watching key; returns how many completed."""
        watchers = self._watchers.get(key)
        if not watchers:
            return 0
        completed = 0
        for op in list(watchers):
            if not op.completed:
                completed += op.try_complete_for(key)
        return completed

    def complete_all(self) -> None:
        """Shutdown: answer everything that is waiting, and cancel the loop timer."""
        for op in self._expirations.live_items():
            op.force_complete()
        self._disarm()
        assert self._count == 0 and not self._expirations and self._wakeup is None

    def _arm(self) -> None:
        # Re-arm only when the earliest deadline moved earlier. When it moves later (the earliest operation
        # completed), the old timer firing early costs one empty wake-up, less than re-arming on every
        # early completion.
        deadline_ms = self._expirations.next_deadline()
        if deadline_ms is None:
            return
        if self._wakeup_deadline_ms is not None and self._wakeup_deadline_ms <= deadline_ms:
            return
        self._disarm()
        delay_ms = max(0, deadline_ms - self._clock_ms())
        self._wakeup = asyncio.get_running_loop().call_later(delay_ms / 1000, self._on_wakeup)
        self._wakeup_deadline_ms = deadline_ms

    def _disarm(self) -> None:
        if self._wakeup is not None:
            self._wakeup.cancel()
        self._wakeup = None
        self._wakeup_deadline_ms = None

    def _on_wakeup(self) -> None:
        # The loop may run a timer a little before its clock reads the deadline it was armed for; that
        # deadline has come all the same, or the timer would re-arm for it and spin.
        assert self._wakeup_deadline_ms is not None
        now_ms = max(self._clock_ms(), self._wakeup_deadline_ms)
        self._wakeup = None
        self._wakeup_deadline_ms = None
        for op in self._expirations.pop_expired(now_ms):
            # An earlier expiry's on_complete may have completed this one already.
            if op.completed:
                continue
            self.expired_total += 1
            try:
                try:
                    op.on_expiration()
                finally:
                    op.force_complete()
            except Exception:
                # One failing operation must not leave the rest of the batch unanswered.
                log.exception("%s purgatory: expiring %r failed", self.name, op)
        # Every popped operation is now complete, so each waiting operation has its expiration again.
        assert len(self._expirations) == self._count
        self._arm()

    def _unwatch(self, op: DelayedOperation) -> None:
        for key in op.keys:
            watchers = self._watchers.get(key)
            if watchers is not None:
                watchers.discard(op)
                if not watchers:
                    del self._watchers[key]
        self._count -= 1
        assert self._count >= 0
        # Completed early: drop its expiration. Expired: pop_expired already removed it.
        self._expirations.cancel(op._expiration)
        op._expiration = None
        self._check_counts()
        # An emptied purgatory keeps its timer too: it fires once, finds nothing, and is not re-armed. An acks=all
        # produce empties the produce purgatory each time it completes; the next one's later deadline then needs
        # no new loop timer, where disarming here cost a call_later and a cancel per request.

    def _check_counts(self) -> None:
        # Every waiting operation has one live expiration, except those an expiry batch has popped and not
        # yet completed; hence <=, and == once a batch is done (_on_wakeup).
        assert 0 <= len(self._expirations) <= self._count <= self.max_size
