"""The base of the broker's background tasks that talk to the controller (AlterPartition, the session), and
which controller they talk to.

Each owns one task and one connection to the controller, opened when first needed and again after it
failed. The loop ends on a stop flag rather than on cancellation alone: Python 3.11's asyncio.wait_for,
inside a request, can swallow a cancel that arrives as the request completes.

With several controllers in controller.quorum.bootstrap.servers (KIP-853), a ControllerFinder shared by
these clients picks the one to talk to: the same one until it cannot be reached or answers NOT_CONTROLLER
(a standby), then the next, round the list.
"""

import asyncio
import dataclasses
import logging
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from replog.client.connection import Connection
from replog.client.errors import KafkaError
from replog.protocol.messages import decode_response
from replog.protocol.primitives import DecodeError

log = logging.getLogger(__name__)


OpenConnection = Callable[[str, int, str], Awaitable[Connection]]  # (host, port, client id)


class ControllerFinder:
    """Which of the configured controllers the broker's clients talk to."""

    def __init__(self, addresses: Sequence[tuple[str, int]], open_connection: OpenConnection) -> None:
        assert addresses
        self._addresses = list(addresses)
        self._index = 0
        self._open = open_connection
        self._address_of: weakref.WeakKeyDictionary[Connection, tuple[str, int]] = weakref.WeakKeyDictionary()

    @property
    def current(self) -> tuple[str, int]:
        return self._addresses[self._index]

    def connector(self, client_id: str) -> Callable[[], Awaitable[Connection]]:
        """A connect() for a ControllerClient: to the current controller; a failure moves on to the next."""
        async def connect() -> Connection:
            address = self.current
            try:
                connection = await self._open(address[0], address[1], client_id)
            except (KafkaError, OSError):
                self._move_on_from(address)
                raise
            self._address_of[connection] = address
            return connection
        return connect

    def leads_to_current(self, connection: Connection) -> bool:
        """Whether `connection` goes to the controller the clients should talk to now."""
        return self._address_of.get(connection) == self.current

    def lost(self, connection: Connection) -> None:
        """`connection`'s controller failed a request or is not the active one: try the next from now on."""
        address = self._address_of.get(connection)
        if address is not None:
            self._move_on_from(address)

    def _move_on_from(self, address: tuple[str, int]) -> None:
        # Only the first client to notice moves on: the others' failures concern the same controller.
        if self.current == address and len(self._addresses) > 1:
            self._index = (self._index + 1) % len(self._addresses)
            log.info("controller %s:%d is not the active one; trying %s:%d", *address, *self.current)


class ControllerClient:
    def __init__(self, connect: Callable[[], Awaitable[Connection]], task_name: str) -> None:
        self._connect = connect
        self._task_name = task_name
        # Told when a connection's controller failed a request or answered NOT_CONTROLLER (ControllerFinder.lost).
        self.on_controller_lost: Callable[[Connection], None] = lambda connection: None
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
        connection = self._connection
        try:
            response = await connection.send(api_key, body, version=version)
        except (KafkaError, OSError):
            self.on_controller_lost(connection)
            raise
        if getattr(response, "error_code", None) == ErrorCode.not_controller:
            self.on_controller_lost(connection)  # a standby: the next request goes to the next controller
            self._drop_connection()
        return response

    def _drop_connection(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def answers_not_controller(api_key: int, version: int, body: bytes) -> bool:
    """Whether a controller's answer to a forwarded request says NOT_CONTROLLER anywhere in it (a standby)."""
    try:
        response = decode_response(api_key, version, body, 0)
    except DecodeError:
        return False  # relayed as it is: the client sees what the controller sent
    return ErrorCode.not_controller in _error_codes(response)


def _error_codes(entity: Any) -> set[int]:
    if isinstance(entity, tuple):
        return set().union(*(_error_codes(item) for item in entity))
    if not dataclasses.is_dataclass(entity):
        return set()
    codes = set()
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        codes |= {int(value)} if f.name == "error_code" else _error_codes(value)
    return codes


def _report_crash(task: asyncio.Task) -> None:
    # A bug that ends the loop must not pass in silence: ISR changes or heartbeats would simply stop.
    if not task.cancelled() and task.exception() is not None:
        log.error("%s crashed", task.get_name(), exc_info=task.exception())
