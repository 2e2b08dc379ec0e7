"""The base of the broker's background tasks that talk to the controller (AlterPartition, the session).

Each owns one task and one connection to the controller, opened when first needed and again after it
failed. The loop ends on a stop flag rather than on cancellation alone: Python 3.11's asyncio.wait_for,
inside a request, can swallow a cancel that arrives as the request completes.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from replog.client.connection import Connection

log = logging.getLogger(__name__)


class ControllerClient:
    def __init__(self, connect: Callable[[], Awaitable[Connection]], task_name: str) -> None:
        self._connect = connect
        self._task_name = task_name
        self._connection: Connection | None = None
        self._task: asyncio.Task | None = None
        self._stopping = False
        self._wake = asyncio.Event()  # set to make the loop look at its work now

    def start(self) -> None:
        assert self._task is None
        self._task = asyncio.create_task(self._run(), name=self._task_name)
        self._task.add_done_callback(_report_crash)

    async def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._drop_connection()

    async def _run(self) -> None:
        raise NotImplementedError  # each subclass's loop; it must end once self._stopping is set

    async def _send(self, api_key: int, body: dict, version: int) -> Any:
        """One request to the controller, connecting first if needed; raises KafkaError or OSError."""
        if self._connection is None or self._connection.closed:
            self._connection = await self._connect()
        return await self._connection.send(api_key, body, version=version)

    def _drop_connection(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def _report_crash(task: asyncio.Task) -> None:
    # A bug that ends the loop must not pass in silence: ISR changes or heartbeats would simply stop.
    if not task.cancelled() and task.exception() is not None:
        log.error("%s crashed", task.get_name(), exc_info=task.exception())
