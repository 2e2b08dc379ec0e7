"""Rebalance callbacks of the bundled consumer, as Kafka's ConsumerRebalanceListener (kafka-python and aiokafka
use the same names): on_partitions_revoked before the member rejoins, and on close, while it still belongs to
its generation, so a commit made there is accepted; on_partitions_assigned after SyncGroup, once the
committed offsets are the positions, so a seek made there wins. The classic protocol is eager: every
partition is revoked, then the new assignment handed out.

A callback may be a plain function or a coroutine function. As in Kafka's consumer, an exception from a
callback does not stop the rebalance: it is logged and raised from the poll that ran it, once the member
has its new assignment.
"""

import inspect
import logging
from collections.abc import Awaitable

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class ConsumerRebalanceListener:
    """Subclass and override either method; both do nothing here."""

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> Awaitable[None] | None:
        """The partitions this member gives up: commit what was processed of them here."""

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> Awaitable[None] | None:
        """The member's partitions for the new generation (possibly none)."""


async def call_listener(callback, partitions: set[TopicPartition], what: str) -> BaseException | None:
    """Run one callback; the exception it raised (logged), or None."""
    try:
        result = callback(set(partitions))
        if inspect.isawaitable(result):
            await result
    except Exception as e:  # the listener is user code: the rebalance goes on, the poll raises it afterwards
        log.exception("rebalance listener %s failed", what)
        return e
    return None
