"""Delayed operations (Kafka's purgatory): requests that wait for a condition or a timeout.

An operation completes exactly once: by its condition (try_complete), by force, or by expiry. Waking is
event-driven: whoever changes a partition (append, high-watermark move, leadership change) calls
check_and_complete(key) for it. Kafka's try / watch / try-again dance is not needed on one event loop:
try_complete_else_watch runs without suspending, so no wake-up can slip in between.
"""

import asyncio
from collections.abc import Hashable, Iterable


class DelayedOperation:
    def __init__(self, timeout_ms: int) -> None:
        assert timeout_ms >= 0
        self.timeout_ms = timeout_ms
        self.completed = False
        self.keys: tuple[Hashable, ...] = ()
        self._timer: asyncio.TimerHandle | None = None
        self._purgatory: Purgatory | None = None

    def try_complete(self) -> bool:
        """Check the completion condition; if it holds, call force_complete and return True."""
        raise NotImplementedError

    def on_complete(self) -> None:
        """Produce the result; runs exactly once, whatever completed the operation."""
        raise NotImplementedError

    def on_expiration(self) -> None:
        """Hook for expiry bookkeeping (metrics); on_complete still runs after it."""

    def force_complete(self) -> bool:
        if self.completed:
            return False
        self.completed = True
        if self._timer is not None:
            self._timer.cancel()
        if self._purgatory is not None:
            self._purgatory._unwatch(self)
        self.on_complete()
        return True

    def _expire(self) -> None:
        self._timer = None
        if not self.completed:
            self.on_expiration()
            self.force_complete()


class Purgatory:
    def __init__(self, name: str, max_size: int) -> None:
        assert max_size > 0
        self.name = name
        self.max_size = max_size
        self._watchers: dict[Hashable, set[DelayedOperation]] = {}
        self._count = 0
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
        op.keys = tuple(keys)
        op._purgatory = self
        for key in op.keys:
            self._watchers.setdefault(key, set()).add(op)
        self._count += 1
        op._timer = asyncio.get_running_loop().call_later(op.timeout_ms / 1000, self._on_timeout, op)
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Try every operation watching key; returns how many completed."""
        watchers = self._watchers.get(key)
        if not watchers:
            return 0
        return sum(1 for op in list(watchers) if not op.completed and op.try_complete())

    def complete_all(self) -> None:
        """Shutdown: answer everything that is waiting."""
        for watchers in list(self._watchers.values()):
            for op in list(watchers):
                op.force_complete()

    def _on_timeout(self, op: DelayedOperation) -> None:
        if not op.completed:
            self.expired_total += 1
        op._expire()

    def _unwatch(self, op: DelayedOperation) -> None:
        for key in op.keys:
            watchers = self._watchers.get(key)
            if watchers is not None:
                watchers.discard(op)
                if not watchers:
                    del self._watchers[key]
        self._count -= 1
        assert self._count >= 0
