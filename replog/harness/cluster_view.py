"""The cluster's metadata as the brokers serve it: what a LocalCluster whose controllers are processes knows of
partition leaders, ISRs and live brokers (an in-process controller is read directly instead).

Every running broker is asked for Metadata on its own port (never through a proxy, which a fault may have
cut). The brokers learn the controller's decisions through UpdateMetadata, so one of them may lag; the view
takes, per partition, the answer with the highest leader epoch and, in a tie, the smallest ISR, and as live
brokers those that every answer lists: a view that errs toward "not yet whole".
"""

from collections.abc import Sequence
from dataclasses import dataclass, field

from replog.client.cluster import PartitionInfo, metadata_request, snapshot_from_metadata
from replog.client.connection import Connection
from replog.client.errors import KafkaError
from replog.client.security import ClientSecurity
from replog.protocol.apis import ApiKey

from .processes import HOST

METADATA_TIMEOUT_MS = 1_000  # a paused broker must not hold the view up


@dataclass
class BrokerMetadataView:
    partitions: dict[tuple[str, int], PartitionInfo] = field(default_factory=dict)
    live_brokers: set[int] = field(default_factory=set)
    security: ClientSecurity | None = None  # how to reach the brokers (a secured cluster's admin)
    answers: int = 0  # how many brokers answered the last refresh

    async def refresh(self, ports: Sequence[int]) -> None:
        """Ask every broker listening on these ports; keep the previous view if none answers."""
        snapshots = [s for s in [await _metadata_at(port, self.security) for port in ports] if s is not None]
        if not snapshots:
            self.answers = 0
            return
        partitions: dict[tuple[str, int], PartitionInfo] = {}
        for snapshot in snapshots:
            for topic in snapshot.topics.values():
                for info in topic.partitions.values():
                    key = (info.topic, info.partition)
                    known = partitions.get(key)
                    if known is None or (info.leader_epoch, -len(info.isr)) > (known.leader_epoch, -len(known.isr)):
                        partitions[key] = info
        self.partitions = partitions
        self.live_brokers = set.intersection(*(set(s.brokers) for s in snapshots))
        self.answers = len(snapshots)


async def _metadata_at(port: int, security: ClientSecurity | None):
    connection = Connection(HOST, port, client_id="replog-harness", request_timeout_ms=METADATA_TIMEOUT_MS,
                            security=security)
    try:
        await connection.connect(METADATA_TIMEOUT_MS)
        return snapshot_from_metadata(await connection.send(ApiKey.METADATA, metadata_request(None, False)))
    except (KafkaError, OSError):  # a dead, paused or starting broker: the others answer
        return None
    finally:
        connection.close()
