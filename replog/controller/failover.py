"""A controller among several voters: its role in the quorum and a safe hand-over (KIP-631's active and
standby controllers).

- QuorumRoles, ClusterController's part that follows the quorum: after every step of the quorum it replays
  what committed (into its state as a standby, into a copy of the committed state while active); the quorum's
  leader activates once its epoch's first entry is committed (so everything before it is replayed): a full
  session timeout for every broker (Kafka's behaviour), a resync with the new controller epoch, the background
  tasks; a controller that stops leading stops them and its senders and falls back to the committed state.
- The commit gate: the active controller applies a decision as soon as it appends its records, but a request
  telling the brokers (LeaderAndIsr, UpdateMetadata, StopReplica) leaves only once those records are
  committed, so no broker acts on a decision the next controller never saw.
- A copy of the metadata made through its snapshot records, the state a deposed controller falls back to.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid

from kio.schema.errors import ErrorCode

from replog.raft.shell import QuorumShell

from . import records
from .cluster import ClusterMetadata, ControllerError
from .heartbeats import BrokerSessions
from .propagation import Propagator
from .scram import bootstrap_records
from .state_machines import ClusterStates

log = logging.getLogger(__name__)


class QuorumCommitGate:
    """channel.CommitGate over the quorum: the barrier is the log's end, committed once the high watermark
    reaches it."""

    def __init__(self, shell: QuorumShell) -> None:
        self._shell = shell

    def barrier(self) -> int:
        assert self._shell.node is not None
        return self._shell.node.log.end_offset

    async def wait(self, offset: int) -> None:
        await self._shell.wait_committed(offset)


def copy_metadata(metadata: ClusterMetadata, controller_epoch: int) -> ClusterMetadata:
    """An independent copy, rebuilt from the snapshot records (the same round trip snapshots make)."""
    copy = ClusterMetadata()
    records.replay(records.snapshot_records(controller_epoch, metadata), copy)
    return copy


class QuorumRoles:
    """Mixed into ClusterController (server.py), whose state and decisions it uses."""

    async def wait_active(self) -> None:
        await self._became_active.wait()

    @property
    def quorum_leader_id(self) -> int | None:
        """The quorum's leader as this controller knows it (the active controller, or about to be)."""
        return None if self._log is None or self._log.shell.node is None else self._log.shell.node.leader_id

    @property
    def quorum_voters(self) -> dict[int, tuple[str, int]]:
        """The quorum's voters and their addresses (controller.quorum.voters); none before start."""
        return {} if self._log is None else dict(self._log.shell.config.voters)

    @property
    def cluster_id(self) -> str:
        return self.config.cluster_id

    def _on_quorum_step(self) -> None:
        """After every step of the quorum: replay what committed, and follow this node's role."""
        assert self._log is not None
        shell = self._log.shell
        assert shell.node is not None
        epoch, leading = shell.node.epoch, shell.is_leader
        if self.active and (not leading or epoch != self.controller_epoch):
            self._deactivate(epoch)
        reset, committed = self._log.take_committed_records()
        if reset:
            if self.active:
                self._committed = ClusterMetadata()
            else:
                self._set_metadata(ClusterMetadata())
        state = self._committed if self.active else self.metadata
        assert state is not None
        records.replay(committed, state)
        self._log.maybe_snapshot(lambda: records.snapshot_records(self.controller_epoch, state))
        if self._activation is not None and (not leading or self._activation[0] != epoch):
            self._activation[1].cancel()
            self._activation = None
        if leading and not self.active and self._activation is None:
            task = asyncio.get_running_loop().create_task(self._activate(epoch), name="controller-activation")
            self._activation = (epoch, task)

    async def _activate(self, epoch: int) -> None:
        """Once everything up to this leader's LeaderChange entry is committed (and so replayed), the state is
        the quorum's: take over (QuorumController's claim of leadership)."""
        assert self._log is not None and self._log.shell.node is not None
        await self._log.shell.wait_committed(self._log.shell.node.log.end_offset)
        self._activation = None
        if self._log.shell.is_leader and self._log.shell.node.epoch == epoch and not self.active:
            self._become_active(epoch)

    def _become_active(self, epoch: int) -> None:
        assert self._log is not None and self._log.shell.node is not None
        node = self._log.shell.node
        self.controller_epoch = epoch
        if node.high_watermark == node.log.end_offset:
            self._log.compact(records.snapshot_records(epoch, self.metadata))
        self._committed = copy_metadata(self.metadata, epoch)
        self.states = ClusterStates()
        for topic in self.metadata.topics.values():
            self.states.topic_created(topic.partitions.values(), self.metadata.live_broker_ids())
        self.sessions = BrokerSessions(self.config.broker_session_timeout_ms)
        now = self.clock_ms()
        for broker in list(self.metadata.brokers.values()):
            # A shutdown in progress was cut short by the failover: the broker is still up, or will be fenced.
            if broker.in_controlled_shutdown:
                self.broker_control.replace_broker(dataclasses.replace(broker, in_controlled_shutdown=False))
            # Every broker gets a full session timeout from now (Kafka's behaviour on a new active controller):
            # its silence while no controller was active proves nothing.
            self.sessions.restore(broker.broker_id, broker.incarnation_id or uuid.UUID(int=0), broker.epoch,
                                  fenced=broker.fenced, now_ms=now)
        self.active = True
        if self.config.bootstrap_scram_credentials and not self.metadata.bootstrapped:
            # The first start with bootstrap.scram.credentials: the first users, once (kafka-storage format).
            self.commit_records(bootstrap_records(self.config.bootstrap_scram_credentials))
        self.activations += 1
        self.activated_at_ms = now
        for broker in self.metadata.brokers.values():
            if not broker.fenced:  # resync: the brokers learn the new controller epoch with the full state
                self.channel.add_broker(broker.broker_id, broker.host, broker.port)
                self.watch(self.propagator.leader_and_isr(self.metadata.partitions_with_replica(broker.broker_id),
                                                           broker_ids=[broker.broker_id]), "resync")
        self.request_metadata_push()
        self._tasks = [asyncio.create_task(self._push_metadata_when_needed(), name="controller-metadata"),
                       asyncio.create_task(self._fence_silent_brokers(), name="controller-fencing")]
        if self.config.auto_leader_rebalance_enable:
            self._tasks.append(asyncio.create_task(self._rebalance_leaders(), name="controller-rebalance"))
        self._became_active.set()
        log.info("controller %d is active in epoch %d: %d brokers and %d topics", self.controller_id, epoch,
                 len(self.metadata.brokers), len(self.metadata.topics))

    def _deactivate(self, epoch: int) -> None:
        """Lost the quorum's leadership: stop deciding and sending, forget what was decided but not committed
        (the next leader may truncate it), and replay as a standby from the committed state."""
        assert self._committed is not None
        self.active = False
        self._became_active.clear()
        for task in self._tasks + list(self._in_flight):
            task.cancel()
        self._tasks = []
        for broker_id in self.channel.broker_ids:
            self.channel.remove_broker(broker_id)
        self._set_metadata(self._committed)
        self._committed = None
        self.sessions = BrokerSessions(self.config.broker_session_timeout_ms)
        self.states = ClusterStates()
        self.replication_control.forget()
        self.broker_control.forget()
        self._metadata_push_needed.clear()
        log.warning("controller %d is no longer active (controller epoch %d, quorum epoch %d): a standby now",
                    self.controller_id, self.controller_epoch, epoch)

    def _set_metadata(self, metadata: ClusterMetadata) -> None:
        self.metadata = metadata
        self.propagator = Propagator(self.channel, metadata, self.config.controller_id,
                                     lambda: self.controller_epoch, self.config.propagation_timeout_ms,
                                     on_view_lost=self.request_metadata_push)

    def require_active(self) -> None:
        if not self.active:
            leader = self.quorum_leader_id
            raise ControllerError(ErrorCode.not_controller, f"controller {self.controller_id} is not active "
                                  f"(the quorum's leader: {leader if leader is not None else 'unknown'})")

