"""An Executor for tests of work handed to a worker thread: a submitted call runs only when the test says
(run_all), or when its result is waited for, as a worker thread finishing while the caller waits would."""

from __future__ import annotations

from concurrent.futures import Executor, Future


class DeferredFuture(Future):
    def __init__(self, call, args, *, started: bool) -> None:
        super().__init__()
        self._call = call
        self._args = args
        if started:
            self.set_running_or_notify_cancel()  # as a worker thread that picked it up: cancel() now fails

    def run(self) -> None:
        if self.done():
            return  # cancelled, or run already
        if not self.running() and not self.set_running_or_notify_cancel():
            return
        try:
            result = self._call(*self._args)
        except BaseException as error:  # noqa: BLE001 - handed to the waiter, as a worker thread does
            self.set_exception(error)
        else:
            self.set_result(result)

    def result(self, timeout=None):
        self.run()
        return super().result(timeout)


class DeferredExecutor(Executor):
    """`started`: each call counts as picked up by the worker at once (it cannot be cancelled)."""

    def __init__(self, *, started: bool = False) -> None:
        self.submitted: list[DeferredFuture] = []
        self._started = started

    def submit(self, fn, /, *args, **kwargs) -> DeferredFuture:
        assert not kwargs
        future = DeferredFuture(fn, args, started=self._started)
        self.submitted.append(future)
        return future

    def run_all(self) -> None:
        for future in self.submitted:
            future.run()
