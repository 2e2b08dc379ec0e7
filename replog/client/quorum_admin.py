"""DescribeQuorum (KIP-595, KIP-836 timestamps) against a controller: who leads the metadata quorum, in which
epoch, its high watermark, and how far each voter and observer has replicated.

Like Kafka's Admin.describeMetadataQuorum with --bootstrap-controller: only the quorum's leader answers, so
each given controller is asked in turn until one does (a follower answers NOT_LEADER_OR_FOLLOWER).
"""

from collections.abc import Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from ..protocol.apis import ApiKey
from ..protocol.primitives import DecodeError
from .connection import Connection
from .errors import NETWORK_EXCEPTION, UNSUPPORTED_VERSION, KafkaError
from .security import ClientSecurity

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
DEFAULT_TIMEOUT_MS = 5_000


@dataclass(frozen=True, slots=True)
class ReplicaState:
    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int  # ms since the epoch; -1 when unknown (v0 has no timestamps)
    last_caught_up_timestamp: int


@dataclass(frozen=True, slots=True)
class QuorumInfo:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaState, ...]
    observers: tuple[ReplicaState, ...]

    @property
    def leader(self) -> ReplicaState | None:
        return next((v for v in self.voters if v.replica_id == self.leader_id), None)

    def lag(self, replica: ReplicaState) -> int:
        """Entries the replica is behind the leader's log end (kafka-metadata-quorum's Lag); -1 without a leader."""
        leader = self.leader
        return -1 if leader is None else leader.log_end_offset - replica.log_end_offset


def parse_controllers(bootstrap: str) -> list[tuple[str, int]]:
    """'host:port[,host:port...]' -> [(host, port)]; raises ValueError naming the bad entry."""
    out = []
    for entry in (e.strip() for e in bootstrap.split(",")):
        host, sep, port = entry.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{entry!r} is not HOST:PORT")
        out.append((host.removeprefix("[").removesuffix("]"), int(port)))  # [::1]:9093 is host ::1
    return out


async def describe_quorum(controllers: Sequence[tuple[str, int]],
                          timeout_ms: int = DEFAULT_TIMEOUT_MS, security: ClientSecurity | None = None) -> QuorumInfo:
    """The quorum as its leader describes it; raises the last KafkaError when no given controller answers.
    security: TLS and SASL to the controllers (None: PLAINTEXT)."""
    assert controllers
    last: KafkaError | None = None
    for host, port in controllers:
        try:
            return await _describe_at(host, port, timeout_ms, security)
        except KafkaError as e:
            last = e
    assert last is not None
    raise last


async def _describe_at(host: str, port: int, timeout_ms: int, security: ClientSecurity | None) -> QuorumInfo:
    connection = Connection(host, port, client_id="replog-metadata-quorum", request_timeout_ms=timeout_ms,
                            security=security)
    try:
        await connection.connect()  # negotiates versions: v2 where both sides have it, else v1 or v0
        request = {"topics": [{"topic_name": METADATA_TOPIC,
                               "partitions": [{"partition_index": METADATA_PARTITION}]}]}
        response = await connection.send(ApiKey.DESCRIBE_QUORUM, request)
    except DecodeError as e:  # not a controller's answer: this one is no use, the next may be
        raise KafkaError(NETWORK_EXCEPTION, f"DescribeQuorum at {host}:{port}: {e}") from None
    finally:
        connection.close()
    where = f"DescribeQuorum at {host}:{port}"
    if response.error_code != ErrorCode.none:  # v2's top-level error
        raise KafkaError(int(response.error_code), f"{where}: {getattr(response, 'error_message', None) or ''}")
    partitions = [p for t in response.topics if t.topic_name == METADATA_TOPIC for p in t.partitions
                  if p.partition_index == METADATA_PARTITION]
    if len(partitions) != 1:
        raise KafkaError(NETWORK_EXCEPTION, f"{where}: no {METADATA_TOPIC}-{METADATA_PARTITION} in the answer")
    p = partitions[0]
    if p.error_code != ErrorCode.none:
        raise KafkaError(int(p.error_code), f"{where} (leader hint {p.leader_id}, epoch {p.leader_epoch})")
    return QuorumInfo(int(p.leader_id), int(p.leader_epoch), int(p.high_watermark),
                      tuple(map(_replica, p.current_voters)), tuple(map(_replica, p.observers)))


def _replica(replica) -> ReplicaState:
    # v0 lacks the timestamps; Kafka's Admin reports them as absent, printed as -1.
    return ReplicaState(int(replica.replica_id), int(replica.log_end_offset),
                        int(getattr(replica, "last_fetch_timestamp", -1)),
                        int(getattr(replica, "last_caught_up_timestamp", -1)))


ENDPOINT_TYPE_CONTROLLER = 2  # DescribeCluster v1 (KIP-919): ask a controller about the controllers


async def describe_controller_cluster(controllers: Sequence[tuple[str, int]],
                                      timeout_ms: int = DEFAULT_TIMEOUT_MS,
                                      security: ClientSecurity | None = None) -> tuple[str, int]:
    """(cluster id, active controller id or -1) as the first controller that answers DescribeCluster tells them,
    as kafka-metadata-quorum reads the ClusterId with --bootstrap-controller; raises the last KafkaError when
    none does."""
    assert controllers
    last: KafkaError | None = None
    for host, port in controllers:
        connection = Connection(host, port, client_id="replog-metadata-quorum", request_timeout_ms=timeout_ms,
                                security=security)
        try:
            await connection.connect()
            if connection.pick_version(ApiKey.DESCRIBE_CLUSTER) < 1:
                raise KafkaError(UNSUPPORTED_VERSION, f"{host}:{port} has no DescribeCluster v1 (KIP-919)")
            response = await connection.send(ApiKey.DESCRIBE_CLUSTER, {
                "include_cluster_authorized_operations": False, "endpoint_type": ENDPOINT_TYPE_CONTROLLER})
            if response.error_code != ErrorCode.none:
                raise KafkaError(int(response.error_code), f"DescribeCluster at {host}:{port}: "
                                 f"{response.error_message or ''}")
            return str(response.cluster_id), int(response.controller_id)
        except KafkaError as e:
            last = e
        except DecodeError as e:
            last = KafkaError(NETWORK_EXCEPTION, f"DescribeCluster at {host}:{port}: {e}")
        finally:
            connection.close()
    assert last is not None
    raise last
