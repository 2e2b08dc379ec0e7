"""A result that a later event supplies, passed through synchronous steps: Kafka's response callbacks.

A delayed request (an acks=all Produce, a parked Fetch) is answered when a purgatory completes it. Awaited by
a coroutine, its answer left two event-loop turns after that: one for the awaiting task to wake and encode it,
one more for the connection to hear that the task had ended; and each turn first serves whatever I/O is
ready, on a busy broker other requests. A Completion runs the steps queued on it (the handler's encoding, the
dispatcher's framing) inside the call that completes it, as Kafka's DelayedProduce.onComplete calls its
responseCallback, then tells its one listener (the connection, which writes the answer in that same call) and
resolves the asyncio future of anyone awaiting it (docs/profiles/rf3.md, "loop turns").

Steps are queued before anyone waits on the result, so they are never skipped; a step that raises fails
the completion with that error, and the later steps do not run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator
from typing import Any

_PENDING = object()


class Completion:
    """Future-like (done, result, add_done_callback, await) for its consumers; set_result for its producer."""

    __slots__ = ("_steps", "_value", "_error", "_future", "_listener")

    def __init__(self) -> None:
        self._steps: list[Callable[[Any], Any]] = []
        self._value: Any = _PENDING
        self._error: BaseException | None = None
        self._future: asyncio.Future | None = None
        self._listener: Callable[[Completion], None] | None = None

    def then(self, step: Callable[[Any], Any]) -> Completion:
        """Apply `step` to the value in the call that supplies it (at once if it is already here)."""
        assert self._future is None and self._listener is None, "steps are queued before anyone waits on the result"
        self._steps.append(step)
        if self.done():
            self._run_steps()
        return self

    def set_result(self, value: Any) -> bool:
        """Supply the value and run the steps now; False if it was already supplied (the first one stands)."""
        if self.done():
            return False
        self._value = value
        self._run_steps()
        return True

    def done(self) -> bool:
        return self._value is not _PENDING or self._error is not None

    def result(self) -> Any:
        if self._error is not None:
            raise self._error
        if self._value is _PENDING:
            raise asyncio.InvalidStateError("the result is not here yet")
        return self._value

    def future(self) -> asyncio.Future:
        """The asyncio future of the final value (after every step), made on first use."""
        if self._future is None:
            self._future = asyncio.get_running_loop().create_future()
            self._resolve()
        return self._future

    def on_done(self, listener: Callable[[Completion], None]) -> None:
        """Call `listener(self)` once the final value or error is here: in the call that supplies it, after the
        steps (at once if it is already here); no event-loop turn in between. One listener per completion:
        whoever answers the request. It runs inside someone else's call (an append, a follower's fetch), so it
        must not raise."""
        assert self._listener is None, "a completion has one listener"
        self._listener = listener
        if self.done():
            listener(self)

    def add_done_callback(self, callback: Callable[[asyncio.Future], None]) -> None:
        self.future().add_done_callback(callback)

    def __await__(self) -> Generator[Any, None, Any]:
        return self.future().__await__()

    def _run_steps(self) -> None:
        while self._steps and self._error is None:
            step = self._steps.pop(0)
            try:
                self._value = step(self._value)
            except Exception as error:  # the request fails, not whoever completed it (another request's call)
                self._value, self._error = _PENDING, error
        if self._listener is not None:
            self._listener(self)
        self._resolve()

    def _resolve(self) -> None:
        future = self._future
        if future is None or future.done() or not self.done():
            return  # a cancelled future: its connection closed, nobody reads the answer
        if self._error is not None:
            future.set_exception(self._error)
        else:
            future.set_result(self._value)
