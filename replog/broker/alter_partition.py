"""Sends partition leaders' ISR changes to the controller as AlterPartition requests (KIP-497).

Like Kafka's DefaultAlterPartitionManager: one request in flight at a time, carrying every change queued
meanwhile; a change whose partition moved on (its pending change was replaced by a LeaderAndIsr) is not sent;
network failures and a controller that is not ready are retried after a back-off, and every other answer
goes back to the partition, which commits or reverts.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable

from kio.schema.errors import ErrorCode

from replog.client.connection import Connection
from replog.client.errors import KafkaError
from replog.protocol.apis import ApiKey

from .controller_client import ControllerClient
from .partition import Partition, PendingIsrChange

log = logging.getLogger(__name__)

ALTER_PARTITION_VERSION = 2  # NewIsr as plain broker ids; v3 adds broker epochs (KIP-903)
RETRY_WHOLE_REQUEST = frozenset({ErrorCode.not_controller, ErrorCode.request_timed_out,
                                 ErrorCode.network_exception})

Answer = Callable[..., None]  # (partition, change, error, *, leader_epoch, isr, partition_epoch)


class AlterPartitionManager(ControllerClient):
    def __init__(self, broker_id: int, connect: Callable[[], Awaitable[Connection]], on_answer: Answer, *,
                 retry_backoff_ms: int = 100, broker_epoch: Callable[[], int] = lambda: -1) -> None:
        super().__init__(connect, "alter-partition-manager")
        self._broker_id = broker_id
        self._on_answer = on_answer
        self._retry_backoff_ms = retry_backoff_ms
        self._broker_epoch = broker_epoch
        self._queued: dict[tuple[str, int], tuple[Partition, PendingIsrChange]] = {}

    def submit(self, partition: Partition, change: PendingIsrChange) -> None:
        """Called by a partition proposing `change`; a newer proposal for the same partition replaces it."""
        self._queued[partition.key] = (partition, change)
        self._wake.set()

    async def _run(self) -> None:
        while not self._stopping:
            await self._wake.wait()
            self._wake.clear()
            batch = {key: item for key, item in self._queued.items() if item[0].pending_isr is item[1]}
            self._queued.clear()
            if batch and not await self._send_batch(batch):
                for key, item in batch.items():
                    self._queued.setdefault(key, item)
                self._wake.set()
                await asyncio.sleep(self._retry_backoff_ms / 1000)

    async def _send_batch(self, batch: dict[tuple[str, int], tuple[Partition, PendingIsrChange]]) -> bool:
        """Send one request; False if it must be retried as a whole."""
        topics: dict = {}
        for partition, change in batch.values():
            topics.setdefault(partition.topic_id, []).append({
                "partition_index": partition.index, "leader_epoch": change.leader_epoch,
                "new_isr": list(change.proposed_isr), "leader_recovery_state": 0,
                "partition_epoch": change.partition_epoch,
            })
        request = {"broker_id": self._broker_id, "broker_epoch": self._broker_epoch(),
                   "topics": [{"topic_id": topic_id, "partitions": ps} for topic_id, ps in topics.items()]}
        try:
            response = await self._send(ApiKey.ALTER_PARTITION, request, ALTER_PARTITION_VERSION)
        except (KafkaError, OSError) as e:
            log.warning("AlterPartition to the controller failed, will retry: %s", e)
            return False
        if response.error_code in RETRY_WHOLE_REQUEST:
            log.warning("controller answered AlterPartition with %s, will retry", response.error_code.name)
            return False
        by_id = {(p.topic_id, p.index): (p, c) for p, c in batch.values()}
        for topic in response.topics:
            for answer in topic.partitions:
                item = by_id.pop((topic.topic_id, answer.partition_index), None)
                if item is None:
                    continue
                error = response.error_code if response.error_code != ErrorCode.none else answer.error_code
                self._on_answer(item[0], item[1], error, leader_epoch=answer.leader_epoch,
                                isr=tuple(answer.isr), partition_epoch=answer.partition_epoch)
        for partition, change in by_id.values():
            # The controller left it out of its answer: revert, and the next check proposes it again.
            self._on_answer(partition, change, response.error_code or ErrorCode.unknown_server_error)
        return True
