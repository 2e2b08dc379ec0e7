"""Topic administration: create, delete, list and describe topics."""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from ..protocol.apis import ApiKey
from .cluster import Cluster, PartitionInfo
from .errors import KafkaError
from .security import ClientSecurity

MAX_ADMIN_ATTEMPTS = 5


@dataclass(frozen=True, slots=True)
class NewTopic:
    name: str
    num_partitions: int = 1
    replication_factor: int = 1
    configs: dict[str, str] = field(default_factory=dict)
    # partition -> its replicas, leader first; when given, the partition count and replication factor go as
    # -1, as Kafka's CreateTopics requires of a request with an assignment
    replica_assignment: dict[int, list[int]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    @property
    def unavailable(self) -> bool:
        return self.leader < 0


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    partitions: tuple[PartitionDescription, ...]
    is_internal: bool = False


def _describe_partition(p: PartitionInfo) -> PartitionDescription:
    return PartitionDescription(p.partition, p.leader, p.leader_epoch, p.replicas, p.isr, p.offline)


class Admin:
    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        request_timeout_ms: int = 30_000,
        client_id: str = "replog-admin",
        security: ClientSecurity | None = None,
    ):
        self.request_timeout_ms = request_timeout_ms
        self.cluster = Cluster(bootstrap, client_id=client_id, request_timeout_ms=request_timeout_ms,
                               security=security)

    async def __aenter__(self) -> "Admin":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def _controller_send(self, api_key: int, data: dict, timeout_ms: int, *, min_version: int = 0):
        """Send to the controller (any broker if unknown), retrying NOT_CONTROLLER and network errors. A broker
        whose highest common version is below `min_version` (one that would drop a field `data` relies on)
        raises UNSUPPORTED_VERSION instead."""
        last: KafkaError | None = None
        for _ in range(MAX_ADMIN_ATTEMPTS):
            metadata = await self.cluster.refresh()
            try:
                if metadata.controller_id >= 0 and metadata.controller_id in metadata.brokers:
                    conn = await self.cluster.connection(metadata.controller_id)
                else:
                    conn = await self.cluster.any_connection()
                if conn.pick_version(api_key) < min_version:
                    raise KafkaError(ErrorCode.unsupported_version.value, f"{ApiKey(api_key).name} v{min_version}+ is "
                                                                    f"needed, the broker offers less")
                return await conn.send(api_key, data, timeout_ms=timeout_ms + self.request_timeout_ms)
            except KafkaError as e:
                if not e.retriable:
                    raise
                last = e
        assert last is not None
        raise last

    async def send_to_any_broker(self, api_key: int, data: dict):
        """Send to any broker (brokers forward what only the controller decides), retrying network errors."""
        last: KafkaError | None = None
        for _ in range(MAX_ADMIN_ATTEMPTS):
            try:
                conn = await self.cluster.any_connection()
                return await conn.send(api_key, data)
            except KafkaError as e:
                if not e.retriable:
                    raise
                last = e
        assert last is not None
        raise last

    async def create_topics(
        self, topics: Sequence[NewTopic], timeout_ms: int = 30_000, validate_only: bool = False
    ) -> None:
        """Create topics; raises KafkaError for the first topic that failed (e.g. TOPIC_ALREADY_EXISTS)."""
        assert topics
        request = {
            "topics": [
                {
                    "name": t.name,
                    "num_partitions": -1 if t.replica_assignment else t.num_partitions,
                    "replication_factor": -1 if t.replica_assignment else t.replication_factor,
                    "assignments": [{"partition_index": p, "broker_ids": list(replicas)}
                                    for p, replicas in sorted(t.replica_assignment.items())],
                    "configs": [{"name": k, "value": v} for k, v in t.configs.items()],
                }
                for t in topics
            ],
            "timeout": timeout_ms,
            "validate_only": validate_only,
        }
        response = await self._controller_send(ApiKey.CREATE_TOPICS, request, timeout_ms)
        _raise_first_error((r.name, int(r.error_code), r.error_message) for r in response.topics)

    async def delete_topics(self, names: Sequence[str], timeout_ms: int = 30_000) -> None:
        assert names
        request = {
            "topic_names": list(names),  # v1-5
            "topics": [{"name": n, "topic_id": None} for n in names],  # v6+
            "timeout": timeout_ms,
        }
        response = await self._controller_send(ApiKey.DELETE_TOPICS, request, timeout_ms)
        _raise_first_error(
            (r.name, int(r.error_code), getattr(r, "error_message", None)) for r in response.responses
        )

    async def list_topics(self, *, include_internal: bool = False) -> list[str]:
        metadata = await self.cluster.refresh(all_topics=True)
        return sorted(
            name
            for name, t in metadata.topics.items()
            if t.error_code == 0 and (include_internal or not t.is_internal)
        )

    async def describe_topics(self, names: Iterable[str] | None = None) -> dict[str, TopicDescription]:
        """Partition leaders, replicas, ISR and offline replicas; all topics when names is None."""
        wanted = None if names is None else list(names)
        metadata = await self.cluster.refresh(wanted or (), all_topics=wanted is None)
        out = {}
        for name in sorted(metadata.topics) if wanted is None else wanted:
            info = metadata.topics.get(name)
            if info is None:
                raise KafkaError(
                    ErrorCode.unknown_topic_or_partition.value, f"topic {name!r} not in metadata"
                )
            if info.error_code:
                raise KafkaError(info.error_code, f"topic {name!r}")
            partitions = tuple(_describe_partition(info.partitions[p]) for p in sorted(info.partitions))
            out[name] = TopicDescription(name, partitions, info.is_internal)
        return out

    async def close(self) -> None:
        await self.cluster.close()


def _raise_first_error(results: Iterable[tuple[str, int, str | None]]) -> None:
    for name, code, message in results:
        if code != 0:
            raise KafkaError(code, f"topic {name!r}" + (f": {message}" if message else ""))
