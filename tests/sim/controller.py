"""A simulated controller: the production controller cores, wired as ClusterController wires them.

The decisions are production code: ClusterMetadata (registrations, AlterPartition validation and apply),
BrokerSessions (registration, heartbeats, fencing on silence), the leadership functions (offline and
preferred elections, removal of a fenced broker from ISRs) and ClusterStates (the state machines, which raise
on an illegal transition). ClusterController itself is asyncio and sockets, so its glue is restated here,
method for method (register_broker, broker_heartbeat, fence_expired_brokers, _fence, _unfence,
_commit_partition_changes, alter_partition, rebalance_leaders, and reassignment_ops' start, completion and
cancel of reassignments over the pure rules of replog.controller.reassignment), with its channel as an
in-order, retried queue of LeaderAndIsr and StopReplica per broker, as ControllerChannel's RequestSendThread is. Not modelled: controller
failover (one controller that never crashes), controlled shutdown, UpdateMetadata (clients and followers
here learn leaders from LeaderAndIsr or from the controller directly).
"""

from __future__ import annotations

import collections
import dataclasses
import uuid
from collections.abc import Callable
from types import SimpleNamespace
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from replog.controller import reassignment
from replog.controller.cluster import BrokerRegistration, ClusterMetadata, ControllerError, TopicRegistration
from replog.controller.heartbeats import BrokerSessions, BrokerState
from replog.controller.leadership import elect_offline_partitions, preferred_leader_elections, without_broker
from replog.controller.registry import PartitionRegistration
from replog.controller.state_machines import ClusterStates
from replog.log.partition_log import TopicPartition

if TYPE_CHECKING:
    from .simulation import World

CHANNEL_RETRY_MS = 40
FENCE_CHECK_INTERVAL_MS = 30
REBALANCE_INTERVAL_MS = 700
IMBALANCE_PERCENTAGE = 10


@dataclasses.dataclass(slots=True)
class _Delivery:
    registration: PartitionRegistration
    broker_epoch: int  # the target's registered epoch when queued: a restarted broker refuses stale ones
    stop: bool = False  # a StopReplica with delete (a reassignment removed the replica), not a LeaderAndIsr


class SimController:
    node = "controller"

    def __init__(self, world: World, session_timeout_ms: int) -> None:
        self.world = world
        self.metadata = ClusterMetadata()
        self.sessions = BrokerSessions(session_timeout_ms)
        self.states = ClusterStates()
        self._next_broker_epoch = 0  # KRaft's record offset: unique and growing
        self._channels: dict[int, collections.deque[_Delivery]] = {}
        self._sending: dict[int, _Delivery] = {}
        self.topic: TopicRegistration | None = None

    def start(self, incarnations: dict[int, uuid.UUID], topic: str, assignment: dict[int, tuple[int, ...]],
              configs: dict[str, str]) -> None:
        """Register every broker, unfenced, and create the topic (done before the run, without messages)."""
        now = self.world.clock()
        for broker_id, incarnation in sorted(incarnations.items()):
            epoch = self._new_broker_epoch()
            self.sessions.restore(broker_id, incarnation, epoch, fenced=False, now_ms=now)
            self.metadata.add_broker(BrokerRegistration(broker_id, "127.0.0.1", 9000 + broker_id, epoch, incarnation))
            self._channels[broker_id] = collections.deque()
        self.topic = self.metadata.create_topic(topic, assignment, configs)
        self.states.topic_created(self.topic.partitions.values(), set(self.metadata.active_broker_ids()))
        self._send_leader_and_isr(self.topic.partitions.values())
        self._every(FENCE_CHECK_INTERVAL_MS, self.fence_expired_brokers)
        self._every(REBALANCE_INTERVAL_MS, self.rebalance_leaders)

    def broker_epoch_of(self, broker_id: int) -> int:
        return self.metadata.brokers[broker_id].epoch

    def _new_broker_epoch(self) -> int:
        self._next_broker_epoch += 1
        return self._next_broker_epoch

    def _every(self, period_ms: int, action: Callable[[], object]) -> None:
        def tick() -> None:
            action()
            self.world.events.after(period_ms, tick)
        self.world.events.after(period_ms, tick)

    # ------------------------------------------------------------- sessions

    def register(self, broker_id: int, incarnation_id: uuid.UUID, reply: Callable[[int], None]) -> None:
        """ClusterController.register_broker; answers the new epoch, or -1 when refused."""
        epoch = self._new_broker_epoch()
        try:
            previous = self.sessions.register(broker_id, incarnation_id, epoch, self.world.clock())
        except ControllerError:
            reply(-1)  # DUPLICATE_BROKER_REGISTRATION: the old incarnation's session is still alive
            return
        if previous is not None and previous is not BrokerState.FENCED:
            self._fence(broker_id)
        old = self.metadata.brokers[broker_id]
        self.metadata.brokers[broker_id] = dataclasses.replace(old, epoch=epoch, incarnation_id=incarnation_id,
                                                               fenced=True, in_controlled_shutdown=False)
        self._channels[broker_id] = collections.deque()  # the old incarnation's requests are dropped
        self._sending.pop(broker_id, None)
        self._send_leader_and_isr(self.metadata.partitions_with_replica(broker_id), broker_ids=[broker_id])
        reply(epoch)

    def heartbeat(self, broker_id: int, broker_epoch: int, reply: Callable[[ErrorCode], None]) -> None:
        """ClusterController.broker_heartbeat, without controlled shutdown (no broker asks for it here)."""
        try:
            change = self.sessions.heartbeat(broker_id, broker_epoch, self.world.clock(),
                                             leads_partitions=lambda: self.metadata.leads_any(broker_id))
        except ControllerError as e:
            reply(e.error_code)
            return
        if change.before is BrokerState.FENCED and change.after is BrokerState.UNFENCED:
            self._unfence(broker_id)
        reply(ErrorCode.none)

    def fence_expired_brokers(self) -> None:
        now = self.world.clock()
        for broker_id in self.sessions.fence_expired(now):
            self._fence(broker_id)
        for broker_id in self.sessions.end_silent_fenced(now):
            self._channels.pop(broker_id, None)
            self._sending.pop(broker_id, None)

    def _fence(self, broker_id: int) -> None:
        broker = self.metadata.brokers[broker_id]
        self.metadata.brokers[broker_id] = dataclasses.replace(broker, fenced=True, in_controlled_shutdown=False)
        self.states.broker_changed(broker_id, self.metadata.partitions_with_replica(broker_id), live=False)
        self._channels.pop(broker_id, None)
        self._sending.pop(broker_id, None)
        changes = without_broker(self.metadata.partitions_with_replica(broker_id), broker_id,
                                 self.metadata.active_broker_ids(), lambda topic: False)
        self._commit_partition_changes(changes)
        self.world.note(f"controller fenced broker {broker_id}")

    def _unfence(self, broker_id: int) -> None:
        broker = self.metadata.brokers[broker_id]
        self.metadata.brokers[broker_id] = dataclasses.replace(broker, fenced=False)
        self.states.broker_changed(broker_id, self.metadata.partitions_with_replica(broker_id), live=True)
        if broker_id not in self._channels:  # fenced by silence: it missed every change since
            self._channels[broker_id] = collections.deque()
            self._send_leader_and_isr(self.metadata.partitions_with_replica(broker_id), broker_ids=[broker_id])
        changes = elect_offline_partitions(self.metadata.partitions_with_replica(broker_id),
                                           self.metadata.active_broker_ids(), lambda topic: False)
        self._commit_partition_changes(changes)
        self.world.note(f"controller unfenced broker {broker_id}")

    # ------------------------------------------------------------ partitions

    def rebalance_leaders(self) -> None:
        partitions = list(self.topic.partitions.values())
        self._commit_partition_changes(preferred_leader_elections(
            partitions, self.metadata.active_broker_ids(), IMBALANCE_PERCENTAGE))

    def _commit_partition_changes(self, changes: list[PartitionRegistration]) -> None:
        if not changes:
            return
        self.metadata.apply(changes)
        self.states.partitions_changed(changes)
        for p in changes:
            self.world.note(f"controller: partition {p.partition} leader {p.leader} epoch {p.leader_epoch} "
                            f"isr {list(p.isr)} partition epoch {p.partition_epoch}")
        self._send_leader_and_isr(changes)

    def alter_partition(self, request: dict, reply: Callable[[dict], None]) -> None:
        """ClusterController.alter_partition over ClusterMetadata.decide_alter_partition (version 2)."""
        decoded = SimpleNamespace(broker_id=request["broker_id"], broker_epoch=request["broker_epoch"], topics=[
            SimpleNamespace(topic_id=request["topic_id"], partitions=[SimpleNamespace(
                partition_index=request["partition_index"], leader_epoch=request["leader_epoch"],
                new_isr=request["new_isr"], leader_recovery_state=0, partition_epoch=request["partition_epoch"])])])
        decision = self.metadata.decide_alter_partition(decoded, 2)
        if decision.changes:
            before = [self.metadata.registration(p.topic, p.partition) for p in decision.changes]
            self.metadata.apply(decision.changes)
            for p in decision.changes:
                self.world.note(f"controller: AlterPartition from {request['broker_id']}: partition {p.partition} "
                                f"isr {list(p.isr)} partition epoch {p.partition_epoch}")
            # An ISR change that completes a reassignment moves replicas (and maybe the leader).
            self._send_moves([(b, a) for b, a in zip(before, decision.changes, strict=True) if b.is_reassigning])
        reply(decision.response)

    # ---------------------------------------------------------- reassignment

    def reassign(self, partition: int, target: tuple[int, ...] | None) -> None:
        """AlterPartitionReassignments for one partition (reassignment_ops.alter_partition_reassignments): start
        a reassignment to `target`, or cancel the one in progress (None)."""
        current = self.topic.partitions[partition]
        live = self.metadata.active_broker_ids()
        try:
            if target is None:
                step = reassignment.cancel(current, live)
            else:
                step = reassignment.start(current, target, is_registered=self.metadata.brokers.__contains__,
                                          live=live)
        except reassignment.ReassignmentRefused as refused:
            self.world.note(f"controller: reassignment of {partition} to {target} refused: {refused}")
            return
        if step.registration is current:
            return
        self.metadata.apply([step.registration])
        self.world.note(f"controller: reassigning {partition} to {target}: replicas {list(current.replicas)} -> "
                        f"{list(step.registration.replicas)}")
        self._send_moves([(current, step.registration)])

    def _send_moves(self, moves: list[tuple[PartitionRegistration, PartitionRegistration]]) -> None:
        """reassignment_ops.send_moves: LeaderAndIsr to the replicas, StopReplica (delete) to removed ones."""
        if not moves:
            return
        live = set(self.metadata.active_broker_ids())
        self.states.partitions_changed(after for _, after in moves)
        for before, after in moves:
            self.world.checker.reassignment_step(before, after)
            added = [b for b in after.replicas if b not in before.replicas]
            removed = [b for b in before.replicas if b not in after.replicas]
            self.states.replicas_added(after, added, live)
            self._send_leader_and_isr([after])
            if removed:
                self.states.replicas_removal_started(after, removed)
                # Done once queued: the sim's channel retries a request until the broker answers it.
                self.states.replicas_removal_finished(TopicPartition(after.topic, after.partition), removed, ())
                for broker_id in removed:
                    if broker_id in self._channels:
                        self._channels[broker_id].append(_Delivery(after, self.broker_epoch_of(broker_id), stop=True))
                        self._pump(broker_id)
            self.world.note(f"controller: partition {after.partition} replicas {list(after.replicas)} adding "
                            f"{list(after.adding_replicas)} removing {list(after.removing_replicas)} leader "
                            f"{after.leader} epoch {after.leader_epoch} isr {list(after.isr)}")

    # --------------------------------------------------------------- channel

    def _send_leader_and_isr(self, partitions, broker_ids: list[int] | None = None) -> None:
        for registration in partitions:
            for broker_id in registration.replicas:
                if broker_id in self._channels and (broker_ids is None or broker_id in broker_ids):
                    self._channels[broker_id].append(_Delivery(registration, self.broker_epoch_of(broker_id)))
                    self._pump(broker_id)

    def _pump(self, broker_id: int) -> None:
        """Send the head of the broker's queue; again every CHANNEL_RETRY_MS until it is answered."""
        queue = self._channels.get(broker_id)
        if not queue or broker_id in self._sending:
            return
        delivery = queue[0]
        self._sending[broker_id] = delivery
        self._transmit(broker_id, delivery)

    def _transmit(self, broker_id: int, delivery: _Delivery) -> None:
        if self._sending.get(broker_id) is not delivery:
            return
        broker = self.world.brokers[broker_id]
        topic = self.topic

        def handle(reply: Callable[[ErrorCode], None]) -> None:
            if delivery.stop:
                broker.stop_replica(delivery.registration, delivery.broker_epoch, reply)
            else:
                broker.leader_and_isr(delivery.registration, topic.topic_id, topic.configs, delivery.broker_epoch,
                                      reply)

        self.world.rpc(self.node, broker.node, handle, lambda _: self._answered(broker_id, delivery))
        self.world.events.after(CHANNEL_RETRY_MS, lambda: self._transmit(broker_id, delivery))

    def _answered(self, broker_id: int, delivery: _Delivery) -> None:
        if self._sending.get(broker_id) is not delivery:
            return  # a duplicate answer, or the channel was reset meanwhile
        del self._sending[broker_id]
        self._channels[broker_id].popleft()
        self._pump(broker_id)
