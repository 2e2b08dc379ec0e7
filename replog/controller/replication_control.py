"""ReplicationControl: the controller's topics and partitions (Kafka's ReplicationControlManager).

Creates and deletes topics (and retries the deletion of replicas whose broker was away), decides
AlterPartition, moves leaderships back to preferred replicas, and commits every partition change: logged
(fsync), applied, then sent to the replicas as LeaderAndIsr.
"""

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from replog.log.partition_log import TopicPartition

from . import records
from .assignment import assign_replicas
from .cluster import ControllerError, TopicRegistration, alter_partition_error
from .context import ControllerContext
from .leadership import preferred_leader_elections
from .propagation import Delivery, PropagationError
from .reassignment_ops import send_moves
from .registry import PartitionRegistration
from .state_machines import PartitionReplica, ReplicaState

log = logging.getLogger(__name__)


class ReplicationControl:
    def __init__(self, controller: ControllerContext) -> None:
        self._controller = controller
        # Deleted topics with replicas not yet deleted (their broker was away): retried when it registers.
        # Not in the metadata log: a restarted controller forgets them (their logs stay on those brokers).
        self._pending_deletions: dict[str, tuple[TopicRegistration, set[int]]] = {}

    def forget(self) -> None:
        """The controller stepped down: the next active controller decides what is pending."""
        self._pending_deletions.clear()

    async def create_topic(self, name: str, assignment: Mapping[int, Sequence[int]] | None = None,
                           configs: Mapping[str, str] | None = None, *, partitions: int | None = None,
                           replication_factor: int | None = None, validate_only: bool = False) -> TopicRegistration:
        """Create a topic and wait until its replicas have it. Without an explicit assignment ({partition:
        replicas}; the first replica leads) replicas are assigned round-robin over the active brokers."""
        c = self._controller
        c.require_active()
        if name in self._pending_deletions:
            raise ControllerError(ErrorCode.topic_already_exists, f"topic {name!r} is marked for deletion: brokers "
                                  f"{sorted(self._pending_deletions[name][1])} have not deleted their replicas")
        if assignment is None:
            # None (the request's -1) takes the cluster default; 0 is refused by assign_replicas, as Kafka does.
            assignment = assign_replicas(
                c.metadata.active_broker_ids(),
                c.config.num_partitions if partitions is None else partitions,
                c.config.default_replication_factor if replication_factor is None else replication_factor,
                racks={b: c.metadata.brokers[b].rack for b in c.metadata.active_broker_ids()})
        inactive = sorted({r for replicas in assignment.values() for r in replicas
                           if r in c.metadata.brokers and not c.metadata.is_eligible(r)})
        if inactive:
            raise ControllerError(ErrorCode.invalid_replica_assignment, f"brokers {inactive} are fenced or "
                                  f"shutting down")
        topic = c.metadata.new_topic(name, assignment, configs or {})
        if validate_only:
            return topic
        c.metadata_log.append(records.new_topic_records(topic))
        c.metadata.add_topic(topic)
        c.states.topic_created(topic.partitions.values(), c.metadata.live_broker_ids())
        deliveries = c.propagator.leader_and_isr(topic.partitions.values(), is_new=True)
        deliveries += await c.propagator.push_metadata()  # thousands of partitions: built in chunks
        await c.propagator.wait(deliveries)
        log.info("created topic %s with %d partitions", name, len(topic.partitions))
        return topic

    async def delete_topic(self, name: str) -> TopicRegistration:
        """Replicas stop and delete their logs (StopReplica), then every broker forgets the topic."""
        c = self._controller
        c.require_active()
        if name not in c.metadata.topics:
            raise ControllerError(ErrorCode.unknown_topic_or_partition, f"no topic {name!r}")
        c.metadata_log.append([records.remove_topic_record(name)])
        topic = c.metadata.delete_topic(name)
        c.states.topic_deletion_started(topic.partitions.values())
        replica_brokers = {r for p in topic.partitions.values() for r in p.replicas}
        stopping = c.propagator.stop_replica(topic, delete=True)
        left = replica_brokers - {d.broker_id for d in stopping}  # away (fenced): deleted when they return
        try:
            await c.propagator.wait(stopping + c.propagator.update_metadata())
        except PropagationError as e:
            left |= {f.broker_id for f in e.failures if f.api == "STOP_REPLICA"}
            raise
        finally:
            c.states.topic_deletion_finished(topic.partitions.values(), left)
            if left:
                self._pending_deletions[name] = (topic, left)
                log.warning("topic %s deleted; brokers %s will delete their replicas when they return", name,
                            sorted(left))
        return topic

    def retry_deletions(self, broker_id: int) -> None:
        """A broker registered: in the background, delete its replicas of topics deleted while it was away."""
        for name, (topic, brokers_left) in list(self._pending_deletions.items()):
            if broker_id in brokers_left:
                self._controller.spawn(self._retry_deletion(name, topic, broker_id))

    async def _retry_deletion(self, name: str, topic: TopicRegistration, broker_id: int) -> None:
        """StopReplica(delete) for the replicas a returning broker still holds of a deleted topic."""
        c = self._controller
        keys = [PartitionReplica(TopicPartition(p.topic, p.partition), broker_id)
                for p in topic.partitions.values() if broker_id in p.replicas]
        # Kafka's retryDeletionForIneligibleReplicas: back to Offline, from which deletion may start again.
        c.states.replicas.transition(keys, ReplicaState.OFFLINE)
        c.states.replicas.transition(keys, ReplicaState.DELETION_STARTED)
        try:
            await c.propagator.wait(c.propagator.stop_replica(topic, delete=True, broker_ids=[broker_id]))
        except PropagationError as e:
            c.states.replicas.transition(keys, ReplicaState.DELETION_INELIGIBLE)
            log.warning("broker %d did not delete its replicas of deleted topic %s: %s", broker_id, name, e)
            return
        c.states.replicas.transition(keys, ReplicaState.DELETION_SUCCESSFUL)
        c.states.replicas.transition(keys, ReplicaState.NON_EXISTENT)
        brokers_left = self._pending_deletions[name][1]
        brokers_left.discard(broker_id)
        if not brokers_left:
            del self._pending_deletions[name]
        log.info("broker %d deleted its replicas of deleted topic %s", broker_id, name)

    def commit_partition_changes(self, changes: Iterable[PartitionRegistration]) -> list[Delivery]:
        """Log, apply and send partition changes (LeaderAndIsr to their replicas); metadata follows."""
        c = self._controller
        changes = list(changes)
        if not changes:
            return []
        c.metadata_log.append([records.partition_record(p) for p in changes])
        c.metadata.apply(changes)
        c.states.partitions_changed(changes)
        return c.propagator.leader_and_isr(changes)

    def alter_partition(self, request: Any, version: int) -> dict[str, Any]:
        """Decide, log and apply an authorized AlterPartition; returns the response body. The brokers learn
        the new ISRs from an UpdateMetadata sent soon after; the leader needs no LeaderAndIsr (KRaft)."""
        c = self._controller
        if not c.active:
            return alter_partition_error(ErrorCode.not_controller)
        decision = c.metadata.decide_alter_partition(request, version)
        if decision.changes:
            before = [c.metadata.registration(p.topic, p.partition) for p in decision.changes]
            c.metadata_log.append([records.partition_record(p) for p in decision.changes])
            c.metadata.apply(decision.changes)
            # The changes that completed a reassignment (KIP-455) move replicas and maybe the leader.
            moves = [(b, a) for b, a in zip(before, decision.changes, strict=True) if b.is_reassigning]
            if moves:
                c.spawn(send_moves(c.metadata, c.states, c.propagator, moves))
            c.request_metadata_push()
        return decision.response

    def rebalance_leaders(self) -> int:
        """Hand leadership back to preferred replicas where it drifted (auto.leader.rebalance.enable)."""
        c = self._controller
        partitions = [p for t in c.metadata.topics.values() for p in t.partitions.values()]
        changes = preferred_leader_elections(partitions, c.metadata.active_broker_ids(),
                                             c.config.leader_imbalance_per_broker_percentage,
                                             c.metadata.offline_replicas_of)
        c.watch(self.commit_partition_changes(changes), "preferred leader election")
        if changes:
            c.request_metadata_push()
            log.info("preferred leader election moved %d leaderships", len(changes))
        return len(changes)

    def unclean_allowed(self, topic: str) -> bool:
        """unclean.leader.election.enable for `topic`: its own config, else the dynamic cluster-wide default
        (KIP-226), else the controller's static one."""
        c = self._controller
        configured = c.metadata.topics[topic].configs.get("unclean.leader.election.enable")
        if configured is None:
            configured = c.metadata.broker_configs.get("", {}).get("unclean.leader.election.enable")
        if configured is None:
            return c.config.unclean_leader_election_enable
        return configured.lower() == "true"
