"""Which fetcher follows which partition (Kafka's AbstractFetcherManager / ReplicaFetcherManager).

Partitions are grouped by (leader broker id, fetcher id), one ReplicaFetcher per group, so one leader gets
`num_fetchers` connections at most. A fetcher left without partitions is stopped.

add_partitions and remove_partitions are synchronous on purpose: the replica manager changes leadership and
fetch assignments in one step with no await between them, so no fetch response can be applied to a log that
is meanwhile leading. Stopping a retired fetcher (closing its connection) finishes in the background.
"""

from __future__ import annotations

import asyncio
import dataclasses
import zlib
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import NamedTuple

from replog.fetcher.config import FetcherConfig, FetchObserver, InitialFetchState, LeaderInfo
from replog.fetcher.fetch_state import PartitionFetchState
from replog.fetcher.leader_endpoint import LeaderEndpoint
from replog.fetcher.replica_fetcher import ReplicaFetcher
from replog.fetcher.replication_quota import ReplicationQuota
from replog.log.partition_log import TopicPartition

__all__ = [
    "FetcherConfig",
    "FetcherKey",
    "InitialFetchState",
    "LeaderInfo",
    "ReplicaFetcherManager",
]

EndpointFactory = Callable[[LeaderInfo, int], LeaderEndpoint]


class FetcherKey(NamedTuple):
    leader_id: int
    fetcher_id: int


class ReplicaFetcherManager:
    def __init__(
        self,
        config: FetcherConfig,
        endpoint_factory: EndpointFactory,
        clock_ms: Callable[[], int],
        on_fetched: FetchObserver | None = None,
        quota: ReplicationQuota | None = None,
    ) -> None:
        """quota: the follower-side replication throttle every fetcher applies (None: no throttle)."""
        self._config = config
        self._quota = quota
        self._on_fetched = on_fetched
        self._endpoint_factory = endpoint_factory
        self._clock_ms = clock_ms
        self._fetchers: dict[FetcherKey, ReplicaFetcher] = {}
        self._fetcher_leaders: dict[FetcherKey, LeaderInfo] = {}
        self._assigned: dict[TopicPartition, tuple[FetcherKey, InitialFetchState]] = {}
        # Failures recorded by fetchers that have since been stopped.
        self._failed: set[TopicPartition] = set()
        self._stopping: set[asyncio.Task] = set()

    def fetcher_id(self, tp: TopicPartition) -> int:
        """Stable across processes (Python's str hash is salted per process), like Kafka's getFetcherId."""
        digest = zlib.crc32(tp.partition.to_bytes(4, "big", signed=True), zlib.crc32(tp.topic.encode()))
        return digest % self._config.num_fetchers

    @property
    def fetchers(self) -> Mapping[FetcherKey, ReplicaFetcher]:
        return MappingProxyType(self._fetchers)

    @property
    def failed_partitions(self) -> frozenset[TopicPartition]:
        failed = set(self._failed)
        for fetcher in self._fetchers.values():
            failed |= fetcher.failed_partitions
        return frozenset(failed)

    def fetch_state(self, tp: TopicPartition) -> PartitionFetchState | None:
        assigned = self._assigned.get(tp)
        if assigned is None:
            return None
        fetcher = self._fetchers.get(assigned[0])
        return None if fetcher is None else fetcher.fetch_state(tp)

    def add_partitions(self, partitions: dict[TopicPartition, InitialFetchState]) -> None:
        """Follow these partitions (Kafka's addFetcherForPartitions). A partition whose leader changed moves to
        the right fetcher; one re-added at a new leader epoch starts over from its initial state."""
        retired: list[ReplicaFetcher] = []
        groups: dict[FetcherKey, dict[TopicPartition, InitialFetchState]] = {}
        for tp, initial in partitions.items():
            groups.setdefault(FetcherKey(initial.leader.broker_id, self.fetcher_id(tp)), {})[tp] = initial
        for key, group in groups.items():
            leaders = {initial.leader for initial in group.values()}
            assert len(leaders) == 1, f"broker {key.leader_id} given at several addresses: {leaders}"
            fetcher = self._fetcher_for(key, leaders.pop(), group, retired)
            for tp, initial in group.items():
                self._move_out(tp, key)
                self._assigned[tp] = (key, initial)
                self._failed.discard(tp)
            fetcher.add_partitions(group)
        retired += self._retire_idle()
        self._stop_in_background(retired)

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, PartitionFetchState]:
        """Stop following these partitions; returns the fetch states they had."""
        removed: dict[TopicPartition, PartitionFetchState] = {}
        for tp in tps:
            assigned = self._assigned.pop(tp, None)
            self._failed.discard(tp)
            if assigned is not None and assigned[0] in self._fetchers:
                removed.update(self._fetchers[assigned[0]].remove_partitions([tp]))
        self._stop_in_background(self._retire_idle())
        return removed

    async def settle(self) -> None:
        """Wait until every retired fetcher has stopped (raising the first error a fetcher loop died of)."""
        while self._stopping:
            await asyncio.gather(*list(self._stopping))

    async def shutdown(self) -> None:
        fetchers = list(self._fetchers.values())
        self._fetchers.clear()
        self._fetcher_leaders.clear()
        self._assigned.clear()
        self._stop_in_background(fetchers)
        await self.settle()

    def _fetcher_for(
        self,
        key: FetcherKey,
        leader: LeaderInfo,
        adding: dict[TopicPartition, InitialFetchState],
        retired: list[ReplicaFetcher],
    ) -> ReplicaFetcher:
        fetcher = self._fetchers.get(key)
        if fetcher is not None and self._fetcher_leaders[key] == leader:
            return fetcher
        if fetcher is not None:
            # The leader broker moved to another address: like Kafka, replace its fetcher. Partitions already
            # on it join `adding` and start over from their initial state against the new address.
            retired.append(self._fetchers.pop(key))
            self._failed |= fetcher.failed_partitions
            for tp, (assigned_key, initial) in self._assigned.items():
                if assigned_key == key and tp not in adding and tp not in fetcher.failed_partitions:
                    adding[tp] = dataclasses.replace(initial, leader=leader)
        fetcher = ReplicaFetcher(
            key.leader_id,
            key.fetcher_id,
            self._endpoint_factory(leader, key.fetcher_id),
            self._config,
            self._clock_ms,
            self._on_fetched,
            self._quota,
        )
        self._fetchers[key] = fetcher
        self._fetcher_leaders[key] = leader
        fetcher.start()
        return fetcher

    def _move_out(self, tp: TopicPartition, key: FetcherKey) -> None:
        assigned = self._assigned.get(tp)
        if assigned is not None and assigned[0] != key and assigned[0] in self._fetchers:
            self._fetchers[assigned[0]].remove_partitions([tp])

    def _retire_idle(self) -> list[ReplicaFetcher]:
        idle = [key for key, fetcher in self._fetchers.items() if fetcher.partition_count == 0]
        retired = []
        for key in idle:
            fetcher = self._fetchers.pop(key)
            del self._fetcher_leaders[key]
            self._failed |= fetcher.failed_partitions
            retired.append(fetcher)
        return retired

    def _stop_in_background(self, fetchers: list[ReplicaFetcher]) -> None:
        if fetchers:
            task = asyncio.ensure_future(self._stop_all(fetchers))
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)

    async def _stop_all(self, fetchers: list[ReplicaFetcher]) -> None:
        """Stop them all, then raise the first error a fetcher loop died of (it was logged when it happened)."""
        results = await asyncio.gather(*(fetcher.stop() for fetcher in fetchers), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
