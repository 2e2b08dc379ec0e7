"""BrokerControl: brokers' registrations and sessions, and what their changes of state decide (Kafka's
ClusterControlManager, with the partition moves a broker's fencing or shutdown causes).

A broker registers (a new broker epoch, fenced) and heartbeats; the first heartbeat that finds it caught up
unfences it; a broker silent for broker.session.timeout.ms, or asking to be fenced, is fenced: out of every
ISR, its leaderships moved; a broker that wants to stop goes through controlled shutdown (its leaderships move
first). Log dirs a broker reports offline (KIP-858) take its replicas in them offline until it restarts.
"""

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Collection, Iterable

from kio.schema.errors import ErrorCode

from replog.log.partition_log import TopicPartition, parse_topic_partition

from . import records
from .cluster import BrokerRegistration, ControllerError
from .context import ControllerContext
from .heartbeats import BrokerState, HeartbeatAnswer
from .leadership import elect_offline_partitions, without_broker
from .propagation import Delivery
from .replication_control import ReplicationControl
from .state_machines import PartitionReplica, ReplicaState

log = logging.getLogger(__name__)


class BrokerControl:
    def __init__(self, controller: ControllerContext, replication: ReplicationControl) -> None:
        self._controller = controller
        self._replication = replication
        # Leadership moves of brokers in controlled shutdown; such a broker is told to stop only once
        # its successors have them (Kafka waits until the moves are replayed).
        self._shutdown_moves: dict[int, list[Delivery]] = {}
        # The log dir ids each broker has reported offline since it registered (KIP-858's OfflineLogDirs).
        self._offline_log_dirs: dict[int, frozenset[uuid.UUID]] = {}

    def forget(self) -> None:
        """The controller stepped down: shutdowns and log dir reports start over with the next one."""
        self._shutdown_moves.clear()
        self._offline_log_dirs.clear()

    def register_broker(self, broker_id: int, incarnation_id: uuid.UUID, host: str, port: int,
                        rack: str | None = None, cluster_id: str | None = None,
                        listeners: tuple[tuple[str, str, int, int], ...] = ()) -> int:
        """A BrokerRegistration: returns the new broker epoch. The broker starts fenced; a heartbeat
        unfences it once it has the metadata. A broker registering again while unfenced restarted
        without a clean shutdown, so it is fenced first: its log may have lost unflushed records."""
        c = self._controller
        c.require_active()
        if cluster_id is not None and cluster_id != c.config.cluster_id:
            raise ControllerError(ErrorCode.inconsistent_cluster_id,
                                  f"broker {broker_id} is in cluster {cluster_id!r}, not {c.config.cluster_id!r}")
        # KRaft's broker epoch is the offset of the registration record; here the offset where registering
        # starts (fencing the previous incarnation may log records first): unique, and it only grows.
        epoch = c.metadata_log.next_offset
        previous = c.sessions.register(broker_id, incarnation_id, epoch, c.clock_ms())
        if previous is not None and previous is not BrokerState.FENCED:
            self._fence(broker_id, "registered again")
        registration = BrokerRegistration(broker_id, host, port, epoch, incarnation_id, rack, fenced=True,
                                          listeners=listeners)
        self.replace_broker(registration)
        # A new process: failed log dirs come back on restart (Kafka keeps a dir offline until then).
        c.metadata.clear_offline_replicas(broker_id)
        self._offline_log_dirs.pop(broker_id, None)
        if broker_id in c.channel.broker_ids:
            c.channel.remove_broker(broker_id)  # requests for its old incarnation; the resync covers them
        c.channel.add_broker(broker_id, host, port)
        deliveries = c.propagator.leader_and_isr(c.metadata.partitions_with_replica(broker_id),
                                                 broker_ids=[broker_id])
        deliveries += c.propagator.update_metadata([broker_id])
        c.watch(deliveries, f"registration of broker {broker_id}")
        self._replication.retry_deletions(broker_id)
        log.info("broker %d registered at %s:%d with epoch %d (incarnation %s)", broker_id, host, port, epoch,
                 incarnation_id)
        return epoch

    def broker_heartbeat(self, broker_id: int, broker_epoch: int, *, want_fence: bool,
                         want_shutdown: bool, offline_log_dirs: Collection[uuid.UUID] = ()) -> HeartbeatAnswer:
        """A BrokerHeartbeat: renews the session and acts on the broker's state change, and on log dirs it
        reports offline for the first time."""
        c = self._controller
        c.require_active()
        change = c.sessions.heartbeat(broker_id, broker_epoch, c.clock_ms(),
                                      leads_partitions=lambda: self._still_leads(broker_id),
                                      want_fence=want_fence, want_shutdown=want_shutdown)
        before, after = change.before, change.after
        if before is BrokerState.FENCED and after is BrokerState.UNFENCED:
            self._unfence(broker_id)
        elif before is BrokerState.UNFENCED and after is BrokerState.CONTROLLED_SHUTDOWN:
            self._begin_controlled_shutdown(broker_id)
        elif before is not BrokerState.FENCED and after in (BrokerState.FENCED, BrokerState.SHUTDOWN_NOW):
            self._fence(broker_id, "shut down" if after is BrokerState.SHUTDOWN_NOW else "asked to be fenced",
                        clean=True)
        reported = frozenset(offline_log_dirs)
        known = self._offline_log_dirs.get(broker_id, frozenset())
        if not reported <= known and after in (BrokerState.UNFENCED, BrokerState.CONTROLLED_SHUTDOWN):
            self._offline_log_dirs[broker_id] = known | reported
            log.warning("broker %d reports %d offline log dirs; finding its offline replicas", broker_id,
                        len(reported))
            c.spawn(self._find_offline_replicas(broker_id))
        if after is BrokerState.SHUTDOWN_NOW:
            self._shutdown_moves.pop(broker_id, None)
            if broker_id in c.channel.broker_ids:  # registered, never unfenced: _fence did not run
                c.channel.remove_broker(broker_id)
            log.info("broker %d may shut down now", broker_id)
        return HeartbeatAnswer(is_fenced=after in (BrokerState.FENCED, BrokerState.SHUTDOWN_NOW),
                               should_shut_down=after is BrokerState.SHUTDOWN_NOW)

    def fence_expired_brokers(self) -> list[int]:
        c = self._controller
        now = c.clock_ms()
        expired = c.sessions.fence_expired(now)
        for broker_id in expired:
            self._fence(broker_id, f"silent for more than {c.config.broker_session_timeout_ms} ms")
        for broker_id in c.sessions.end_silent_fenced(now):
            if broker_id in c.channel.broker_ids:
                c.channel.remove_broker(broker_id)
                log.warning("fenced broker %d went silent; no more requests to it", broker_id)
        return expired

    def replicas_offline(self, broker_id: int, keys: Iterable[TopicPartition]) -> int:
        """The broker's replicas of `keys` are in a failed log dir: as if the broker had left, for those
        partitions only (out of their ISRs, leaderships moved), until it restarts. Returns how many
        partitions changed."""
        c = self._controller
        newly = c.metadata.mark_replicas_offline(broker_id, keys)
        if not newly:
            return 0
        c.states.replicas.transition(
            [PartitionReplica(TopicPartition(p.topic, p.partition), broker_id) for p in newly], ReplicaState.OFFLINE)
        eligible = [b for b in c.metadata.active_broker_ids() if b != broker_id]
        changes = without_broker(newly, broker_id, eligible, self._replication.unclean_allowed,
                                 c.metadata.offline_replicas_of)
        c.watch(self._replication.commit_partition_changes(changes), f"offline replicas of broker {broker_id}")
        c.request_metadata_push()  # offline_replicas changed even where no leader or ISR did
        log.warning("broker %d has %d offline replicas: %d partitions changed, %d without a leader", broker_id,
                    len(newly), len(changes), sum(1 for p in changes if not p.has_leader))
        return len(changes)

    def replace_broker(self, registration: BrokerRegistration) -> None:
        self._controller.metadata_log.append([records.broker_record(registration)])
        self._controller.metadata.brokers[registration.broker_id] = registration

    def _still_leads(self, broker_id: int) -> bool:
        moves = self._shutdown_moves.get(broker_id, [])
        return self._controller.metadata.leads_any(broker_id) or any(not d.future.done() for d in moves)

    def _unfence(self, broker_id: int) -> None:
        c = self._controller
        broker = c.metadata.brokers[broker_id]
        self.replace_broker(dataclasses.replace(broker, fenced=False))
        # Its replicas in failed log dirs stay offline: only a restart (a new registration) brings them back.
        c.states.broker_changed(broker_id, [p for p in c.metadata.partitions_with_replica(broker_id)
                                            if broker_id not in c.metadata.offline_replicas_of(p)], live=True)
        deliveries = []
        if broker_id not in c.channel.broker_ids:  # fenced by silence: it missed every change since
            c.channel.add_broker(broker_id, broker.host, broker.port)
            deliveries += c.propagator.leader_and_isr(c.metadata.partitions_with_replica(broker_id),
                                                      broker_ids=[broker_id])
        changes = elect_offline_partitions(c.metadata.partitions_with_replica(broker_id),
                                           c.metadata.active_broker_ids(), self._replication.unclean_allowed,
                                           c.metadata.offline_replicas_of)
        deliveries += self._replication.commit_partition_changes(changes)
        c.watch(deliveries, f"unfencing broker {broker_id}")
        c.request_metadata_push()
        log.info("broker %d unfenced; %d offline partitions got a leader", broker_id, len(changes))

    def _begin_controlled_shutdown(self, broker_id: int) -> None:
        c = self._controller
        broker = c.metadata.brokers[broker_id]
        self.replace_broker(dataclasses.replace(broker, in_controlled_shutdown=True))
        changes = without_broker(c.metadata.partitions_with_replica(broker_id), broker_id,
                                 c.metadata.active_broker_ids(), self._replication.unclean_allowed,
                                 c.metadata.offline_replicas_of)
        deliveries = self._replication.commit_partition_changes(changes)
        self._shutdown_moves[broker_id] = deliveries
        c.watch(deliveries, f"controlled shutdown of broker {broker_id}")
        c.request_metadata_push()
        log.info("broker %d in controlled shutdown: %d partitions changed", broker_id, len(changes))

    def _fence(self, broker_id: int, reason: str, *, clean: bool = False) -> None:
        """Out of every ISR, leaderships moved, no more requests to it (it is resynced when it returns)."""
        c = self._controller
        broker = c.metadata.brokers[broker_id]
        self.replace_broker(dataclasses.replace(broker, fenced=True, in_controlled_shutdown=False))
        c.states.broker_changed(broker_id, c.metadata.partitions_with_replica(broker_id), live=False)
        if broker_id in c.channel.broker_ids:
            c.channel.remove_broker(broker_id)
        changes = without_broker(c.metadata.partitions_with_replica(broker_id), broker_id,
                                 c.metadata.active_broker_ids(), self._replication.unclean_allowed,
                                 c.metadata.offline_replicas_of)
        c.watch(self._replication.commit_partition_changes(changes), f"fencing broker {broker_id}")
        c.request_metadata_push()
        offline = sum(1 for p in changes if not p.has_leader)
        log.log(logging.INFO if clean else logging.WARNING, "broker %d fenced (%s): %d partitions changed, "
                "%d without a leader", broker_id, reason, len(changes), offline)

    async def _find_offline_replicas(self, broker_id: int) -> None:
        """Which of the broker's replicas are in its failed dirs: ask it, as ZooKeeper-mode Kafka did after a
        log dir event (KIP-112), with a LeaderAndIsr for all of them; it answers KAFKA_STORAGE_ERROR for
        those. KRaft (KIP-858) would look the dirs up in replica-to-dir assignments instead, but replog's
        brokers choose where a log goes and do not tell the controller (no AssignReplicasToDirs)."""
        c = self._controller
        deliveries = c.propagator.leader_and_isr(c.metadata.partitions_with_replica(broker_id),
                                                 broker_ids=[broker_id])
        if deliveries:
            await asyncio.wait([d.future for d in deliveries], timeout=c.config.propagation_timeout_ms / 1000)
        offline = set()
        for delivery in deliveries:
            future = delivery.future
            if not future.done() or future.cancelled() or future.exception() is not None:
                continue  # fenced or silent meanwhile: fencing has moved all its leaderships already
            offline.update(parse_topic_partition(label) for label, error in delivery.errors_of(future.result())
                           if label is not None and error == ErrorCode.kafka_storage_error)
        if c.sessions.state(broker_id) is not BrokerState.FENCED:
            self.replicas_offline(broker_id, offline)
