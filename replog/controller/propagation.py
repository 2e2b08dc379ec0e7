"""Sending the controller's decisions to the brokers, and knowing when they have applied them.

Kafka's ZooKeeper-mode controller batches its requests (ControllerBrokerRequestBatch) and hands them to the
channel without waiting. Here each send returns a Delivery, and `wait` collects the answers of a group of
deliveries and raises PropagationError naming every broker and partition that refused or did not answer in
time, so a caller can know that every broker applied a change. Requests are built from the state at the
moment they are queued, and the channel keeps each broker's queue in order, so a broker never applies an
older state after a newer one.
"""

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from replog.protocol.apis import ApiKey
from replog.protocol.control import (
    LEADER_AND_ISR_VERSION,
    STOP_REPLICA_VERSION,
    UPDATE_METADATA_VERSION,
    encode_leader_and_isr_request,
    encode_stop_replica_request,
    encode_update_metadata_request,
)
from replog.protocol.primitives import DecodeError

from . import broker_requests
from .broker_requests import ResponseErrors
from .channel import ChannelClosed, ControllerChannel
from .cluster import ClusterMetadata, TopicRegistration
from .metadata_push import PUSH_CHUNK_PARTITIONS, BrokerView, UpdatePlanner
from .registry import PartitionRegistration


@dataclass(frozen=True, slots=True)
class DeliveryFailure:
    broker_id: int
    api: str  # e.g. "LEADER_AND_ISR"
    partition: str | None  # "topic-0", or None when the whole request failed
    error: str  # a Kafka error name, or why no answer came


class PropagationError(Exception):
    def __init__(self, failures: list[DeliveryFailure]) -> None:
        assert failures
        lines = [f"broker {f.broker_id} {f.api} {f.partition or 'request'}: {f.error}" for f in failures]
        super().__init__("brokers did not apply the change: " + "; ".join(lines))
        self.failures = failures


@dataclass(frozen=True, slots=True)
class Delivery:
    broker_id: int
    api_key: ApiKey
    future: asyncio.Future  # the response frame
    errors_of: Callable[[bytearray], ResponseErrors]


class Propagator:
    def __init__(self, channel: ControllerChannel, metadata: ClusterMetadata, controller_id: int,
                 controller_epoch: Callable[[], int], timeout_ms: int, *,
                 push_chunk_partitions: int = PUSH_CHUNK_PARTITIONS,
                 on_view_lost: Callable[[], None] = lambda: None) -> None:
        """on_view_lost() is called when a broker refused an UpdateMetadata: it must get a full one soon,
        whether or not anything else changes (the controller requests a push)."""
        assert timeout_ms > 0
        self._channel = channel
        self._metadata = metadata
        self._controller_id = controller_id
        self._controller_epoch = controller_epoch
        self._timeout_ms = timeout_ms
        self._chunk = push_chunk_partitions
        self._on_view_lost = on_view_lost
        # Per broker, what the UpdateMetadata requests queued to it say (metadata_push.py), the last of them,
        # and a count of updates queued to any broker (a chunked build started before one must start over).
        self._views: dict[int, BrokerView] = {}
        self._last_update: dict[int, Delivery] = {}
        self._generation = 0
        self.update_partition_states = 0  # partition states sent in UpdateMetadata requests, for tests
        self.full_updates = 0

    def leader_and_isr(self, partitions: Iterable[PartitionRegistration], *, is_new: bool = False,
                       broker_ids: Iterable[int] | None = None) -> list[Delivery]:
        """One LeaderAndIsr to each replica of `partitions` the controller talks to (or to those of
        broker_ids). Fenced brokers that stopped heartbeating are out of the channel: they get everything
        again when they return."""
        reachable = set(self._channel.broker_ids)
        targets = reachable if broker_ids is None else set(broker_ids) & reachable
        by_broker: dict[int, list[PartitionRegistration]] = {}
        for p in partitions:
            # A replica in a failed log dir would only answer KAFKA_STORAGE_ERROR; it hears again on restart.
            offline = self._metadata.offline_replicas_of(p)
            for replica in p.replicas:
                if replica in targets and replica not in offline:
                    by_broker.setdefault(replica, []).append(p)
        deliveries = []
        for broker_id, owned in sorted(by_broker.items()):
            request = broker_requests.leader_and_isr_request(
                self._controller_id, self._controller_epoch(), self._metadata.brokers[broker_id], owned,
                self._metadata, is_new=is_new)
            body = encode_leader_and_isr_request(request)
            deliveries.append(self._send(broker_id, ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION, body,
                                         lambda frame, r=request: broker_requests.leader_and_isr_errors(frame, r)))
        return deliveries

    def update_metadata(self, broker_ids: Iterable[int] | None = None) -> list[Delivery]:
        """Bring every broker the controller talks to (or those of broker_ids) up to date: a full
        UpdateMetadata to one without a view, only what changed to the others (metadata_push.py)."""
        deliveries = []
        for broker_id in self._targets(broker_ids):
            delivery = self._queue_update(broker_id, self._planner(broker_id).run())
            if delivery is not None:
                deliveries.append(delivery)
        return deliveries

    async def push_metadata(self, broker_ids: Iterable[int] | None = None) -> list[Delivery]:
        """As update_metadata, building each request in chunks with the event loop free in between, so the
        controller answers heartbeats while it builds an UpdateMetadata of 10,000 partitions."""
        deliveries = []
        for broker_id in self._targets(broker_ids):
            if broker_id not in self._channel.broker_ids:
                continue  # it left while an earlier broker's update was being built
            generation, sender = self._generation, self._channel.sender(broker_id)
            changes = self._metadata.partition_changes
            planner = self._planner(broker_id)
            for _ in planner.steps():
                await asyncio.sleep(0)
            if broker_id not in self._channel.broker_ids:
                continue  # it left meanwhile; it gets everything when it returns
            if (self._generation != generation or self._channel.sender(broker_id) is not sender
                    or self._metadata.partition_changes != changes):
                # Another update was queued to it meanwhile, from a view this planner did not start from; or it
                # came back over a new sender; or a partition changed, whose LeaderAndIsr may be queued already
                # and must not be followed by an older state of it: build again, in one go, from now.
                planner = self._planner(broker_id).run()
            delivery = self._queue_update(broker_id, planner)
            if delivery is not None:
                deliveries.append(delivery)
        return deliveries

    def _targets(self, broker_ids: Iterable[int] | None) -> list[int]:
        reachable = self._channel.broker_ids
        return reachable if broker_ids is None else sorted(set(broker_ids) & set(reachable))

    def _planner(self, broker_id: int) -> UpdatePlanner:
        return UpdatePlanner(self._metadata, self._views.get(broker_id), self._channel.sender(broker_id),
                             self._controller_epoch(), chunk=self._chunk)

    def _queue_update(self, broker_id: int, planner: UpdatePlanner) -> Delivery | None:
        """Queue the planner's request, and take its view as the broker's; with nothing new to say, the last
        update still unanswered (waiting for it tells that the broker has everything)."""
        broker = self._metadata.brokers[broker_id]
        request = planner.request(self._controller_id, broker.epoch, broker_requests.live_brokers(self._metadata))
        if request is None:
            last = self._last_update.get(broker_id)
            return last if last is not None and not last.future.done() else None
        delivery = self._send(broker_id, ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION,
                              encode_update_metadata_request(request), broker_requests.update_metadata_errors)
        self._views[broker_id] = planner.view
        self._last_update[broker_id] = delivery
        self._generation += 1
        self.update_partition_states += planner.partition_count
        self.full_updates += planner.full
        view, full = planner.view, planner.full
        delivery.future.add_done_callback(lambda future: self._forget_view_on_failure(view, full, delivery))
        return delivery

    def _forget_view_on_failure(self, view: BrokerView, full: bool, delivery: Delivery) -> None:
        """A broker that refused an update, or left before answering, has an image this controller does not
        know: it gets a full one next (a broker that left gets one anyway on return, over a new sender)."""
        future = delivery.future
        failed = future.cancelled() or future.exception() is not None
        if not failed:
            try:
                failed = bool(delivery.errors_of(future.result()))
            except DecodeError:
                failed = True
        current = self._views.get(delivery.broker_id)
        # A failure on an earlier sender (the broker re-registered since) says nothing about the current one.
        if failed and current is not None and current.sender is view.sender:
            del self._views[delivery.broker_id]
            # A refused increment is followed by a full update at once, even if nothing else changes; a
            # refused full update waits for the next change (a broker refusing everything must not make the
            # controller push in a loop). One that left gets everything when it returns.
            if not full and delivery.broker_id in self._channel.broker_ids:
                self._on_view_lost()

    def stop_replica(self, topic: TopicRegistration, *, delete: bool,
                     broker_ids: Iterable[int] | None = None) -> list[Delivery]:
        """A StopReplica for `topic` to each of its replicas the controller talks to (or to those of broker_ids)."""
        reachable = set(self._channel.broker_ids) if broker_ids is None else set(broker_ids) & set(self._channel.broker_ids)
        replicas = sorted({r for p in topic.partitions.values() for r in p.replicas} & reachable)
        deliveries = []
        for broker_id in replicas:
            request = broker_requests.stop_replica_request(
                self._controller_id, self._controller_epoch(), self._metadata.brokers[broker_id], topic,
                delete=delete)
            deliveries.append(self._send(broker_id, ApiKey.STOP_REPLICA, STOP_REPLICA_VERSION,
                                         encode_stop_replica_request(request), broker_requests.stop_replica_errors))
        return deliveries

    def stop_removed_replicas(self, partition: PartitionRegistration, broker_ids: Iterable[int], *,
                              delete: bool) -> list[Delivery]:
        """A StopReplica for `partition` to each of broker_ids (replicas a reassignment removed) that the
        controller talks to; one away now deletes its log as stray when it returns (broker/stray_logs.py)."""
        deliveries = []
        for broker_id in sorted(set(broker_ids) & set(self._channel.broker_ids)):
            request = broker_requests.stop_partition_request(
                self._controller_id, self._controller_epoch(), self._metadata.brokers[broker_id], partition,
                delete=delete)
            deliveries.append(self._send(broker_id, ApiKey.STOP_REPLICA, STOP_REPLICA_VERSION,
                                         encode_stop_replica_request(request), broker_requests.stop_replica_errors))
        return deliveries

    def _send(self, broker_id: int, api_key: ApiKey, version: int, body: bytes,
              errors_of: Callable[[bytearray], ResponseErrors]) -> Delivery:
        try:
            future = self._channel.send(broker_id, api_key, version, body)
        except (asyncio.QueueFull, ChannelClosed) as e:
            future = asyncio.get_running_loop().create_future()
            future.set_exception(e)
        # Nobody may be waiting any more when a late failure arrives; mark it seen so asyncio does not warn.
        future.add_done_callback(_retrieve)
        return Delivery(broker_id, api_key, future, errors_of)

    async def wait(self, deliveries: list[Delivery]) -> None:
        """Wait for every delivery's answer; raise PropagationError if any broker refused or stayed silent."""
        if deliveries:
            await asyncio.wait([d.future for d in deliveries], timeout=self._timeout_ms / 1000)
        failures = []
        for d in deliveries:
            failures.extend(self._failures(d))
        if failures:
            raise PropagationError(failures)

    def _failures(self, delivery: Delivery) -> list[DeliveryFailure]:
        api = delivery.api_key.name
        future = delivery.future
        if not future.done():
            # The request stays queued and will still be sent: the broker may apply it later.
            return [DeliveryFailure(delivery.broker_id, api, None, f"no answer within {self._timeout_ms} ms")]
        if not future.cancelled() and isinstance(future.exception(), ChannelClosed):
            return []  # the broker left (fenced or shut down); it gets everything again when it returns
        if future.cancelled() or future.exception() is not None:
            reason = "cancelled" if future.cancelled() else repr(future.exception())
            return [DeliveryFailure(delivery.broker_id, api, None, reason)]
        try:
            errors = delivery.errors_of(future.result())
        except DecodeError as e:
            return [DeliveryFailure(delivery.broker_id, api, None, f"malformed response: {e}")]
        return [DeliveryFailure(delivery.broker_id, api, label, error.name.upper()) for label, error in errors]


def _retrieve(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()
