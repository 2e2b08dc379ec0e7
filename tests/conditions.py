"""Waiting on a condition with a deadline, the one way tests let time pass (never a guessed fixed sleep)."""

import asyncio
from collections.abc import Callable

POLL_INTERVAL_S = 0.002  # between checks; the event loop runs the code under test in between


async def wait_until(condition: Callable[[], bool], what: str = "condition", timeout_s: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(POLL_INTERVAL_S)
