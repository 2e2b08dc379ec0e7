"""ClusterController: owns the cluster's metadata, keeps brokers' sessions, elects leaders, tells the brokers.

Towards the brokers it plays two of Kafka's parts (kafka-replication-facts.md, section 10):
- the KRaft controller: brokers register (BrokerRegistration, a new broker epoch each time) and heartbeat
  (BrokerHeartbeat); a broker silent for broker.session.timeout.ms is fenced, which removes it from every
  ISR and moves its leaderships; a broker that wants to stop goes through controlled shutdown first;
  partition leaders send AlterPartition; brokers forward CreateTopics / DeleteTopics;
- the ZooKeeper-mode controller's wire: decisions reach the brokers as LeaderAndIsr / UpdateMetadata /
  StopReplica, each carrying the controller id and epoch (brokers refuse an older epoch).
Every decision is written to the metadata log (fsync) before it is applied or sent, so a restarted
controller replays the same brokers, leaders and epochs, and takes the next controller epoch. The metadata log
is the controller quorum's Raft log (quorum.py), whose leader epoch is the controller epoch; the quorum's APIs
(Vote, Fetch, DescribeQuorum, ...) are served on the controller's listener. With several voters only the
quorum's leader is active (KIP-631): standbys replay the committed records and answer brokers NOT_CONTROLLER;
a controller that becomes leader activates once its epoch's first entry commits (failover.py: the commit gate).

Single event loop, no locks: each change is decided, logged, applied and its requests queued in one
synchronous step, so per-broker request order equals the order of changes. Sending is asynchronous: the
channel resends until the broker answers or leaves; `settle()` waits for everything sent so far.
"""

import asyncio
import dataclasses
import logging
import time
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from replog.client.connection import Connection
from replog.log.partition_log import TopicPartition, parse_topic_partition
from replog.metrics.config import MetricsConfig
from replog.metrics.service import MetricsService
from replog.protocol.apis import CONTROLLER_API_SPECS
from replog.raft.config import QuorumConfig
from replog.raft.snapshots import SnapshotPolicy
from replog.server.connection import ConnectionHolder
from replog.server.dispatch import Dispatcher
from replog.server.inter_broker import open_inter_broker_connection
from replog.server.listener import listen, listening_port

from . import records
from .assignment import assign_replicas
from .channel import ChannelConfig, ConnectFactory, ControllerChannel
from .cluster import (
    BrokerRegistration,
    ClusterMetadata,
    ControllerError,
    TopicRegistration,
    alter_partition_error,
)
from .failover import QuorumCommitGate, QuorumRoles
from .handlers import build_handlers, unsupported_version_body
from .heartbeats import BROKER_SESSION_TIMEOUT_MS, BrokerSessions, BrokerState, HeartbeatAnswer
from .leadership import elect_offline_partitions, preferred_leader_elections, without_broker
from .metrics import ControllerCollector, controller_snapshot
from .propagation import Delivery, PropagationError, Propagator
from .quorum import QuorumMetadataLog, controller_quorum_config
from .reassignment_ops import send_moves
from .registry import PartitionRegistration
from .state_machines import ClusterStates, PartitionReplica, ReplicaState

log = logging.getLogger(__name__)

# The controller epoch is the quorum's leader epoch: the first election makes epoch 1. Brokers start at -1
# and take the epoch of the first request they accept.
FIRST_CONTROLLER_EPOCH = 1
# How often silent brokers are looked for; a tenth of the session timeout keeps detection within 10% late.
MAX_FENCE_CHECK_INTERVAL_MS = 1_000
# A fence check this many intervals late means the controller's own loop stopped, not the brokers.
STALL_FACTOR = 3


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    inter_broker_secret: str  # SASL/PLAIN password shared with the brokers (server/auth.py)
    metadata_log_dir: Path
    controller_id: int = 3000
    cluster_id: str = "replog-cluster"
    host: str = "127.0.0.1"
    port: int = 0  # 0: the OS picks one; see ClusterController.port
    broker_session_timeout_ms: int = BROKER_SESSION_TIMEOUT_MS
    unclean_leader_election_enable: bool = False  # the cluster default; topics may override it
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_ms: int = 300_000  # leader.imbalance.check.interval.seconds = 300
    leader_imbalance_per_broker_percentage: int = 10
    num_partitions: int = 1  # for CreateTopics asking for the default (-1)
    default_replication_factor: int = 1
    request_timeout_ms: int = 30_000  # Kafka's controller.socket.timeout.ms
    propagation_timeout_ms: int = 30_000  # how long settle() and CreateTopics wait for the brokers' answers
    channel: ChannelConfig = field(default_factory=ChannelConfig)
    max_connections: int = 1_000
    max_inflight_requests_per_connection: int = 16
    max_frame_bytes: int = 100 * 1024 * 1024  # socket.request.max.bytes
    # The local address of its connections to brokers (as the brokers' inter.broker.bind.host); None: the OS's.
    inter_broker_bind_host: str | None = None
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    # controller.quorum.* (replog/raft/config.py); None: a quorum of this controller alone.
    quorum: QuorumConfig | None = None
    metadata_snapshot_max_bytes: int = 20 * 1024 * 1024  # metadata.log.max.record.bytes.between.snapshots

    def __post_init__(self) -> None:
        assert self.inter_broker_secret, "a controller without inter.broker.secret cannot talk to brokers"
        assert self.controller_id >= 0
        assert 0 <= self.port < 65536
        assert self.broker_session_timeout_ms > 0
        assert self.num_partitions > 0 and self.default_replication_factor > 0
        assert self.metadata_snapshot_max_bytes > 0
        assert self.leader_imbalance_check_interval_ms > 0 and 0 <= self.leader_imbalance_per_broker_percentage <= 100


class ClusterController(QuorumRoles):
    def __init__(self, config: ControllerConfig, *, connect: ConnectFactory | None = None,
                 clock_ms=monotonic_ms) -> None:
        """connect(host, port) opens an authenticated connection to a broker (default: SASL/PLAIN with the
        inter-broker secret); clock_ms is the monotonic clock of broker sessions."""
        self.config = config
        self.clock_ms = clock_ms
        self.controller_epoch = FIRST_CONTROLLER_EPOCH
        self.metadata = ClusterMetadata()
        self.sessions = BrokerSessions(config.broker_session_timeout_ms)
        self.states = ClusterStates()  # partition and replica state machines (seed 000)
        # Deleted topics with replicas not yet deleted (their broker was away): retried when it registers.
        # Not in the metadata log: a restarted controller forgets them (their logs stay on those brokers).
        self._pending_deletions: dict[str, tuple[TopicRegistration, set[int]]] = {}
        self.channel = ControllerChannel(connect or self._open_broker_connection, config.channel)
        self.propagator = Propagator(self.channel, self.metadata, config.controller_id,
                                     lambda: self.controller_epoch, config.propagation_timeout_ms)
        self.connections = ConnectionHolder(config.max_connections)
        self._log: QuorumMetadataLog | None = None
        self._server: asyncio.AbstractServer | None = None
        self._tasks: list[asyncio.Task] = []
        self._metadata_push_needed = asyncio.Event()
        self._in_flight: set[asyncio.Task] = set()  # deliveries being watched, for settle()
        # Leadership moves of brokers in controlled shutdown; such a broker is told to stop only once
        # its successors have them (Kafka waits until the moves are replayed).
        self._shutdown_moves: dict[int, list[Delivery]] = {}
        # The log dir ids each broker has reported offline since it registered (KIP-858's OfflineLogDirs).
        self._offline_log_dirs: dict[int, frozenset[uuid.UUID]] = {}
        self.metrics_service: MetricsService | None = None
        self.stalls = 0  # times the event loop was found stalled (process_stalled)
        self.active = False  # this controller leads the quorum and has activated (KIP-631's active controller)
        self.activations = 0
        self.activated_at_ms: int | None = None  # by clock_ms, when this controller last became active
        # While active: the state of the committed records only, which a deposed controller falls back to.
        self._committed: ClusterMetadata | None = None
        self._activation: tuple[int, asyncio.Task] | None = None  # (epoch, task) waiting for the epoch to commit
        self._became_active = asyncio.Event()

    @property
    def controller_id(self) -> int:
        return self.config.controller_id

    @property
    def port(self) -> int:
        assert self._server is not None, "not started"
        return listening_port(self._server)

    async def start(self) -> None:
        """Start the quorum voter and the listener; a quorum of one is active when this returns, a controller
        among several voters activates when it is elected (wait_active)."""
        assert self._server is None
        config = self.config
        quorum = controller_quorum_config(config.controller_id, config.host, config.port, config.quorum)
        self._log = QuorumMetadataLog.start(config.metadata_log_dir, config.controller_id, quorum, config.cluster_id,
                                           self._open_controller_connection,
                                           policy=SnapshotPolicy(max_bytes=config.metadata_snapshot_max_bytes))
        if len(quorum.voter_ids) > 1:  # one voter: the fsync in append is the commit
            self.channel.gate = QuorumCommitGate(self._log.shell)
        self.metrics_service = MetricsService(
            config.metrics, node_id=config.controller_id, role="controller", data_dir=config.metadata_log_dir,
            collector=ControllerCollector(self),
            snapshot=lambda now_ms: controller_snapshot(self.metadata, self.controller_epoch))
        await self.metrics_service.start()
        dispatcher = Dispatcher(build_handlers(self, config.inter_broker_secret, self._log.shell.handlers()),
                                unsupported_version_body, api_specs=CONTROLLER_API_SPECS)
        self._server = await listen(config.host, config.port, self.connections, dispatcher,
                                    max_frame_bytes=config.max_frame_bytes,
                                    max_inflight=config.max_inflight_requests_per_connection, use_sendfile=False)
        self._log.shell.on_commit = self._on_quorum_step
        self._on_quorum_step()
        if len(quorum.voter_ids) == 1:
            await self.wait_active()
        log.info("controller %d listening on %s:%d, %s in epoch %d, %d brokers and %d topics in its log",
                 self.controller_id, config.host, self.port, "active" if self.active else "standby",
                 self._log.epoch, len(self.metadata.brokers), len(self.metadata.topics))

    async def stop(self) -> None:
        if self._activation is not None:
            self._activation[1].cancel()
        if self._server is not None:
            self._server.close()
        self.connections.close_all()
        for task in self._tasks + list(self._in_flight):
            task.cancel()
        await asyncio.gather(*self._tasks, *self._in_flight, return_exceptions=True)
        await self.channel.close()
        if self._server is not None:
            await self._server.wait_closed()
        if self.metrics_service is not None:
            await self.metrics_service.stop()
        if self._log is not None:
            await self._log.close()
        log.info("controller %d stopped", self.controller_id)

    async def settle(self) -> None:
        """Wait until every request sent so far is answered; raise PropagationError if some were not."""
        failures = []
        while self._in_flight or self._metadata_push_needed.is_set():
            if self._metadata_push_needed.is_set():
                self._push_metadata()  # now, rather than wait for the pusher's turn
            failures += [e for e in await asyncio.gather(*list(self._in_flight)) if e is not None]
        if failures:
            raise PropagationError([f for e in failures for f in e.failures])

    # --------------------------------------------------------------------------------- registration

    def register_broker(self, broker_id: int, incarnation_id: uuid.UUID, host: str, port: int,
                        rack: str | None = None, cluster_id: str | None = None,
                        listeners: tuple[tuple[str, str, int, int], ...] = ()) -> int:
        """A BrokerRegistration: returns the new broker epoch. The broker starts fenced; a heartbeat
        unfences it once it has the metadata. A broker registering again while unfenced restarted
        without a clean shutdown, so it is fenced first: its log may have lost unflushed records."""
        self._require_active()
        if cluster_id is not None and cluster_id != self.config.cluster_id:
            raise ControllerError(ErrorCode.inconsistent_cluster_id,
                                  f"broker {broker_id} is in cluster {cluster_id!r}, not {self.config.cluster_id!r}")
        # KRaft's broker epoch is the offset of the registration record; here the offset where registering
        # starts (fencing the previous incarnation may log records first): unique, and it only grows.
        epoch = self._log.next_offset
        previous = self.sessions.register(broker_id, incarnation_id, epoch, self.clock_ms())
        if previous is not None and previous is not BrokerState.FENCED:
            self._fence(broker_id, "registered again")
        registration = BrokerRegistration(broker_id, host, port, epoch, incarnation_id, rack, fenced=True,
                                          listeners=listeners)
        self._replace_broker(registration)
        # A new process: failed log dirs come back on restart (Kafka keeps a dir offline until then).
        self.metadata.clear_offline_replicas(broker_id)
        self._offline_log_dirs.pop(broker_id, None)
        if broker_id in self.channel.broker_ids:
            self.channel.remove_broker(broker_id)  # requests for its old incarnation; the resync covers them
        self.channel.add_broker(broker_id, host, port)
        deliveries = self.propagator.leader_and_isr(self.metadata.partitions_with_replica(broker_id),
                                                    broker_ids=[broker_id])
        deliveries += self.propagator.update_metadata([broker_id])
        self._watch(deliveries, f"registration of broker {broker_id}")
        for name, (topic, brokers_left) in list(self._pending_deletions.items()):
            if broker_id in brokers_left:
                self._spawn(self._retry_deletion(name, topic, broker_id))
        log.info("broker %d registered at %s:%d with epoch %d (incarnation %s)", broker_id, host, port, epoch,
                 incarnation_id)
        return epoch

    def broker_heartbeat(self, broker_id: int, broker_epoch: int, *, want_fence: bool,
                         want_shutdown: bool, offline_log_dirs: Collection[uuid.UUID] = ()) -> HeartbeatAnswer:
        """A BrokerHeartbeat: renews the session and acts on the broker's state change, and on log dirs it
        reports offline for the first time."""
        self._require_active()
        change = self.sessions.heartbeat(broker_id, broker_epoch, self.clock_ms(),
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
            self._spawn(self._find_offline_replicas(broker_id))
        if after is BrokerState.SHUTDOWN_NOW:
            self._shutdown_moves.pop(broker_id, None)
            if broker_id in self.channel.broker_ids:  # registered, never unfenced: _fence did not run
                self.channel.remove_broker(broker_id)
            log.info("broker %d may shut down now", broker_id)
        return HeartbeatAnswer(is_fenced=after in (BrokerState.FENCED, BrokerState.SHUTDOWN_NOW),
                               should_shut_down=after is BrokerState.SHUTDOWN_NOW)

    def fence_expired_brokers(self) -> list[int]:
        now = self.clock_ms()
        expired = self.sessions.fence_expired(now)
        for broker_id in expired:
            self._fence(broker_id, f"silent for more than {self.config.broker_session_timeout_ms} ms")
        for broker_id in self.sessions.end_silent_fenced(now):
            if broker_id in self.channel.broker_ids:
                self.channel.remove_broker(broker_id)
                log.warning("fenced broker %d went silent; no more requests to it", broker_id)
        return expired

    def _still_leads(self, broker_id: int) -> bool:
        moves = self._shutdown_moves.get(broker_id, [])
        return self.metadata.leads_any(broker_id) or any(not d.future.done() for d in moves)

    def _unfence(self, broker_id: int) -> None:
        broker = self.metadata.brokers[broker_id]
        self._replace_broker(dataclasses.replace(broker, fenced=False))
        # Its replicas in failed log dirs stay offline: only a restart (a new registration) brings them back.
        self.states.broker_changed(broker_id, [p for p in self.metadata.partitions_with_replica(broker_id)
                                               if broker_id not in self.metadata.offline_replicas_of(p)], live=True)
        deliveries = []
        if broker_id not in self.channel.broker_ids:  # fenced by silence: it missed every change since
            self.channel.add_broker(broker_id, broker.host, broker.port)
            deliveries += self.propagator.leader_and_isr(self.metadata.partitions_with_replica(broker_id),
                                                         broker_ids=[broker_id])
        changes = elect_offline_partitions(self.metadata.partitions_with_replica(broker_id),
                                           self.metadata.active_broker_ids(), self._unclean_allowed,
                                           self.metadata.offline_replicas_of)
        deliveries += self._commit_partition_changes(changes)
        self._watch(deliveries, f"unfencing broker {broker_id}")
        self._metadata_push_needed.set()
        log.info("broker %d unfenced; %d offline partitions got a leader", broker_id, len(changes))

    def _begin_controlled_shutdown(self, broker_id: int) -> None:
        broker = self.metadata.brokers[broker_id]
        self._replace_broker(dataclasses.replace(broker, in_controlled_shutdown=True))
        changes = without_broker(self.metadata.partitions_with_replica(broker_id), broker_id,
                                 self.metadata.active_broker_ids(), self._unclean_allowed,
                                 self.metadata.offline_replicas_of)
        deliveries = self._commit_partition_changes(changes)
        self._shutdown_moves[broker_id] = deliveries
        self._watch(deliveries, f"controlled shutdown of broker {broker_id}")
        self._metadata_push_needed.set()
        log.info("broker %d in controlled shutdown: %d partitions changed", broker_id, len(changes))

    def _fence(self, broker_id: int, reason: str, *, clean: bool = False) -> None:
        """Out of every ISR, leaderships moved, no more requests to it (it is resynced when it returns)."""
        broker = self.metadata.brokers[broker_id]
        self._replace_broker(dataclasses.replace(broker, fenced=True, in_controlled_shutdown=False))
        self.states.broker_changed(broker_id, self.metadata.partitions_with_replica(broker_id), live=False)
        if broker_id in self.channel.broker_ids:
            self.channel.remove_broker(broker_id)
        changes = without_broker(self.metadata.partitions_with_replica(broker_id), broker_id,
                                 self.metadata.active_broker_ids(), self._unclean_allowed,
                                 self.metadata.offline_replicas_of)
        self._watch(self._commit_partition_changes(changes), f"fencing broker {broker_id}")
        self._metadata_push_needed.set()
        offline = sum(1 for p in changes if not p.has_leader)
        log.log(logging.INFO if clean else logging.WARNING, "broker %d fenced (%s): %d partitions changed, "
                "%d without a leader", broker_id, reason, len(changes), offline)

    async def _find_offline_replicas(self, broker_id: int) -> None:
        """Which of the broker's replicas are in its failed dirs: ask it, as ZooKeeper-mode Kafka did after a
        log dir event (KIP-112), with a LeaderAndIsr for all of them; it answers KAFKA_STORAGE_ERROR for
        those. KRaft (KIP-858) would look the dirs up in replica-to-dir assignments instead, but replog's
        brokers choose where a log goes and do not tell the controller (no AssignReplicasToDirs)."""
        deliveries = self.propagator.leader_and_isr(self.metadata.partitions_with_replica(broker_id),
                                                    broker_ids=[broker_id])
        if deliveries:
            await asyncio.wait([d.future for d in deliveries], timeout=self.config.propagation_timeout_ms / 1000)
        offline = set()
        for delivery in deliveries:
            future = delivery.future
            if not future.done() or future.cancelled() or future.exception() is not None:
                continue  # fenced or silent meanwhile: fencing has moved all its leaderships already
            offline.update(parse_topic_partition(label) for label, error in delivery.errors_of(future.result())
                           if label is not None and error == ErrorCode.kafka_storage_error)
        if self.sessions.state(broker_id) is not BrokerState.FENCED:
            self.replicas_offline(broker_id, offline)

    def replicas_offline(self, broker_id: int, keys: Iterable[TopicPartition]) -> int:
        """The broker's replicas of `keys` are in a failed log dir: as if the broker had left, for those
        partitions only (out of their ISRs, leaderships moved), until it restarts. Returns how many
        partitions changed."""
        newly = self.metadata.mark_replicas_offline(broker_id, keys)
        if not newly:
            return 0
        self.states.replicas.transition(
            [PartitionReplica(TopicPartition(p.topic, p.partition), broker_id) for p in newly], ReplicaState.OFFLINE)
        eligible = [b for b in self.metadata.active_broker_ids() if b != broker_id]
        changes = without_broker(newly, broker_id, eligible, self._unclean_allowed, self.metadata.offline_replicas_of)
        self._watch(self._commit_partition_changes(changes), f"offline replicas of broker {broker_id}")
        self._metadata_push_needed.set()  # offline_replicas changed even where no leader or ISR did
        log.warning("broker %d has %d offline replicas: %d partitions changed, %d without a leader", broker_id,
                    len(newly), len(changes), sum(1 for p in changes if not p.has_leader))
        return len(changes)

    def _replace_broker(self, registration: BrokerRegistration) -> None:
        self._log.append([records.broker_record(registration)])
        self.metadata.brokers[registration.broker_id] = registration

    def _unclean_allowed(self, topic: str) -> bool:
        configured = self.metadata.topics[topic].configs.get("unclean.leader.election.enable")
        if configured is None:  # then the dynamic cluster-wide default (KIP-226), then the static one
            configured = self.metadata.broker_configs.get("", {}).get("unclean.leader.election.enable")
        if configured is None:
            return self.config.unclean_leader_election_enable
        return configured.lower() == "true"

    # ------------------------------------------------------------------------------------------- topics

    async def create_topic(self, name: str, assignment: Mapping[int, Sequence[int]] | None = None,
                           configs: Mapping[str, str] | None = None, *, partitions: int | None = None,
                           replication_factor: int | None = None, validate_only: bool = False) -> TopicRegistration:
        """Create a topic and wait until its replicas have it. Without an explicit assignment ({partition:
        replicas}; the first replica leads) replicas are assigned round-robin over the active brokers."""
        self._require_active()
        if name in self._pending_deletions:
            raise ControllerError(ErrorCode.topic_already_exists, f"topic {name!r} is marked for deletion: brokers "
                                  f"{sorted(self._pending_deletions[name][1])} have not deleted their replicas")
        if assignment is None:
            # None (the request's -1) takes the cluster default; 0 is refused by assign_replicas, as Kafka does.
            assignment = assign_replicas(
                self.metadata.active_broker_ids(),
                self.config.num_partitions if partitions is None else partitions,
                self.config.default_replication_factor if replication_factor is None else replication_factor,
                racks={b: self.metadata.brokers[b].rack for b in self.metadata.active_broker_ids()})
        inactive = sorted({r for replicas in assignment.values() for r in replicas
                           if r in self.metadata.brokers and not self.metadata.is_eligible(r)})
        if inactive:
            raise ControllerError(ErrorCode.invalid_replica_assignment, f"brokers {inactive} are fenced or "
                                  f"shutting down")
        topic = self.metadata.new_topic(name, assignment, configs or {})
        if validate_only:
            return topic
        self._log.append(records.new_topic_records(topic))
        self.metadata.add_topic(topic)
        self.states.topic_created(topic.partitions.values(), self.metadata.live_broker_ids())
        deliveries = self.propagator.leader_and_isr(topic.partitions.values(), is_new=True)
        deliveries += self.propagator.update_metadata()
        await self.propagator.wait(deliveries)
        log.info("created topic %s with %d partitions", name, len(topic.partitions))
        return topic

    async def delete_topic(self, name: str) -> TopicRegistration:
        """Replicas stop and delete their logs (StopReplica), then every broker forgets the topic."""
        self._require_active()
        if name not in self.metadata.topics:
            raise ControllerError(ErrorCode.unknown_topic_or_partition, f"no topic {name!r}")
        self._log.append([records.remove_topic_record(name)])
        topic = self.metadata.delete_topic(name)
        self.states.topic_deletion_started(topic.partitions.values())
        replica_brokers = {r for p in topic.partitions.values() for r in p.replicas}
        stopping = self.propagator.stop_replica(topic, delete=True)
        left = replica_brokers - {d.broker_id for d in stopping}  # away (fenced): deleted when they return
        try:
            await self.propagator.wait(stopping + self.propagator.update_metadata())
        except PropagationError as e:
            left |= {f.broker_id for f in e.failures if f.api == "STOP_REPLICA"}
            raise
        finally:
            self.states.topic_deletion_finished(topic.partitions.values(), left)
            if left:
                self._pending_deletions[name] = (topic, left)
                log.warning("topic %s deleted; brokers %s will delete their replicas when they return", name,
                            sorted(left))
        return topic

    async def _retry_deletion(self, name: str, topic: TopicRegistration, broker_id: int) -> None:
        """StopReplica(delete) for the replicas a returning broker still holds of a deleted topic."""
        keys = [PartitionReplica(TopicPartition(p.topic, p.partition), broker_id)
                for p in topic.partitions.values() if broker_id in p.replicas]
        # Kafka's retryDeletionForIneligibleReplicas: back to Offline, from which deletion may start again.
        self.states.replicas.transition(keys, ReplicaState.OFFLINE)
        self.states.replicas.transition(keys, ReplicaState.DELETION_STARTED)
        try:
            await self.propagator.wait(self.propagator.stop_replica(topic, delete=True, broker_ids=[broker_id]))
        except PropagationError as e:
            self.states.replicas.transition(keys, ReplicaState.DELETION_INELIGIBLE)
            log.warning("broker %d did not delete its replicas of deleted topic %s: %s", broker_id, name, e)
            return
        self.states.replicas.transition(keys, ReplicaState.DELETION_SUCCESSFUL)
        self.states.replicas.transition(keys, ReplicaState.NON_EXISTENT)
        brokers_left = self._pending_deletions[name][1]
        brokers_left.discard(broker_id)
        if not brokers_left:
            del self._pending_deletions[name]
        log.info("broker %d deleted its replicas of deleted topic %s", broker_id, name)

    def commit_records(self, new_records: list[records.Record]) -> None:
        """Log records (fsync), then apply them exactly as replay does: the commit of admin operations
        (controller/admin.py)."""
        self._require_active()
        self._log.append(new_records)
        records.replay(new_records, self.metadata)

    def registration(self, topic: str, partition: int) -> PartitionRegistration:
        return self.metadata.registration(topic, partition)

    def _commit_partition_changes(self, changes: Iterable[PartitionRegistration]) -> list[Delivery]:
        """Log, apply and send partition changes (LeaderAndIsr to their replicas); metadata follows."""
        changes = list(changes)
        if not changes:
            return []
        self._log.append([records.partition_record(p) for p in changes])
        self.metadata.apply(changes)
        self.states.partitions_changed(changes)
        return self.propagator.leader_and_isr(changes)

    # ----------------------------------------------------------------------------------- AlterPartition

    def alter_partition(self, request: Any, version: int) -> dict[str, Any]:
        """Decide, log and apply an authorized AlterPartition; returns the response body. The brokers learn
        the new ISRs from an UpdateMetadata sent soon after; the leader needs no LeaderAndIsr (KRaft)."""
        if not self.active:
            return alter_partition_error(ErrorCode.not_controller)
        decision = self.metadata.decide_alter_partition(request, version)
        if decision.changes:
            before = [self.metadata.registration(p.topic, p.partition) for p in decision.changes]
            self._log.append([records.partition_record(p) for p in decision.changes])
            self.metadata.apply(decision.changes)
            # The changes that completed a reassignment (KIP-455) move replicas and maybe the leader.
            moves = [(b, a) for b, a in zip(before, decision.changes, strict=True) if b.is_reassigning]
            if moves:
                self._spawn(send_moves(self.metadata, self.states, self.propagator, moves))
            self._metadata_push_needed.set()
        return decision.response

    # ------------------------------------------------------------------------------------ background

    async def _push_metadata_when_needed(self) -> None:
        # One push at a time; changes made meanwhile coalesce into the next full snapshot.
        while True:
            await self._metadata_push_needed.wait()
            if self._metadata_push_needed.is_set():  # settle() may have pushed it since the wake-up
                self._push_metadata()

    def _push_metadata(self) -> None:
        self._metadata_push_needed.clear()
        self._watch(self.propagator.update_metadata(), "metadata push")

    async def _fence_silent_brokers(self) -> None:
        interval_ms = min(MAX_FENCE_CHECK_INTERVAL_MS, max(1, self.config.broker_session_timeout_ms // 10))
        loop = asyncio.get_running_loop()
        last_check = loop.time()
        while True:
            await asyncio.sleep(interval_ms / 1000)
            gap_ms = (loop.time() - last_check) * 1000
            last_check = loop.time()
            if gap_ms > STALL_FACTOR * interval_ms:
                self.process_stalled(int(gap_ms))
            self.fence_expired_brokers()

    def process_stalled(self, gap_ms: int) -> None:
        """The event loop stopped for `gap_ms` (SIGSTOP, a frozen VM, a long pause): the heartbeats that came
        meanwhile wait unread in the sockets, so every broker gets a full session timeout from now, as from a
        newly active controller, instead of being fenced for a silence that was this controller's own."""
        self.sessions.restart_clocks(self.clock_ms())
        self.stalls += 1
        log.warning("controller %d was stalled for %d ms: every broker's session restarts now", self.controller_id,
                    gap_ms)

    async def _rebalance_leaders(self) -> None:
        while True:
            await asyncio.sleep(self.config.leader_imbalance_check_interval_ms / 1000)
            self.rebalance_leaders()

    def rebalance_leaders(self) -> int:
        """Hand leadership back to preferred replicas where it drifted (auto.leader.rebalance.enable)."""
        partitions = [p for t in self.metadata.topics.values() for p in t.partitions.values()]
        changes = preferred_leader_elections(partitions, self.metadata.active_broker_ids(),
                                             self.config.leader_imbalance_per_broker_percentage,
                                             self.metadata.offline_replicas_of)
        self._watch(self._commit_partition_changes(changes), "preferred leader election")
        if changes:
            self._metadata_push_needed.set()
            log.info("preferred leader election moved %d leaderships", len(changes))
        return len(changes)

    def _watch(self, deliveries: list[Delivery], what: str) -> None:
        if deliveries:
            self._spawn(self._report(deliveries, what))

    def _spawn(self, work) -> None:
        """Run `work` (returning a PropagationError or None) in the background; settle() and stop() see it."""
        task = asyncio.get_running_loop().create_task(work)
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    async def _report(self, deliveries: list[Delivery], what: str) -> PropagationError | None:
        try:
            await self.propagator.wait(deliveries)
        except PropagationError as e:
            log.warning("%s: %s", what, e)
            return e
        return None

    async def _open_controller_connection(self, host: str, port: int) -> Connection:
        """To another voter of the quorum: authenticated as the inter-broker principal, as to brokers."""
        return await self._open_broker_connection(host, port)

    async def _open_broker_connection(self, host: str, port: int) -> Connection:
        name = f"controller-{self.controller_id}"
        return await open_inter_broker_connection(
            host, port, client_id=name, username=name, secret=self.config.inter_broker_secret,
            request_timeout_ms=self.config.request_timeout_ms, max_frame_bytes=self.config.max_frame_bytes,
            local_host=self.config.inter_broker_bind_host)

