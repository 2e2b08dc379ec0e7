"""ClusterController: owns the cluster's metadata, keeps brokers' sessions, elects leaders, tells the brokers.

Towards the brokers it plays two of Kafka's parts (kafka-replication-facts.md, section 10):
- the KRaft controller: brokers register (BrokerRegistration, a new broker epoch each time) and heartbeat
  (BrokerHeartbeat); a broker silent for broker.session.timeout.ms is fenced, which removes it from every
  ISR and moves its leaderships; a broker that wants to stop goes through controlled shutdown first;
  partition leaders send AlterPartition; brokers forward CreateTopics / DeleteTopics (broker_control.py
  decides on brokers, replication_control.py on topics and partitions);
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
import ssl
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from replog.client.connection import Connection
from replog.client.security import ClientSecurity, SaslCredentials
from replog.log.partition_log import TopicPartition
from replog.metrics.service import MetricsService
from replog.protocol.apis import CONTROLLER_API_SPECS
from replog.raft.snapshots import SnapshotPolicy
from replog.security.authorizer import Authorizer, cluster_action_grants
from replog.server.connection import ConnectionHolder
from replog.server.dispatch import Dispatcher
from replog.server.inter_broker import open_node_connection
from replog.server.listener import ListenerSecurity, listen, listening_port
from replog.server.sasl import PLAIN

from . import records
from .broker_control import BrokerControl
from .channel import ConnectFactory, ControllerChannel
from .cluster import ClusterMetadata, TopicRegistration
from .config import FIRST_CONTROLLER_EPOCH, ControllerConfig, monotonic_ms
from .failover import QuorumCommitGate, QuorumRoles
from .handlers import build_handlers, unsupported_version_body
from .heartbeats import BrokerSessions, HeartbeatAnswer
from .metrics import ControllerCollector, controller_snapshot
from .propagation import Delivery, PropagationError, Propagator
from .quorum import QuorumMetadataLog, controller_quorum_config
from .registry import PartitionRegistration
from .replication_control import ReplicationControl
from .state_machines import ClusterStates

log = logging.getLogger(__name__)

__all__ = ["FIRST_CONTROLLER_EPOCH", "ClusterController", "ControllerConfig", "HeartbeatAnswer"]

# How often silent brokers are looked for; a tenth of the session timeout keeps detection within 10% late.
MAX_FENCE_CHECK_INTERVAL_MS = 1_000
# A fence check this many intervals late means the controller's own loop stopped, not the brokers.
STALL_FACTOR = 3


class ClusterController(QuorumRoles):
    """The controller process's core: the listener, the quorum's metadata log, the background tasks, and the
    public API, which BrokerControl (broker_control.py) and ReplicationControl (replication_control.py)
    implement on the state held here (controller/context.py says what they use)."""

    def __init__(self, config: ControllerConfig, *, connect: ConnectFactory | None = None,
                 clock_ms=monotonic_ms) -> None:
        """connect(host, port) opens an authenticated connection to a broker (default: as config.broker_link
        says); clock_ms is the monotonic clock of broker sessions."""
        self.config = config
        self.clock_ms = clock_ms
        self.controller_epoch = FIRST_CONTROLLER_EPOCH
        self.metadata = ClusterMetadata()
        self.sessions = BrokerSessions(config.broker_session_timeout_ms)
        self.states = ClusterStates()  # partition and replica state machines (seed 000)
        self.channel = ControllerChannel(connect or self._open_broker_connection, config.channel)
        self.propagator = Propagator(self.channel, self.metadata, config.controller_id,
                                     lambda: self.controller_epoch, config.propagation_timeout_ms,
                                     on_view_lost=self.request_metadata_push)
        self.replication_control = ReplicationControl(self)
        self.broker_control = BrokerControl(self, self.replication_control)
        self.connections = ConnectionHolder(config.max_connections)
        self._log: QuorumMetadataLog | None = None
        self._server: asyncio.AbstractServer | None = None
        self._tasks: list[asyncio.Task] = []
        self._metadata_push_needed = asyncio.Event()
        self._in_flight: set[asyncio.Task] = set()  # deliveries being watched, for settle()
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

    @property
    def metadata_log(self) -> QuorumMetadataLog:
        assert self._log is not None, "not started"
        return self._log

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
            snapshot=lambda now_ms: controller_snapshot(self.metadata, self.controller_epoch, self.active))
        await self.metrics_service.start()
        dispatcher = Dispatcher(build_handlers(self, config.inter_broker_secret, self._log.shell.handlers()),
                                unsupported_version_body, api_specs=CONTROLLER_API_SPECS)
        security = config.listener_security or ListenerSecurity(members=config.members)
        if config.authorizer.enabled:
            members = dataclasses.replace(security.members, acl_allows_cluster_action=self.acl_allows_cluster_action)
            security = dataclasses.replace(security, members=members)
        self._server = await listen(config.host, config.port, self.connections, dispatcher,
                                    max_frame_bytes=config.max_frame_bytes,
                                    max_inflight=config.max_inflight_requests_per_connection, use_sendfile=False,
                                    security=security)
        self._log.shell.on_commit = self._on_quorum_step
        self._on_quorum_step()
        if len(quorum.voter_ids) == 1:
            await self.wait_active()
        log.info("controller %d listening on %s:%d, %s in epoch %d, %d brokers and %d topics in its log",
                 self.controller_id, config.host, self.port, "active" if self.active else "standby",
                 self._log.epoch, len(self.metadata.brokers), len(self.metadata.topics))

    def acl_allows_cluster_action(self, principal: str, host: str) -> bool:
        """CLUSTER_ACTION by the ACLs of the metadata replayed so far (none before the log is read: only super
        users then, as KIP-801 says); the metadata object changes when this controller becomes active."""
        return cluster_action_grants(Authorizer(self.config.authorizer, self.metadata.acls))(principal, host)

    async def stop(self) -> None:
        if self._log is not None:
            # The active controller hands over first (EndQuorumEpoch): the standbys elect a new one now.
            await self._log.shell.resign()
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
                await self._push_metadata()  # now, rather than wait for the pusher's turn
            failures += [e for e in await asyncio.gather(*list(self._in_flight)) if e is not None]
        if failures:
            raise PropagationError([f for e in failures for f in e.failures])

    # ------------------------------------------------------------------------------ the public API

    def register_broker(self, broker_id: int, incarnation_id: uuid.UUID, host: str, port: int,
                        rack: str | None = None, cluster_id: str | None = None,
                        listeners: tuple[tuple[str, str, int, int], ...] = ()) -> int:
        return self.broker_control.register_broker(broker_id, incarnation_id, host, port, rack, cluster_id,
                                                   listeners)

    def broker_heartbeat(self, broker_id: int, broker_epoch: int, *, want_fence: bool,
                         want_shutdown: bool, offline_log_dirs: Collection[uuid.UUID] = ()) -> HeartbeatAnswer:
        return self.broker_control.broker_heartbeat(broker_id, broker_epoch, want_fence=want_fence,
                                                    want_shutdown=want_shutdown, offline_log_dirs=offline_log_dirs)

    def fence_expired_brokers(self) -> list[int]:
        return self.broker_control.fence_expired_brokers()

    def replicas_offline(self, broker_id: int, keys: Iterable[TopicPartition]) -> int:
        return self.broker_control.replicas_offline(broker_id, keys)

    async def create_topic(self, name: str, assignment: Mapping[int, Sequence[int]] | None = None,
                           configs: Mapping[str, str] | None = None, *, partitions: int | None = None,
                           replication_factor: int | None = None, validate_only: bool = False) -> TopicRegistration:
        return await self.replication_control.create_topic(name, assignment, configs, partitions=partitions,
                                                           replication_factor=replication_factor,
                                                           validate_only=validate_only)

    async def delete_topic(self, name: str) -> TopicRegistration:
        return await self.replication_control.delete_topic(name)

    def alter_partition(self, request: Any, version: int) -> dict[str, Any]:
        return self.replication_control.alter_partition(request, version)

    def rebalance_leaders(self) -> int:
        return self.replication_control.rebalance_leaders()

    def commit_records(self, new_records: list[records.Record]) -> None:
        """Log records (fsync), then apply them exactly as replay does: the commit of admin operations
        (controller/admin.py)."""
        self.require_active()
        self.metadata_log.append(new_records)
        records.replay(new_records, self.metadata)

    def registration(self, topic: str, partition: int) -> PartitionRegistration:
        return self.metadata.registration(topic, partition)

    # ------------------------------------------------------------------------------------ background

    async def _push_metadata_when_needed(self) -> None:
        # One push at a time; changes made meanwhile (which set the event again) go in the next one.
        while True:
            await self._metadata_push_needed.wait()
            if self._metadata_push_needed.is_set():  # settle() may have pushed it since the wake-up
                await self._push_metadata()

    def request_metadata_push(self) -> None:
        self._metadata_push_needed.set()

    async def _push_metadata(self) -> None:
        """Each broker gets what changed since its last update (all of it if it has none), built in chunks
        so that heartbeats are answered meanwhile; the changes made during the build go in the next push."""
        self._metadata_push_needed.clear()
        built = asyncio.get_running_loop().create_future()

        async def push() -> PropagationError | None:
            try:
                deliveries = await self.propagator.push_metadata()
            finally:
                if not built.done():
                    built.set_result(None)
            return await self._report(deliveries, "metadata push")

        self.spawn(push())  # in flight from now, so settle() waits for the build too
        await built

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

    def watch(self, deliveries: list[Delivery], what: str) -> None:
        if deliveries:
            self.spawn(self._report(deliveries, what))

    def spawn(self, work) -> None:
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
        """To another voter of the quorum, on its controller listener (PLAINTEXT with the shared secret on an
        unsecured cluster)."""
        return await self._open_node_connection(host, port, self.config.controller_link, None)

    async def _open_broker_connection(self, host: str, port: int) -> Connection:
        return await self._open_node_connection(host, port, self.config.broker_link, self.config.broker_ssl_context)

    async def _open_node_connection(self, host: str, port: int, link: ClientSecurity | None,
                                    tls: ssl.SSLContext | None) -> Connection:
        name = f"controller-{self.controller_id}"
        if link is None:  # an unsecured cluster: PLAIN with the secret every node shares
            assert self.config.inter_broker_secret
            link = ClientSecurity(tls, SaslCredentials(PLAIN, name, self.config.inter_broker_secret))
        return await open_node_connection(
            host, port, client_id=name, security=link, request_timeout_ms=self.config.request_timeout_ms,
            max_frame_bytes=self.config.max_frame_bytes, local_host=self.config.inter_broker_bind_host)

