"""The broker process: wires storage, replica manager, handlers and the listener; runs until SIGTERM.

Shutdown is staged like uvicorn's: stop accepting, stop reading new requests, let in-flight ones finish
(bounded by a timeout), answer parked operations, close connections, then flush the logs, write the
checkpoints and the clean-shutdown marker so the next start skips recovery.
"""

import asyncio
import functools
import inspect
import logging
import time
from collections.abc import Sequence
from pathlib import Path

from kio.schema.errors import ErrorCode

from replog.client.connection import Connection
from replog.client.errors import KafkaError
from replog.fetcher.leader_endpoint import RemoteLeaderEndpoint
from replog.fetcher.manager import FetcherConfig, LeaderInfo, ReplicaFetcherManager
from replog.fetcher.replication_quota import ReplicationQuota
from replog.log.dynamic_configs import ConfigResource
from replog.log.log_cleaner import LogCleaner
from replog.log.log_manager import LogManager
from replog.metrics.service import MetricsService
from replog.protocol.apis import ApiKey, response_header_version
from replog.protocol.headers import decode_response_header
from replog.protocol.messages import decode_response, encode_request
from replog.protocol.topics import OFFSETS_TOPIC
from replog.security.acl_requests import AclChanges
from replog.security.authorizer import AclIndex, Authorizer
from replog.server.api_versions import unsupported_version_body
from replog.server.connection import ConnectionHolder
from replog.server.dispatch import Dispatcher, Handler, RequestContext
from replog.server.inter_broker import open_node_connection
from replog.server.listener import ListenerSecurity, listen, listening_port
from replog.server.listener_security import build_listener_security
from replog.server.sasl import CredentialStore
from replog.server.scram_credentials import Deletion, Upsertion, UserResult

from .access import Access
from .alter_partition import AlterPartitionManager
from .config import BrokerConfig
from .controller_client import ControllerFinder, answers_not_controller
from .dynamic_config import apply_dynamic_configs
from .group_coordinator import GroupCoordinatorShell
from .handlers import BROKER_APIS, build_handlers
from .handlers.context import ConfigAdmin, ControlPlane, GroupCoordination, TopicAdmin, TopicDefaults
from .lifecycle import BrokerIdentity, BrokerLifecycleManager
from .local_controller import LocalController, TopicCreationError
from .metadata import BrokerEndpoint, MetadataImage, TopicMetadata
from .metrics import BrokerCollector, BrokerMetrics
from .metrics_dump import BrokerDump
from .replica_manager import ReplicaManager
from .stray_logs import delete_stray_logs

log = logging.getLogger(__name__)

# A controlled shutdown longer than this is given up on: the controller fences a silent broker anyway.
CONTROLLED_SHUTDOWN_MAX_WAIT_MS = 30_000


def clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.image = MetadataImage(config.cluster_id, config.node_id)
        self.image.brokers[config.node_id] = BrokerEndpoint.from_listener(config.node_id, config.advertised)
        self.connections = ConnectionHolder(config.max_connections)
        self.stop_requested = asyncio.Event()  # set when the broker must stop on its own (every log dir failed)
        self._servers: dict[str, asyncio.AbstractServer] = {}  # by listener name, in the order configured
        self._periodic: list[asyncio.Task] = []
        self.log_manager: LogManager | None = None
        self.log_cleaner: LogCleaner | None = None
        self.controller: LocalController | None = None
        self.replica_manager: ReplicaManager | None = None
        self.groups: GroupCoordinatorShell | None = None
        self._offsets_topic_creation: asyncio.Task | None = None  # in a cluster: asking the controller
        self.alter_partition_manager: AlterPartitionManager | None = None
        self.lifecycle: BrokerLifecycleManager | None = None
        self.metrics = BrokerMetrics(config.node_id)
        self.metrics_service: MetricsService | None = None
        self._controller_connection: Connection | None = None  # for forwarded topic administration
        # Which controller of controller.quorum.bootstrap.servers the session, AlterPartition and forwarding use.
        self._controllers = (ControllerFinder(config.controller_addresses, self.connect_to_node)
                             if config.controller_addresses else None)
        self._metadata_broker_epoch = -1  # the broker epoch of the last UpdateMetadata applied
        # How this broker logs in to leaders and to the controllers (server/inter_broker.py).
        in_cluster = bool(config.controller_addresses)
        self._broker_link = config.broker_link_security() if in_cluster else None
        self._controller_link = config.controller_link_security() if in_cluster else None
        self.has_metadata = asyncio.Event()  # set by the first UpdateMetadata: until then Metadata requests wait

    @property
    def in_cluster(self) -> bool:
        """Whether a controller process runs this broker's leadership (else it is a single self-run node)."""
        return self.config.controller_address is not None

    async def start(self) -> None:
        config = self.config
        for directory in config.log_dirs:
            directory.mkdir(parents=True, exist_ok=True)
        self.log_manager = LogManager(config.log_dirs, config.log_config(), clock_ms=clock_ms,
                                      file_budget=config.file_budget())
        # In a cluster, producer ids come from a range of this broker's own so brokers never hand out the same.
        self.controller = LocalController(config.log_dirs[0], self.image, config.node_id,
                                          manages_topics=not self.in_cluster,
                                          producer_id_base=config.node_id << 32 if self.in_cluster else 0)
        self.log_manager.start_background_checkpoints()  # before any leadership touches an epoch cache
        self.replica_manager = self._build_replica_manager()
        # Before any leadership is applied: the offsets partitions this broker leads at start are loaded too.
        self.groups = GroupCoordinatorShell(config.group, self.replica_manager, clock_ms)
        self.replica_manager.leadership_listener = self.groups.on_leadership
        self.log_manager.failure_channel.subscribe(self._on_log_dir_failure)
        self.log_cleaner = LogCleaner(self.log_manager, config.cleaner_config(), clock_ms=clock_ms)
        self.log_cleaner.start()
        if self.in_cluster:
            self.alter_partition_manager.start()
        else:
            self.replica_manager.apply_metadata(self.image)
            apply_dynamic_configs(self.replica_manager, self.image, config)  # as persisted by the last run
        self.metrics_service = MetricsService(
            config.metrics, node_id=config.node_id, role="broker", data_dir=config.log_dirs[0],
            collector=BrokerCollector(self.metrics, self.replica_manager, self.connections),
            snapshot=BrokerDump(self.metrics, self.replica_manager).snapshot)
        self.metrics.dumper = self.metrics_service.dumper
        await self.metrics_service.start()
        dispatcher = Dispatcher(self._build_handlers(), functools.partial(unsupported_version_body, BROKER_APIS),
                                observe_request=self.metrics.observe_request)
        specs = config.listener_specs
        for spec, security in zip(specs, listener_securities(config, self.image.scram, self.image.acls), strict=True):
            self._servers[spec.name] = await listen(
                spec.host, spec.port, self.connections, dispatcher, max_frame_bytes=config.socket_request_max_bytes,
                max_inflight=config.max_inflight_requests_per_connection, use_sendfile=config.fetch_sendfile_enable,
                idle_timeout_ms=config.connections_max_idle_ms, backlog=1024, security=security)
        inter_broker_host, inter_broker_port = self.advertised_listeners[config.inter_broker_listener.name]
        self.image.brokers[config.node_id] = BrokerEndpoint(config.node_id, inter_broker_host, inter_broker_port,
                                                            config.broker_rack, self.advertised_listeners)
        self._periodic = [
            asyncio.create_task(self._every(config.replica_high_watermark_checkpoint_interval_ms,
                                            self.log_manager.checkpoint_high_watermarks)),
            asyncio.create_task(self._every(config.log_retention_check_interval_ms, self._cleanup_retention)),
            asyncio.create_task(self._every(config.log_flush_offset_checkpoint_interval_ms,
                                            self._checkpoint_offsets)),
            # Kafka's isr-expiration task runs every replica.lag.time.max.ms / 2 (KAFKA-4485).
            asyncio.create_task(self._every(config.replica_lag_time_max_ms // 2,
                                            self.replica_manager.maybe_shrink_isr)),
        ]
        if self.in_cluster:
            # Register only once listening: the controller connects back as soon as it accepts us.
            self.lifecycle = self._build_lifecycle_manager()
            self.lifecycle.start()
        for spec in specs:
            log.info("replog broker %d listening on %s://%s:%d (%s)", config.node_id, spec.name, spec.host,
                     self.listener_ports[spec.name], spec.protocol.name)

    def _build_handlers(self) -> dict[int, Handler]:
        config = self.config
        defaults = TopicDefaults(config.num_partitions, config.default_replication_factor, config.log_config(),
                                 auto_create=config.auto_create_topics_enable)
        access = Access(Authorizer(config.authorizer_config(), self.image.acls))
        topics = TopicAdmin(self.image, defaults, self.create_topic, self.delete_topic,
                            forward_to_controller=self.forward_to_controller if self.in_cluster else None,
                            has_metadata=self.has_metadata, access=access,
                            send_to_controller=self.send_to_controller if self.in_cluster else None)
        control = ControlPlane(self.replica_manager, self.image, registration=self)
        groups = GroupCoordination(self.groups, self.image, self.ensure_offsets_topic, access)
        admin = ConfigAdmin(self.image, config, local=self,
                            forward_to_controller=self.forward_to_controller if self.in_cluster else None,
                            access=access)
        return build_handlers(self.replica_manager, access, topics, control, groups,
                              self.controller.allocate_producer_id, config.inter_broker_secret, admin)

    def _build_lifecycle_manager(self) -> BrokerLifecycleManager:
        config = self.config
        inter_broker = config.inter_broker_listener
        advertised = self.advertised_listeners
        host, port = advertised[inter_broker.name]
        others = tuple((spec.name, *advertised[spec.name], spec.protocol.value)
                       for spec in config.listener_specs if spec.name != inter_broker.name)
        identity = BrokerIdentity(config.node_id, config.cluster_id, host, port, config.broker_rack,
                                  other_listeners=others, listener_name=inter_broker.name)
        assert self._controllers is not None
        lifecycle = BrokerLifecycleManager(
            identity, self._controllers.connector(f"lifecycle-{config.node_id}"),
            heartbeat_interval_ms=config.broker_heartbeat_interval_ms,
            shutdown_max_retries=config.controlled_shutdown_max_retries,
            shutdown_retry_backoff_ms=config.controlled_shutdown_retry_backoff_ms,
            has_metadata=lambda epoch: self._metadata_broker_epoch == epoch,
            offline_log_dirs=lambda: [self.log_manager.directory_id(d)
                                      for d in self.log_manager.failure_channel.offline_dirs])
        lifecycle.on_controller_lost = self._controllers.lost
        return lifecycle

    def _on_log_dir_failure(self, log_dir: Path, error: OSError) -> None:
        """The replica manager has taken the dir's partitions offline; tell the controller now. With no
        dir left, stop, as Kafka's ReplicaManager.handleLogDirFailure does (cleanly here, not Exit.halt)."""
        if self.lifecycle is not None:
            self.lifecycle.propagate_directory_failure()
        if not self.log_manager.online_dirs:
            log.critical("every log dir has failed; broker %d shuts down", self.config.node_id)
            self.stop_requested.set()

    def metadata_applied(self, broker_epoch: int) -> None:
        """The controller's UpdateMetadata for the registration with `broker_epoch` has been applied."""
        if (own := self.image.brokers.get(self.config.node_id)) is not None:
            own.listeners = self.advertised_listeners  # the controller knows only our inter-broker address
        if broker_epoch != self._metadata_broker_epoch:  # the first metadata of this registration
            delete_stray_logs(self.replica_manager, self.image)
        self._metadata_broker_epoch = broker_epoch
        self.has_metadata.set()
        apply_dynamic_configs(self.replica_manager, self.image, self.config)

    def is_stale_broker_epoch(self, broker_epoch: int) -> bool:
        """A controller request meant for an earlier registration of this broker (Kafka's
        isBrokerEpochStale); -1 means the sender does not check."""
        return self.lifecycle is not None and broker_epoch != -1 and broker_epoch < self.lifecycle.broker_epoch

    async def forward_to_controller(self, ctx: RequestContext, body: bytes | None = None) -> bytes:
        """Send a client's request on to the controller (unchanged, or with `body` instead of its own) and return
        the response body (KIP-590)."""
        own = memoryview(ctx.frame)[ctx.body_offset:]
        return await self.send_to_controller(ctx.header.api_key, ctx.api_version, own if body is None else body)

    async def send_to_controller(self, api_key: int, version: int, body: bytes | memoryview) -> bytes:
        """A request body to the active controller, its answer body back. An unreachable controller, or a
        standby's NOT_CONTROLLER, sends it on to the next controller, as Kafka's forwarding manager retries, at
        most once per configured controller."""
        assert self._controllers is not None
        current = self._controller_connection
        # Follow where the session (heartbeats answered NOT_CONTROLLER) found the active controller; a forwarded
        # answer's own NOT_CONTROLLER is caught below.
        if current is not None and not current.closed and not self._controllers.leads_to_current(current):
            current.close()
        parts = [body]
        attempts = len(self.config.controller_addresses)
        for attempt in range(1, attempts + 1):
            try:
                if self._controller_connection is None or self._controller_connection.closed:
                    connect = self._controllers.connector(f"forwarding-{self.config.node_id}")
                    self._controller_connection = await connect()  # an unreachable one: the finder moves on
                connection = self._controller_connection
                frame = await connection.request(api_key, version, parts)
            except (KafkaError, OSError):
                if self._controller_connection is not None:
                    self._controllers.lost(self._controller_connection)
                    self._controller_connection = None
                if attempt == attempts:
                    raise
                continue
            _, offset = decode_response_header(frame, response_header_version(api_key, version))
            answer = bytes(frame[offset:])
            if not answers_not_controller(api_key, version, answer):
                break
            self._controllers.lost(connection)
            connection.close()
        return answer

    def _build_replica_manager(self) -> ReplicaManager:
        config = self.config
        fetcher_manager = alter_isr = None
        if self.in_cluster:
            fetcher_config = FetcherConfig(
                replica_id=config.node_id, max_wait_ms=config.replica_fetch_wait_max_ms,
                min_bytes=config.replica_fetch_min_bytes, max_bytes=config.replica_fetch_response_max_bytes,
                partition_max_bytes=config.replica_fetch_max_bytes, backoff_ms=config.replica_fetch_backoff_ms,
                num_fetchers=config.num_replica_fetchers, request_timeout_ms=config.replica_socket_timeout_ms)

            def leader_endpoint(leader: LeaderInfo, fetcher_id: int) -> RemoteLeaderEndpoint:
                client_id = f"replica-fetcher-{config.node_id}-{leader.broker_id}-{fetcher_id}"
                return RemoteLeaderEndpoint(
                    lambda: self.connect_to_node(leader.host, leader.port, client_id, to_broker=True), config.node_id,
                    fetcher_config)

            follower_quota = self._replication_quota()
            fetcher_manager = ReplicaFetcherManager(fetcher_config, leader_endpoint, clock_ms,
                                                    on_fetched=self.metrics.record_follower_fetch,
                                                    quota=follower_quota)
            assert self._controllers is not None
            self.alter_partition_manager = AlterPartitionManager(
                config.node_id, self._controllers.connector(f"alter-partition-{config.node_id}"),
                lambda *args, **kwargs: self.replica_manager.complete_isr_change(*args, **kwargs),
                broker_epoch=lambda: -1 if self.lifecycle is None else self.lifecycle.broker_epoch)
            self.alter_partition_manager.on_controller_lost = self._controllers.lost
            alter_isr = self.alter_partition_manager.submit
        replica_manager = ReplicaManager(
            config.node_id, self.log_manager, config.log_config(), config.min_insync_replicas,
            clock_ms=clock_ms, replica_lag_time_max_ms=config.replica_lag_time_max_ms,
            fetch_purgatory_size=config.fetch_purgatory_max_size,
            produce_purgatory_size=config.producer_purgatory_max_size,
            fetcher_manager=fetcher_manager, alter_isr=alter_isr, metrics=self.metrics,
            fetch_session_cache_slots=config.max_incremental_fetch_session_cache_slots,
            fetch_max_bytes=config.fetch_max_bytes)
        if self.in_cluster:  # replication throttles (KIP-73), configured by apply_dynamic_configs
            replica_manager.leader_quota = self._replication_quota()
            replica_manager.follower_quota = follower_quota
        return replica_manager

    def _replication_quota(self) -> ReplicationQuota:
        return ReplicationQuota(clock_ms, windows=self.config.replication_quota_window_num,
                                window_ms=self.config.replication_quota_window_size_seconds * 1000)

    async def connect_to_node(self, host: str, port: int, client_id: str, *, to_broker: bool = False):
        """An authenticated connection as a cluster member: to a leader (to_broker: its inter-broker listener),
        or to a controller (its controller listener)."""
        security = self._broker_link if to_broker else self._controller_link
        assert security is not None, "a broker without controllers links to no other node"
        return await open_node_connection(
            host, port, client_id=client_id, security=security,
            request_timeout_ms=self.config.replica_socket_timeout_ms,
            max_frame_bytes=max(self.config.socket_request_max_bytes,
                                2 * self.config.replica_fetch_response_max_bytes),
            local_host=self.config.inter_broker_bind_host)

    @property
    def port(self) -> int:
        """The first listener's port."""
        return listening_port(next(iter(self._servers.values())))

    @property
    def listener_ports(self) -> dict[str, int]:
        return {name: listening_port(server) for name, server in self._servers.items()}

    @property
    def advertised_listeners(self) -> dict[str, tuple[str, int]]:
        """Advertised address per listener; a listener advertised on port 0 advertises the port it got."""
        ports = self.listener_ports
        return {spec.name: (spec.advertised_host, spec.advertised_port or ports[spec.name])
                for spec in self.config.listener_specs}

    # topic administration (single node: the local controller decides, the replica manager acts)
    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str], *,
                     validate_only: bool = False) -> TopicMetadata:
        topic = self.controller.create_topic(name, partitions, replication_factor, configs,
                                             validate_only=validate_only)
        if not validate_only:
            self.replica_manager.apply_metadata(self.image)
        return topic

    def ensure_offsets_topic(self) -> None:
        """Create __consumer_offsets on first use, as Kafka does (offsets.topic.* settings, replication
        capped by the live brokers, compacted): a single node at once, a cluster's broker through its
        controller, in the background (FindCoordinator answers COORDINATOR_NOT_AVAILABLE meanwhile)."""
        if OFFSETS_TOPIC in self.image.topics:
            return
        group = self.config.group
        replication = max(1, min(group.offsets_topic_replication_factor, len(self.image.brokers)))
        configs = {"cleanup.policy": "compact", "segment.bytes": str(group.offsets_topic_segment_bytes)}
        if not self.in_cluster:
            try:
                self.create_topic(OFFSETS_TOPIC, group.offsets_topic_num_partitions, replication, configs)
            except TopicCreationError as e:
                log.error("creating %s failed: %s", OFFSETS_TOPIC, e)
        elif self._offsets_topic_creation is None or self._offsets_topic_creation.done():
            self._offsets_topic_creation = asyncio.create_task(
                self._create_topic_through_controller(OFFSETS_TOPIC, group.offsets_topic_num_partitions,
                                                      replication, configs))

    async def _create_topic_through_controller(self, name: str, partitions: int, replication: int,
                                               configs: dict[str, str]) -> None:
        version = 5
        body = encode_request(ApiKey.CREATE_TOPICS, version, {
            "topics": [{"name": name, "num_partitions": partitions, "replication_factor": replication,
                        "assignments": [], "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
            "timeout": 30_000, "validate_only": False})
        try:
            if self._controller_connection is None or self._controller_connection.closed:
                host, port = self.config.controller_address
                self._controller_connection = await self.connect_to_node(host, port,
                                                                         f"forwarding-{self.config.node_id}")
            frame = await self._controller_connection.request(ApiKey.CREATE_TOPICS, version, [body])
        except (OSError, KafkaError) as e:
            log.warning("asking the controller to create %s failed: %s", name, e)
            return
        _, offset = decode_response_header(frame, response_header_version(ApiKey.CREATE_TOPICS, version))
        for topic in decode_response(ApiKey.CREATE_TOPICS, version, frame, offset).topics:
            if topic.error_code not in (ErrorCode.none, ErrorCode.topic_already_exists):
                log.error("the controller refused to create %s: %s %s", name, topic.error_code.name,
                          topic.error_message)

    def delete_topic(self, name: str) -> TopicMetadata | None:
        topic = self.controller.delete_topic(name)
        if topic is not None:
            self.replica_manager.apply_metadata(self.image)
        return topic

    def alter_configs(self, resources: list[ConfigResource], *, incremental: bool,
                      validate_only: bool) -> list[tuple[ErrorCode, str | None]]:
        outcomes = self.controller.alter_configs(resources, incremental=incremental, validate_only=validate_only)
        if not validate_only:
            apply_dynamic_configs(self.replica_manager, self.image, self.config)
        return outcomes

    def create_partitions(self, name: str, count: int, assignment: list[list[int]] | None, *,
                          validate_only: bool) -> None:
        self.controller.create_partitions(name, count, assignment, validate_only=validate_only)
        if not validate_only:
            self.replica_manager.apply_metadata(self.image)

    def change_acls(self, changes: AclChanges) -> None:
        self.controller.change_acls(changes)

    def alter_scram_credentials(self, deletions: Sequence[Deletion],
                                upsertions: Sequence[Upsertion]) -> list[UserResult]:
        return self.controller.alter_scram_credentials(deletions, upsertions)

    # background work
    async def _every(self, interval_ms: int, action) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                result = action()
                if inspect.isawaitable(result):
                    await result
            except OSError:
                log.exception("periodic %s failed", getattr(action, "__name__", action))

    def _cleanup_retention(self) -> None:
        deleted = self.log_manager.cleanup_retention()
        if deleted:
            log.info("retention deleted %d segment(s)", deleted)

    async def _checkpoint_offsets(self) -> None:
        await self._flush_rolled_segments()
        # The epoch changes of every batch below the new recovery points are on disk before those points are:
        # recovery rebuilds epochs only from the batches past the checkpointed point (epoch_cache.py).
        await self.log_manager.flush_background_checkpoints()
        self.log_manager.checkpoint_recovery_points()
        self.log_manager.checkpoint_log_start_offsets()

    async def _flush_rolled_segments(self) -> None:
        """fsync the segments rolled since the last pass, off the event loop, and move each log's recovery
        point to its active segment: a crash then recovers only the active segment (and any rolled since),
        not the whole log. Kafka flushes at each roll (UnifiedLog.roll); here it waits for the next pass."""
        tickets = [(partition_log, ticket) for partition_log in self.log_manager.all_logs()
                   if not partition_log.is_offline
                   and (ticket := partition_log.prepare_flush_of_rolled_segments()) is not None]

        def fsync_all() -> list[bool]:
            synced = []
            for partition_log, ticket in tickets:
                try:
                    ticket.fsync()
                    synced.append(True)
                except OSError:  # deleted meanwhile, or a failing disk: its recovery point stays
                    log.warning("flushing %s failed", partition_log, exc_info=True)
                    synced.append(False)
            return synced

        for (partition_log, ticket), synced in zip(tickets, await asyncio.to_thread(fsync_all), strict=True):
            if synced:
                partition_log.complete_flush(ticket)

    async def stop(self) -> None:
        if self.lifecycle is not None and self.config.controlled_shutdown_enable:
            # Still serving: clients keep producing to our leaderships until the controller moves them.
            await self.lifecycle.controlled_shutdown(CONTROLLED_SHUTDOWN_MAX_WAIT_MS)
        for server in self._servers.values():
            server.close()
        self.connections.stop_reading()
        # Parked JoinGroup / SyncGroup answer NOT_COORDINATOR; fetchers stop, and parked operations answer
        # now with what they have, so in-flight responses drain.
        await self.groups.shutdown()
        await self.replica_manager.shutdown()
        if self.alter_partition_manager is not None:
            await self.alter_partition_manager.stop()
        if self.lifecycle is not None:
            await self.lifecycle.stop()
        if self._controller_connection is not None:
            self._controller_connection.close()
        await self.connections.drain(self.config.shutdown_drain_timeout_ms / 1000)
        self.connections.close_all()
        for task in self._periodic:
            task.cancel()
        await self.metrics_service.stop()  # a last snapshot: the state the logs are closed with
        await self.log_cleaner.stop()  # its threads read the segments the shutdown closes
        await self.log_manager.stop_background_checkpoints()
        self.log_manager.shutdown()
        log.info("replog broker %d stopped cleanly", self.config.node_id)


def listener_securities(config: BrokerConfig, metadata_credentials: CredentialStore | None = None,
                        acls: AclIndex | None = None) -> list[ListenerSecurity]:
    """Each listener's TLS context and SASL setup, in listener order; ValueError names what is wrong.
    metadata_credentials and acls: the SCRAM credentials and ACLs UpdateMetadata brings (the image's)."""
    members = config.cluster_members(acls)
    return [build_listener_security(spec, config.security_props, metadata_credentials, members)
            for spec in config.listener_specs]
