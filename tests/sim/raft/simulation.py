"""Deterministic simulation of the controller quorum (in the spirit of Kafka's RaftEventSimulationTest).

Three or five voters and one observer run `RaftNode` on in-memory logs and quorum-state stores, connected by
the seeded network of tests/sim/network.py. A client proposes entries to whichever node thinks it leads; each
node applies what it commits to a state machine (a list of entries) that snapshots itself every few records.

A run has two phases. In the fault phase the seed's faults happen: message loss, duplication and delay (so
reordering) on every link, links cut and healed, and nodes crashing and restarting. A crash is either a killed
process (the page cache survives: nothing written is lost) or a power loss (the unflushed tail of the log is
lost; the quorum-state file survives as last written, since every write is fsynced before it is acted on).
In the heal phase the network is perfect and every node is up; the quorum must elect a leader and commit.
The invariants (invariants.py) are checked after every event.
"""

from __future__ import annotations

import itertools
import json
import random
import traceback
from collections import deque
from dataclasses import dataclass, replace

from replog.raft import messages as m
from replog.raft.commits import Committed
from replog.raft.config import QuorumConfig
from replog.raft.messages import Envelope, LogEntry, OffsetAndEpoch, VoteResponse
from replog.raft.node import RaftNode
from replog.raft.quorum_state_file import MemoryQuorumStateStore
from replog.raft.raft_log import MemoryRaftLog
from replog.raft.snapshots import SnapshotPolicy
from replog.raft.states import Role

from ..network import EventQueue, NetworkFaults, SimClock, SimNetwork
from .invariants import InvariantViolation, QuorumInvariants

FAULT_PHASE_MS = 4_000
HEAL_PHASE_MS = 3_000
TRACE_LINES = 30
REQUESTS = (m.VoteRequest, m.BeginQuorumEpochRequest, m.EndQuorumEpochRequest, m.FetchRequest,
            m.FetchSnapshotRequest, m.DescribeQuorumRequest)


class SimulationFailure(AssertionError):
    def __init__(self, seed: int, step: int, time_ms: int, message: str, trace: deque) -> None:
        tail = "\n".join(line if isinstance(line, str) else line() for line in trace)
        super().__init__(f"seed {seed} failed at step {step} (t={time_ms} ms): {message}\n"
                         f"replay: {replay_command(seed)}\nlast trace lines:\n{tail}")
        self.seed = seed


def replay_command(seed: int) -> str:
    return f".venv/bin/python -m pytest -q tests/sim/raft -k test_seeds --sim-seed {seed}"


@dataclass(slots=True)
class Outcome:
    seed: int
    voters: int
    steps: int = 0
    messages: int = 0
    leader_epochs: int = 0
    kills: int = 0
    power_losses: int = 0
    snapshots_loaded: int = 0
    committed: int = 0


class StateMachine:
    """What a controller does with committed entries: applies them in order; snapshots itself."""

    def __init__(self, policy: SnapshotPolicy) -> None:
        self.applied: list[LogEntry] = []
        self._policy = policy
        self._records_since = self._bytes_since = 0

    def apply(self, node: RaftNode, invariants: QuorumInvariants, outcome: Outcome) -> None:
        first_new = len(self.applied)
        for item in node.take_committed():
            if isinstance(item, Committed):
                assert item.offset == len(self.applied), (node.node_id, item.offset, len(self.applied))
                self.applied.append(item.entry)
                self._records_since += 1
                self._bytes_since += len(item.entry.value)
            else:
                self.applied = [LogEntry(epoch, value.encode(), control)
                                for epoch, value, control in json.loads(item.data)]
                assert len(self.applied) == item.snapshot_id.offset
                first_new, self._records_since, self._bytes_since = 0, 0, 0
                outcome.snapshots_loaded += 1
        invariants.check_applied(node.node_id, self.applied, first_new)
        if self._policy.due(self._records_since, self._bytes_since) and self.applied:
            snapshot_id = OffsetAndEpoch(len(self.applied), self.applied[-1].epoch)
            data = json.dumps([[e.epoch, e.value.decode(), e.control] for e in self.applied]).encode()
            node.create_snapshot(snapshot_id, data)
            self._records_since = self._bytes_since = 0


class SimNode:
    """One controller (or observer) host: its durable log and quorum-state, and its process when it runs."""

    def __init__(self, node_id: int, snapshot_policy: SnapshotPolicy) -> None:
        self.node_id = node_id
        self.log = MemoryRaftLog()
        self.store = MemoryQuorumStateStore()
        self.snapshot_policy = snapshot_policy
        self.node: RaftNode | None = None
        self.machine = StateMachine(snapshot_policy)
        self.incarnation = 0
        self.tick_at: int | None = None


class QuorumSimulation:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        voter_count = 3 if seed % 2 == 0 else 5  # and pre-vote on for seeds 0 and 1 modulo 4
        self.voter_ids = tuple(range(1, voter_count + 1))
        self.observer_id = 100
        # Small fetches replicate an epoch's entries a few at a time, so a new leader's majority can hold its
        # predecessors' entries without its own first one: the case its LeaderChange entry guards against.
        # Kafka's timeouts scaled down 4x, ratios kept (election 1000, fetch 2000, back-off 1000, request
        # 2000, fetch wait 500), so that a few simulated seconds hold many elections.
        self.config = QuorumConfig(voters={voter: ("127.0.0.1", 9000 + voter) for voter in self.voter_ids},
                                   election_timeout_ms=250, fetch_timeout_ms=500, election_backoff_max_ms=250,
                                   request_timeout_ms=500, fetch_max_wait_ms=125,
                                   fetch_max_entries=self.rng.choice((1, 2, 3, 8)), pre_vote=seed % 4 < 2)
        self.clock = SimClock()
        self.events = EventQueue(self.clock)
        self.network = SimNetwork(self.events, random.Random(self.rng.random()), NetworkFaults())
        # Snapshots every few records (or a few hundred bytes), so followers often fall below the log start.
        policy = SnapshotPolicy(max_records=self.rng.randint(5, 40), max_bytes=self.rng.randint(100, 1000))
        self.hosts = {node_id: SimNode(node_id, policy) for node_id in (*self.voter_ids, self.observer_id)}
        self.invariants = QuorumInvariants()
        self.outcome = Outcome(seed, voter_count)
        # Lines, or callables that format one: most runs never print their trace.
        self.trace: deque = deque(maxlen=TRACE_LINES)
        self._proposals = 0
        self._wire_ids = itertools.count(1)
        self._wire: dict[int, tuple[int, int]] = {}  # wire id -> (incarnation that asked, its correlation id)

    # ------------------------------------------------------------------ running

    def run(self) -> Outcome:
        for host in self.hosts.values():
            self._start(host)
        self.events.after(self.rng.randint(1, 100), self._client)
        self.events.after(self.rng.randint(30, 500), self._fault)
        self.events.at(FAULT_PHASE_MS, self._heal)
        end = FAULT_PHASE_MS + HEAL_PHASE_MS
        while self.events.next_time() is not None and self.events.next_time() <= end:
            self.outcome.steps += 1
            try:
                self.events.run_next()
            except (InvariantViolation, AssertionError) as failure:
                where = traceback.extract_tb(failure.__traceback__)[-1]
                raise SimulationFailure(self.seed, self.outcome.steps, self.clock.now_ms,
                                        f"{type(failure).__name__} at {where.filename}:{where.lineno} "
                                        f"({where.line}): {failure}", self.trace) from failure
        self._check_liveness()
        self.outcome.messages = self.network.sent
        self.outcome.leader_epochs = len(self.invariants.leaders)
        self.outcome.committed = len(self.invariants.committed)
        return self.outcome

    def _after(self, host: SimNode, sent: list[Envelope]) -> None:
        """After a node acted: send what it said, apply what it committed, check, and schedule its next tick."""
        node = host.node
        assert node is not None
        for envelope in sent:
            self._send(envelope)
        host.machine.apply(node, self.invariants, self.outcome)
        self.invariants.check_node(node, host.incarnation)
        deadline = max(node.next_deadline_ms(), self.clock.now_ms)
        if host.tick_at is None or deadline < host.tick_at:
            host.tick_at = deadline
            incarnation = host.incarnation
            self.events.at(deadline, lambda: self._tick(host, incarnation, deadline))

    def _tick(self, host: SimNode, incarnation: int, at: int) -> None:
        if host.node is None or host.incarnation != incarnation or host.tick_at != at:
            return
        host.tick_at = None
        self._after(host, host.node.tick(self.clock.now_ms))

    def _send(self, envelope: Envelope) -> None:
        """Send over a connection of this incarnation. A request travels under a wire id of its own; its
        answer reaches only the incarnation that asked, under the id that incarnation used (a restarted
        process has new connections: an answer to its previous life never arrives, even when the new life
        reuses the correlation id)."""
        source, target = self.hosts[envelope.source], self.hosts[envelope.destination]
        if isinstance(envelope.message, REQUESTS):
            wire_id = next(self._wire_ids)
            self._wire[wire_id] = (source.incarnation, envelope.correlation_id)
            sent = replace(envelope, correlation_id=wire_id)
            self.network.send(str(envelope.source), str(envelope.destination), lambda: self._deliver(target, sent))
            return
        asked_by, correlation_id = self._wire[envelope.correlation_id]
        answer = replace(envelope, correlation_id=correlation_id)
        self.network.send(str(envelope.source), str(envelope.destination),
                          lambda: self._deliver(target, answer, asked_by))

    def _deliver(self, host: SimNode, envelope: Envelope, asked_by: int | None = None) -> None:
        if host.node is None or (asked_by is not None and asked_by != host.incarnation):
            return
        now = self.clock.now_ms
        self.trace.append(lambda: f"{now} {envelope.source}->{envelope.destination} "
                                  f"#{envelope.correlation_id} {str(envelope.message)[:300]}")
        sent = host.node.handle(envelope, self.clock.now_ms)
        self._after(host, sent)
        self._note_state(host)
        if (self.clock.now_ms < FAULT_PHASE_MS and any(isinstance(e.message, VoteResponse) and e.message.vote_granted
                                                      for e in sent) and self.rng.random() < 0.1):
            # The worst moment to lose power: a vote is on the wire. Whatever the voter must remember
            # (that it voted, in which epoch) has to be on disk already.
            self._crash(host, power_loss=True)
            self.events.after(self.rng.randint(1, 300), lambda: self._restart(host))

    def _note_state(self, host: SimNode) -> None:
        node = host.node
        if node is not None:
            line = (self.clock.now_ms, node.node_id, node.role.value, node.epoch, node.leader_id, node.high_watermark,
                    node.log.start_offset, node.log.end_offset, node.log.flushed_end_offset)
            self.trace.append(lambda: "{}   node {}: {} epoch {} leader {} hw {} log [{}, {}) flushed {}".format(*line))

    # ------------------------------------------------------------------ lifecycle

    def _start(self, host: SimNode) -> None:
        host.incarnation += 1
        host.tick_at = None
        host.machine = StateMachine(host.snapshot_policy)
        self.network.set_down(str(host.node_id), False)
        host.node = RaftNode(host.node_id, self.config, host.log, host.store, random.Random(self.rng.random()),
                             self.clock.now_ms)
        self.trace.append(f"{self.clock.now_ms} start node {host.node_id} (incarnation {host.incarnation})")
        self._after(host, [])
        self._note_state(host)

    def _crash(self, host: SimNode, power_loss: bool) -> None:
        host.node = None
        self.network.set_down(str(host.node_id), True)
        if power_loss:
            host.log.lose_unflushed()
            self.outcome.power_losses += 1
        else:
            self.outcome.kills += 1
        self.trace.append(f"{self.clock.now_ms} {'power loss' if power_loss else 'kill'} node {host.node_id}")

    def _client(self) -> None:
        if self.clock.now_ms < FAULT_PHASE_MS + HEAL_PHASE_MS - 1_000:
            leaders = [h for h in self.hosts.values() if h.node is not None and h.node.role is Role.LEADER]
            if leaders:
                host = self.rng.choice(leaders)
                values = [b"s%d-v%d" % (self.seed, self._proposals + i) for i in range(self.rng.randint(1, 3))]
                self._proposals += len(values)
                offset = host.node.propose(values, self.clock.now_ms)
                self.trace.append(f"{self.clock.now_ms} propose {len(values)} to node {host.node_id}: "
                                  f"last offset {offset}")
                self._after(host, [])
                if self.clock.now_ms < FAULT_PHASE_MS and self.rng.random() < 0.03:
                    # A leader that dies with entries of its epoch on a minority: the next leader must not
                    # count older epochs' entries as committed before its own first one (Raft's figure 8).
                    self._crash(host, power_loss=self.rng.random() < 0.5)
                    self.events.after(self.rng.randint(1, 600), lambda: self._restart(host))
        self.events.after(self.rng.randint(5, 80), self._client)

    def _fault(self) -> None:
        if self.clock.now_ms >= FAULT_PHASE_MS:
            return
        rng = self.rng
        choice = rng.random()
        leaders = [h for h in self.hosts.values() if h.node is not None and h.node.role is Role.LEADER]
        # Half the crashes and isolations hit a leader: that is where elections and truncations come from.
        if leaders and rng.random() < 0.5:
            host = rng.choice(leaders)
        else:
            host = self.hosts[rng.choice((*self.voter_ids, self.observer_id))]
        if choice < 0.3:
            if host.node is not None:
                self._crash(host, power_loss=rng.random() < 0.6)
                self.events.after(rng.randint(20, 800), lambda: self._restart(host))
        elif choice < 0.55:
            a, b = rng.sample(sorted(self.hosts), 2)
            self.network.cut(str(a), str(b))
            self.trace.append(f"{self.clock.now_ms} cut {a}-{b}")
        elif choice < 0.7:
            for other in self.hosts:
                if other != host.node_id:
                    self.network.cut(str(host.node_id), str(other))
            self.trace.append(f"{self.clock.now_ms} isolate {host.node_id}")
        elif choice < 0.85:
            self.network.heal_all()
            self.trace.append(f"{self.clock.now_ms} heal all links")
        else:
            self.network.faults = NetworkFaults(loss=rng.choice((0.0, 0.05, 0.2)),
                                                duplication=rng.choice((0.0, 0.05, 0.2)),
                                                max_delay_ms=rng.choice((1, 10, 50, 200)))
            self.trace.append(f"{self.clock.now_ms} network {self.network.faults}")
        self.events.after(rng.randint(30, 500), self._fault)

    def _restart(self, host: SimNode) -> None:
        if host.node is None:
            self._start(host)

    def _heal(self) -> None:
        self.network.heal_all()
        self.network.faults = NetworkFaults()
        self.trace.append(f"{self.clock.now_ms} heal phase")
        for host in self.hosts.values():
            self._restart(host)
        self._heal_mark = len(self.invariants.committed)

    def _check_liveness(self) -> None:
        """Healed for HEAL_PHASE_MS (the client stopped a second before the end), the quorum must have a leader
        that committed entries proposed meanwhile, and every node, observer included, must have applied all
        that was committed."""
        leaders = [h.node for h in self.hosts.values() if h.node is not None and h.node.role is Role.LEADER]
        committed = len(self.invariants.committed)
        applied = {h.node_id: len(h.machine.applied) for h in self.hosts.values()}
        if not leaders or committed <= self._heal_mark or min(applied.values()) < committed:
            raise SimulationFailure(self.seed, self.outcome.steps, self.clock.now_ms,
                                    f"no progress after healing: leaders {[n.node_id for n in leaders]}, "
                                    f"committed {self._heal_mark} -> {committed}, applied per node {applied}",
                                    self.trace)


def run_seed(seed: int) -> Outcome:
    return QuorumSimulation(seed).run()
