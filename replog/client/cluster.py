"""The client's view of the cluster: bootstrap addresses, a metadata cache, and one connection per broker.

Metadata is refreshed on demand (unknown topic, stale leader) rather than on a timer; concurrent refreshes
share one request, and refreshes are spaced by retry_backoff_ms so a burst of NOT_LEADER errors does not turn
into a burst of Metadata requests.
"""

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from ..protocol.apis import ApiKey
from .connection import Connection
from .errors import NETWORK_EXCEPTION, KafkaError
from .security import ClientSecurity

MAX_METADATA_ATTEMPTS = 20  # bounds waiting for a new topic's leaders to be elected


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int  # -1 when there is no leader
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    error_code: int
    partitions: dict[int, PartitionInfo]
    is_internal: bool = False


@dataclass(slots=True)
class ClusterSnapshot:
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    controller_id: int = -1
    cluster_id: str | None = None


def parse_bootstrap(servers: str | Iterable[str]) -> list[tuple[str, int]]:
    """'h1:9092,h2:9093' or ['h1:9092', ...] -> [(host, port), ...]."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    addresses = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"bootstrap server {item!r} is not host:port")
        if not 0 < int(port) < 65536:
            raise ValueError(f"bootstrap server {item!r}: port {port} is not in 1-65535")
        addresses.append((host.strip("[]"), int(port)))
    if not addresses:
        raise ValueError("no bootstrap servers given")
    return addresses


def snapshot_from_metadata(response) -> ClusterSnapshot:
    """Turn a kio MetadataResponse (any version) into a ClusterSnapshot."""
    snapshot = ClusterSnapshot(
        brokers={
            int(b.node_id): BrokerInfo(int(b.node_id), b.host, int(b.port), b.rack) for b in response.brokers
        },
        controller_id=int(getattr(response, "controller_id", -1)),
        cluster_id=getattr(response, "cluster_id", None),
    )
    for topic in response.topics:
        partitions = {}
        for p in topic.partitions:
            partitions[int(p.partition_index)] = PartitionInfo(
                topic=topic.name,
                partition=int(p.partition_index),
                leader=int(p.leader_id),
                leader_epoch=int(getattr(p, "leader_epoch", -1)),
                replicas=tuple(int(r) for r in p.replica_nodes),
                isr=tuple(int(r) for r in p.isr_nodes),
                offline=tuple(int(r) for r in getattr(p, "offline_replicas", ())),
                error_code=int(p.error_code),
            )
        snapshot.topics[topic.name] = TopicInfo(
            topic.name, int(topic.error_code), partitions, topic.is_internal
        )
    return snapshot


def metadata_request(topics: list[str] | None, allow_auto_topic_creation: bool) -> dict:
    """A Metadata request dict valid for v1-12 (fields a version lacks are dropped by messages.build)."""
    return {
        "topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
        "allow_auto_topic_creation": allow_auto_topic_creation,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }


class Cluster:
    def __init__(
        self,
        bootstrap: str | Iterable[str],
        *,
        client_id: str = "replog",
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        max_in_flight: int = 32,
        allow_auto_topic_creation: bool = False,
        security: ClientSecurity | None = None,
    ) -> None:
        assert retry_backoff_ms >= 0
        self.security = security  # TLS and SASL for every connection (None: PLAINTEXT)
        self.bootstrap = parse_bootstrap(bootstrap)
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.max_in_flight = max_in_flight
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.metadata = ClusterSnapshot()
        self._topics: set[str] = set()  # topics this client cares about
        self._want_all_topics = False
        self._connections: dict[int, asyncio.Future] = {}  # node id (or -1-i for bootstrap i) -> Connection
        self._refresh_task: asyncio.Task | None = None
        self._last_refresh = float("-inf")
        self._closed = False

    async def refresh(self, topics: Iterable[str] = (), *, all_topics: bool = False) -> ClusterSnapshot:
        """Fetch fresh metadata for the topics of interest (plus `topics`); shared by concurrent callers."""
        self._topics.update(topics)
        self._want_all_topics |= all_topics
        if self._refresh_task is None or self._refresh_task.done():
            self._refresh_task = asyncio.ensure_future(self._refresh_once())
        return await asyncio.shield(self._refresh_task)

    async def _refresh_once(self) -> ClusterSnapshot:
        loop = asyncio.get_running_loop()
        wait = self._last_refresh + self.retry_backoff_ms / 1000 - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
        topics = None if self._want_all_topics else sorted(self._topics)
        conn = await self.any_connection()
        try:
            response = await conn.send(
                ApiKey.METADATA, metadata_request(topics, self.allow_auto_topic_creation)
            )
        finally:
            self._last_refresh = loop.time()
        snapshot = snapshot_from_metadata(response)
        assert all(b.port > 0 for b in snapshot.brokers.values())
        self.metadata = snapshot
        return snapshot

    async def any_connection(self) -> Connection:
        """A live connection to some broker: known brokers first, then the bootstrap list."""
        candidates = list(self.metadata.brokers) + [-1 - i for i in range(len(self.bootstrap))]
        connected = [c for c in candidates if self._is_connected(c)]
        last_error: KafkaError | None = None
        for node_id in connected + [c for c in candidates if c not in connected]:
            try:
                return await self.connection(node_id)
            except KafkaError as e:
                last_error = e
        raise KafkaError(NETWORK_EXCEPTION, f"no broker reachable (bootstrap {self.bootstrap}): {last_error}")

    def _is_connected(self, node_id: int) -> bool:
        future = self._connections.get(node_id)
        return future is not None and _live(future)

    async def connection(self, node_id: int) -> Connection:
        """The pooled connection to a broker, opened (and version-negotiated) on first use."""
        if self._closed:
            raise KafkaError(NETWORK_EXCEPTION, "client is closed")
        future = self._connections.get(node_id)
        if future is not None and future.done() and not _live(future):
            future = None
        if future is None:
            host, port = self._address(node_id)
            conn = Connection(
                host,
                port,
                client_id=self.client_id,
                max_in_flight=self.max_in_flight,
                request_timeout_ms=self.request_timeout_ms,
                security=self.security,
            )
            future = asyncio.ensure_future(self._open(conn))
            self._connections[node_id] = future
        return await asyncio.shield(future)

    async def _open(self, conn: Connection) -> Connection:
        try:
            await conn.connect()
        except KafkaError:
            conn.close()
            raise
        return conn

    def _address(self, node_id: int) -> tuple[str, int]:
        if node_id < 0:
            return self.bootstrap[-1 - node_id]
        broker = self.metadata.brokers.get(node_id)
        if broker is None:
            raise KafkaError(ErrorCode.leader_not_available.value, f"broker {node_id} is not in the metadata")
        return broker.host, broker.port

    async def topic(self, name: str) -> TopicInfo:
        """Metadata of a topic whose partitions all have leaders, refreshing (bounded) until they do."""
        for _ in range(MAX_METADATA_ATTEMPTS):
            info = self.metadata.topics.get(name)
            if info is not None and info.error_code == 0 and _all_led(info):
                return info
            await self.refresh([name])
        info = self.metadata.topics.get(name)
        code = (
            info.error_code if info is not None and info.error_code else ErrorCode.leader_not_available.value
        )
        raise KafkaError(
            code, f"topic {name!r} has no usable metadata after {MAX_METADATA_ATTEMPTS} refreshes"
        )

    async def partitions_for(self, topic: str) -> list[int]:
        return sorted((await self.topic(topic)).partitions)

    def leader(self, topic: str, partition: int) -> PartitionInfo:
        """The cached leader of a partition; raises a retriable KafkaError when it is unknown."""
        info = self.metadata.topics.get(topic)
        p = info.partitions.get(partition) if info is not None else None
        if p is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition.value, f"{topic}-{partition}")
        if p.leader < 0:
            raise KafkaError(ErrorCode.leader_not_available.value, f"{topic}-{partition}")
        return p

    async def close(self) -> None:
        self._closed = True
        if self._refresh_task is not None and not self._refresh_task.done():
            self._refresh_task.cancel()
        for future in self._connections.values():
            if _live(future):
                future.result().close()
            elif not future.done():
                future.cancel()
        self._connections.clear()


def _all_led(info: TopicInfo) -> bool:
    return bool(info.partitions) and all(p.leader >= 0 for p in info.partitions.values())


def _live(future: asyncio.Future) -> bool:
    """A finished connect future holding a connection that is still open."""
    return (
        future.done() and not future.cancelled() and future.exception() is None and not future.result().closed
    )
