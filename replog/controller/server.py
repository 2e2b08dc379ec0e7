"""ClusterController: an in-process controller that owns the cluster's metadata and pushes it to brokers.

It plays the part of Kafka's ZooKeeper-mode controller towards the brokers (LeaderAndIsr, UpdateMetadata,
StopReplica, each carrying the controller id and epoch) and of the KRaft controller towards partition
leaders (AlterPartition; the leader learns its new ISR from the response and the others from metadata).
Tests and, later, the controller process drive it through methods: each change is decided and applied to
the metadata at once, then sent; the `async` methods return once every affected broker has applied it
(or raise PropagationError naming those that did not).

Single event loop, no locks: state changes are plain synchronous steps, and requests are built and queued
in the same step as the change they carry, so per-broker order equals the order of changes.
"""

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from replog.broker.connection import BrokerConnection, ConnectionHolder
from replog.broker.dispatch import Dispatcher
from replog.broker.inter_broker import open_inter_broker_connection
from replog.client.connection import Connection

from .channel import ChannelConfig, ConnectFactory, ControllerChannel
from .cluster import BrokerRegistration, ClusterMetadata, ControllerError, TopicRegistration
from .handlers import build_handlers, unsupported_version_body
from .propagation import PropagationError, Propagator
from .registry import PartitionRegistration

log = logging.getLogger(__name__)

# ZooKeeper-mode Kafka starts the controller epoch at 0 and increments it on every election, so the first
# controller runs in epoch 1. Brokers start at -1 and take the epoch of the first request they accept.
FIRST_CONTROLLER_EPOCH = 1


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    inter_broker_secret: str  # SASL/PLAIN password shared with the brokers (broker/auth.py)
    controller_id: int = 3000
    host: str = "127.0.0.1"
    port: int = 0  # 0: the OS picks one; see ClusterController.port
    request_timeout_ms: int = 30_000  # Kafka's controller.socket.timeout.ms
    propagation_timeout_ms: int = 30_000  # how long a method waits for the brokers' answers
    channel: ChannelConfig = field(default_factory=ChannelConfig)
    max_connections: int = 1_000
    max_inflight_requests_per_connection: int = 16
    max_frame_bytes: int = 100 * 1024 * 1024  # socket.request.max.bytes

    def __post_init__(self) -> None:
        assert self.inter_broker_secret, "a controller without inter.broker.secret cannot talk to brokers"
        assert self.controller_id >= 0
        assert 0 <= self.port < 65536


class ClusterController(ConnectionHolder):
    def __init__(self, config: ControllerConfig, *, connect: ConnectFactory | None = None) -> None:
        """connect(host, port) opens an authenticated connection to a broker (default: SASL/PLAIN with the
        inter-broker secret)."""
        self.config = config  # the SASL handlers read config.inter_broker_secret
        self.controller_epoch = FIRST_CONTROLLER_EPOCH
        self.metadata = ClusterMetadata()
        self.channel = ControllerChannel(connect or self._open_broker_connection, config.channel)
        self.propagator = Propagator(self.channel, self.metadata, config.controller_id,
                                     lambda: self.controller_epoch, config.propagation_timeout_ms)
        self.connections: set[BrokerConnection] = set()
        self.shutting_down = False
        self._server: asyncio.AbstractServer | None = None
        self._metadata_push_needed = asyncio.Event()
        self._metadata_pusher: asyncio.Task | None = None

    @property
    def controller_id(self) -> int:
        return self.config.controller_id

    @property
    def port(self) -> int:
        assert self._server is not None, "not started"
        return self._server.sockets[0].getsockname()[1]

    async def start(self) -> None:
        assert self._server is None
        config = self.config
        dispatcher = Dispatcher(build_handlers(self), unsupported_version_body)
        self._server = await asyncio.get_running_loop().create_server(
            lambda: BrokerConnection(self, dispatcher, max_frame_bytes=config.max_frame_bytes,
                                     max_inflight=config.max_inflight_requests_per_connection, use_sendfile=False),
            config.host, config.port, reuse_address=True)
        self._metadata_pusher = asyncio.create_task(self._push_metadata_when_needed(), name="controller-metadata")
        log.info("controller %d listening on %s:%d, epoch %d", self.controller_id, config.host, self.port,
                 self.controller_epoch)

    async def stop(self) -> None:
        self.shutting_down = True
        if self._server is not None:
            self._server.close()
        for connection in list(self.connections):
            connection.close()
        if self._metadata_pusher is not None:
            self._metadata_pusher.cancel()
            await asyncio.gather(self._metadata_pusher, return_exceptions=True)
        await self.channel.close()
        if self._server is not None:
            await self._server.wait_closed()
        log.info("controller %d stopped", self.controller_id)

    # ------------------------------------------------------------------------------------------ brokers

    async def add_broker(self, broker_id: int, host: str, port: int) -> None:
        """Register a broker (again, if it moved): it gets LeaderAndIsr for its partitions, every broker
        gets UpdateMetadata. Kafka's KafkaController.onBrokerStartup does the same."""
        self.metadata.add_broker(BrokerRegistration(broker_id, host, port))
        if broker_id in self.channel.broker_ids:
            self.channel.remove_broker(broker_id)  # requests for its old address; the resync below covers them
        self.channel.add_broker(broker_id, host, port)
        assert self.channel.broker_ids == sorted(self.metadata.brokers)
        deliveries = self.propagator.leader_and_isr(self.metadata.partitions_with_replica(broker_id),
                                                    broker_ids=[broker_id])
        deliveries += self.propagator.update_metadata()
        await self.propagator.wait(deliveries)

    async def remove_broker(self, broker_id: int) -> None:
        """Unregister a broker and tell the others. Its partitions keep their leaders and ISRs: moving them
        is an election (elect_leader), as fencing will be."""
        self.metadata.remove_broker(broker_id)
        self.channel.remove_broker(broker_id)
        assert self.channel.broker_ids == sorted(self.metadata.brokers)
        await self.propagator.wait(self.propagator.update_metadata())

    async def resync_broker(self, broker_id: int) -> None:
        """Send a broker (say, restarted) the LeaderAndIsr of all its partitions and the metadata."""
        if broker_id not in self.metadata.brokers:
            raise ControllerError(ErrorCode.broker_not_available, f"broker {broker_id} is not registered")
        deliveries = self.propagator.leader_and_isr(self.metadata.partitions_with_replica(broker_id),
                                                    broker_ids=[broker_id])
        deliveries += self.propagator.update_metadata([broker_id])
        await self.propagator.wait(deliveries)

    # ------------------------------------------------------------------------------------------- topics

    async def create_topic(self, name: str, assignment: Mapping[int, Sequence[int]],
                           configs: Mapping[str, str] | None = None) -> TopicRegistration:
        """assignment: {partition: replicas}; the first replica leads, all are in sync, epochs start at 0."""
        topic = self.metadata.create_topic(name, assignment, configs or {})
        deliveries = self.propagator.leader_and_isr(topic.partitions.values(), is_new=True)
        deliveries += self.propagator.update_metadata()
        await self.propagator.wait(deliveries)
        return topic

    async def delete_topic(self, name: str) -> TopicRegistration:
        """Replicas stop and delete their logs (StopReplica), then every broker forgets the topic."""
        topic = self.metadata.delete_topic(name)
        deliveries = self.propagator.stop_replica(topic, delete=True)
        deliveries += self.propagator.update_metadata()
        await self.propagator.wait(deliveries)
        return topic

    def registration(self, topic: str, partition: int) -> PartitionRegistration:
        return self.metadata.registration(topic, partition)

    # --------------------------------------------------------------------------------------- leadership

    async def elect_leader(self, topic: str, partition: int, leader: int,
                           isr: Sequence[int] | None = None) -> PartitionRegistration:
        """Make `leader` (a registered replica, in the new ISR) lead with `isr` (default: the current ISR);
        bumps the leader and partition epochs. Whether the choice is clean (a member of the current ISR) is
        the caller's business: the selectors that decide it come with the full controller."""
        changed = self.metadata.elect_leader(topic, partition, leader, isr)
        await self._propagate_partition_change(changed)
        return changed

    async def set_isr(self, topic: str, partition: int, isr: Sequence[int]) -> PartitionRegistration:
        """Change the ISR under the current leader (bumps the partition epoch only)."""
        changed = self.metadata.set_isr(topic, partition, isr)
        await self._propagate_partition_change(changed)
        return changed

    async def _propagate_partition_change(self, changed: PartitionRegistration) -> None:
        deliveries = self.propagator.leader_and_isr([changed])
        deliveries += self.propagator.update_metadata()
        await self.propagator.wait(deliveries)

    def bump_controller_epoch(self) -> int:
        """A new controller epoch, as a controller election makes; brokers then refuse the older one."""
        self.controller_epoch += 1
        return self.controller_epoch

    # ----------------------------------------------------------------------------------- AlterPartition

    def alter_partition(self, request: Any, version: int) -> dict[str, Any]:
        """Decide and apply an authorized AlterPartition; returns the response body. The brokers learn the
        new ISRs from an UpdateMetadata sent soon after; the leader needs no LeaderAndIsr (KRaft)."""
        decision = self.metadata.decide_alter_partition(request, version)
        self.metadata.apply(decision.changes)
        if decision.changes:
            self._metadata_push_needed.set()
        return decision.response

    async def _push_metadata_when_needed(self) -> None:
        # One push at a time; ISR changes made meanwhile coalesce into the next full snapshot.
        while True:
            await self._metadata_push_needed.wait()
            self._metadata_push_needed.clear()
            try:
                await self.propagator.wait(self.propagator.update_metadata())
            except PropagationError as e:
                log.warning("UpdateMetadata after an ISR change: %s", e)

    async def _open_broker_connection(self, host: str, port: int) -> Connection:
        name = f"controller-{self.controller_id}"
        return await open_inter_broker_connection(
            host, port, client_id=name, username=name, secret=self.config.inter_broker_secret,
            request_timeout_ms=self.config.request_timeout_ms, max_frame_bytes=self.config.max_frame_bytes)
