"""Incremental UpdateMetadata: each broker is sent only the partitions that changed since the last request
queued to it, as KRaft brokers apply metadata deltas (KIP-631's MetadataDelta) instead of the whole image.

Pure: no I/O, no event loop. For each broker the controller keeps a BrokerView, what the requests queued to it
so far say; the channel delivers them in order and resends until answered, so once its queue drains the
broker's image is that view. A broker without a view (new, re-registered, or whose last request failed) gets
a full snapshot (KIP-866 type 2), which also carries what only a full request does: dynamic broker configs,
SCRAM credentials and ACLs; a change to those makes the next push full as well.

An UpdatePlanner builds one broker's request in chunks of at most `chunk` partitions, so a caller on the event
loop can yield between chunks: 10,000 partitions take about 0.1 s to build and encode, several times that on
a loaded machine, and heartbeats must not wait behind it. Each chunk reads the registrations current at that
moment (they are immutable: a change replaces one), so the request never says something older than what
was sent before it. A partition that changes after its chunk was built may already have a LeaderAndIsr
queued with its new state, so the propagator then builds the request again, in one go, rather than let the
broker's metadata go back to the older state (propagation.py).
"""

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from replog.protocol.control import (
    LEADER_DURING_DELETE,
    UPDATE_METADATA_FULL,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataTopicState,
)

from .cluster import ClusterMetadata
from .registry import PartitionRegistration

UPDATE_METADATA_INCREMENTAL = 1  # KIP-866's Type: the request lists only what changed
PUSH_CHUNK_PARTITIONS = 1_000  # about 10 ms of building on an idle core
_UNSET = object()

# What only a full UpdateMetadata carries: dynamic broker configs, SCRAM credentials, ACL bindings.
FullOnly = tuple[dict[str, dict[str, str]], list[tuple], list[tuple]]
# A partition as a broker was told it: the registration and its offline replicas.
PartitionView = tuple[PartitionRegistration, tuple[int, ...]]


@dataclass(slots=True)
class BrokerView:
    """What the requests queued to one broker say, over one connection (`sender`, the channel's sender they
    were queued on: a broker that re-registers gets a new one, and so a full snapshot)."""
    sender: object
    full_only: FullOnly
    live_brokers: list = field(default_factory=list)  # the UpdateMetadataBrokers last sent
    # The live brokers the offline replicas in `partitions` were computed with (None: failed log dirs had a
    # say too): while they stay the same, an unchanged registration has unchanged offline replicas.
    liveness: frozenset[int] | None = None
    topics: dict[str, tuple[uuid.UUID, dict[str, str]]] = field(default_factory=dict)  # name: (id, configs)
    partitions: dict[tuple[str, int], PartitionView] = field(default_factory=dict)


def full_only_state(metadata: ClusterMetadata) -> FullOnly:
    return ({k: dict(v) for k, v in metadata.broker_configs.items()},
            [(m, user, c.salt, c.stored_key, c.server_key, c.iterations) for m, user, c in metadata.scram.items()],
            [tuple(binding.to_json()) for binding in sorted(metadata.acls)])


def offline_replicas(partition: PartitionRegistration, live: set[int], metadata: ClusterMetadata) -> tuple[int, ...]:
    """Kafka's offline replicas: those not on a live broker, or in a log dir their broker reported failed."""
    failed = metadata.offline_replicas_of(partition) if metadata.has_offline_replicas else ()
    return tuple(r for r in partition.replicas if r not in live or r in failed)


class UpdatePlanner:
    """Builds one broker's next UpdateMetadata from the metadata and its view: everything when `view` is
    None (or was queued on another sender, or what only a full request carries changed), else only what
    differs. Drive `steps()` to the end (yielding between chunks on the event loop), then take
    `request(...)` and, once it is queued, `view`."""

    def __init__(self, metadata: ClusterMetadata, view: BrokerView | None, sender: object, controller_epoch: int,
                 *, chunk: int = PUSH_CHUNK_PARTITIONS) -> None:
        assert chunk > 0
        self._metadata = metadata
        self._controller_epoch = controller_epoch
        self._chunk = chunk
        full_only = full_only_state(metadata)
        self.full = view is None or view.sender is not sender or view.full_only != full_only
        self._before = None if self.full else view
        # The new view starts as a copy: a planner abandoned halfway leaves the broker's view as it was.
        self.view = BrokerView(sender, full_only) if view is None or self.full else \
            BrokerView(sender, full_only, view.live_brokers, view.liveness, dict(view.topics), dict(view.partitions))
        self._states: dict[str, UpdateMetadataTopicState] = {}
        self.partition_count = 0  # partition states in the request
        self._started = False
        self._liveness: object = _UNSET
        self._liveness_stable = True

    def steps(self) -> Iterator[int]:
        """Build the request; yields how many partitions it has looked at after each chunk. Once only."""
        assert not self._started, "a planner builds one request"
        self._started = True
        keys = [(name, index) for name, topic in self._metadata.topics.items() for index in topic.partitions]
        for start in range(0, len(keys), self._chunk):
            self._add_chunk(keys[start:start + self._chunk])
            yield min(start + self._chunk, len(keys))
        self._add_topic_changes()
        # Chunks read the liveness of their moment; one that changed meanwhile leaves it unknown.
        stable = self._liveness_stable and self._liveness is not _UNSET
        self.view.liveness = self._liveness if stable else None  # type: ignore[assignment]

    def run(self) -> "UpdatePlanner":
        """Build it in one go."""
        for _ in self.steps():
            pass
        return self

    def request(self, controller_id: int, broker_epoch: int, live_brokers: list) -> UpdateMetadataRequest | None:
        """The request, or None when an incremental one would say nothing new (no partition, topic or live
        broker changed)."""
        if not self.full and not self._states and self.view.live_brokers == live_brokers:
            return None
        self.view.live_brokers = live_brokers
        full_only = self.view.full_only
        return UpdateMetadataRequest(
            controller_id, self._controller_epoch, broker_epoch, list(self._states.values()), live_brokers,
            type=UPDATE_METADATA_FULL if self.full else UPDATE_METADATA_INCREMENTAL,
            broker_configs=full_only[0] if self.full else {},
            scram_credentials=full_only[1] if self.full else [],
            acls=full_only[2] if self.full else [])

    def _add_chunk(self, keys: list[tuple[str, int]]) -> None:
        metadata = self._metadata
        live = metadata.live_broker_ids()
        liveness = None if metadata.has_offline_replicas else frozenset(live)
        # The common push, after an ISR change: the same live brokers, so only registrations that were
        # replaced need looking at (an identity check, not the offline replicas of every partition).
        same_liveness = liveness is not None and liveness == self.view.liveness
        known = self.view.partitions
        if self._liveness is _UNSET:
            self._liveness = liveness
        elif self._liveness != liveness:
            self._liveness_stable = False
        for key in keys:
            topic = metadata.topics.get(key[0])
            registration = topic.partitions.get(key[1]) if topic is not None else None
            if registration is None:  # deleted since the keys were listed: _add_topic_changes says so
                continue
            before = known.get(key)
            if same_liveness and before is not None and before[0] is registration:
                continue
            offline = offline_replicas(registration, live, metadata)
            if before is not None and before[0] is registration and before[1] == offline:
                continue
            state = self._topic_state(key[0])
            known[key] = (registration, offline)
            state.partition_states.append(UpdateMetadataPartitionState(
                registration.topic, registration.partition, self._controller_epoch, registration.leader,
                registration.leader_epoch, list(registration.isr), registration.partition_epoch,
                list(registration.replicas), list(offline)))
            self.partition_count += 1

    def _add_topic_changes(self) -> None:
        """Topics whose configs changed (with no partition change), and topics deleted since the view."""
        metadata = self._metadata
        for name, topic in metadata.topics.items():
            if self.view.topics.get(name) != (topic.topic_id, topic.configs):
                self._topic_state(name)  # configs travel with every topic state
        for name in [n for n in self.view.topics if n not in metadata.topics]:
            topic_id, configs = self.view.topics.pop(name)
            # Kafka's controller announced a deletion with LeaderDuringDelete for each partition.
            state = UpdateMetadataTopicState(name, topic_id, [], dict(configs))
            for key in sorted(k for k in self.view.partitions if k[0] == name):
                registration, offline = self.view.partitions.pop(key)
                state.partition_states.append(UpdateMetadataPartitionState(
                    name, key[1], self._controller_epoch, LEADER_DURING_DELETE, registration.leader_epoch,
                    list(registration.isr), registration.partition_epoch, list(registration.replicas),
                    list(offline)))
                self.partition_count += 1
            self._states[name] = state

    def _topic_state(self, name: str) -> UpdateMetadataTopicState:
        state = self._states.get(name)
        if state is None:
            topic = self._metadata.topics[name]
            before = self.view.topics.get(name)
            if before is not None and before[0] != topic.topic_id:
                # Recreated under the same name: the broker replaces the whole topic, so the old one's
                # partitions leave the view (those the new topic has are sent again anyway).
                for key in [k for k in self.view.partitions if k[0] == name]:
                    del self.view.partitions[key]
            state = self._states[name] = UpdateMetadataTopicState(name, topic.topic_id, [], dict(topic.configs))
            self.view.topics[name] = (topic.topic_id, dict(topic.configs))
        return state
