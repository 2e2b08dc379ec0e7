"""Where a follower fetcher's appends are written: in the fetcher's own writer thread, or inline.

A broker runs all its fetchers (one per leader) on one event loop. Written there, one fetcher's 1 MB append
holds up every other fetcher's answer; written in a thread per fetcher (os.write releases the GIL), the loop
receives and validates the next answer meanwhile, and with two leaders the chains use both cores. The append
keeps its meaning (replog/log/follower_append.py): placed and published on the loop, only the write moves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, Future, ThreadPoolExecutor

from replog.log.follower_append import FollowerAppend


class InlineExecutor(Executor):
    """Runs each task at once in the caller's thread: the write on the event loop (a fetcher not given a
    thread, as the deterministic simulation steps them)."""

    def submit(self, fn: Callable, /, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - the future carries it to whoever waits
            future.set_exception(exc)
        return future


def append_writer(name: str | None) -> Executor:
    """One writer thread named `name` (one worker: a fetcher's writes run in the order they were begun), or
    inline writes for None."""
    if name is None:
        return InlineExecutor()
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)


async def wait_for_writes(appends: Iterable[FollowerAppend]) -> None:
    """Until every write is done; never raises their errors (finishing an append reports them). Does not
    await when all are done already, so that rounds with inline writes never yield for them."""
    running = [append.written for append in appends if not append.written.done()]
    if running:
        # asyncio.wait does not cancel what it waits for when it is cancelled itself: a write, once begun, is
        # always completed (and settled by its log).
        await asyncio.wait([asyncio.wrap_future(future) for future in running])
