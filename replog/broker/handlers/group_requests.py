"""What the group APIs' handlers share: a request id and a parked future for each request the coordinator
answers (maybe later: a JoinGroup waits for the rebalance), and the client's host as Kafka reports it."""

import asyncio
from collections.abc import Callable

from replog.coordinator.outcomes import Outcome, Reply
from replog.server.dispatch import RequestContext

from ..group_coordinator import GroupCoordinatorShell


def submit(shell: GroupCoordinatorShell, call: Callable[[int], Outcome]) -> asyncio.Future[Reply]:
    """Hand `call` a fresh request id, carry out its Outcome; the future completes with the reply."""
    request_id, future = shell.new_request()
    shell.apply(call(request_id))
    return future


def client_host(ctx: RequestContext) -> str:
    """Kafka's member client host: the peer address with a leading slash (InetAddress.toString)."""
    return "/" + ctx.peer.rsplit(":", 1)[0]
