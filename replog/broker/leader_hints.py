"""Where a partition's leader is now, for a client that sent a request to a broker that does not lead it.

KIP-951 (leader discovery optimisations, Kafka 3.7): from Produce v10 (and Fetch v16) a NOT_LEADER_OR_FOLLOWER
answer carries the partition's current leader and epoch, and the response the endpoints of those leaders, so
the client moves the partition at once instead of waiting for a metadata refresh. As Kafka's
KafkaApis.getCurrentLeader: the leader this broker's own replica knows (LeaderAndIsr), else the one in its
metadata image, else unknown (-1, -1); an endpoint only for a leader that is alive, on the listener the
client is connected to.
"""

from dataclasses import dataclass

from .metadata import MetadataImage
from .partition import LEADER_NONE, UNDEFINED_EPOCH, Partition


@dataclass(frozen=True, slots=True)
class CurrentLeader:
    leader_id: int
    leader_epoch: int


def current_leader(partition: Partition | None, image: MetadataImage, topic: str, index: int) -> CurrentLeader:
    """The newer of the two: the image takes a LeaderAndIsr's leaders before the replica applies them
    (MetadataImage.apply_leadership), and a hint older than the client's metadata would be ignored."""
    metadata = image.topics.get(topic)
    known = metadata.partitions.get(index) if metadata is not None else None
    if partition is not None and partition.state.leader != LEADER_NONE and (
            known is None or partition.state.leader_epoch >= known.leader_epoch):
        return CurrentLeader(partition.state.leader, partition.state.leader_epoch)
    if known is None:
        return CurrentLeader(LEADER_NONE, UNDEFINED_EPOCH)
    return CurrentLeader(known.leader, known.leader_epoch)


def node_endpoints(image: MetadataImage, leader_ids: set[int], listener_name: str) -> list[dict]:
    """The NodeEndpoints of a response: each live leader's address on the client's listener."""
    endpoints = []
    for node_id in sorted(leader_ids):
        broker = image.brokers.get(node_id)
        if broker is not None:
            host, port = broker.address_for(listener_name)
            endpoints.append({"node_id": node_id, "host": host, "port": port, "rack": broker.rack})
    return endpoints
