"""The simulated cluster behind a synthetic metrics dump (replog/analytics/synthetic.py): partitions
appending and replicating tick by tick, brokers killed, fenced and restarted, followers stalled, ISRs shrinking
and expanding, each process writing its dump lines as it goes."""

import heapq
import random
from dataclasses import dataclass
from pathlib import Path

from .synthetic_lines import DumpWriter, broker_line, controller_line, isr_change_line, start_line
from .synthetic_scenario import CONTROLLER_ID, Scenario
from .synthetic_state import BrokerProcess, PartitionState


@dataclass
class CatchUp:
    started_ms: int
    from_offset: int
    rejoin_ms: int


class Simulation:
    def __init__(self, scenario: Scenario, out: Path):
        self.s = scenario
        self.rng = random.Random(scenario.seed)
        self.partitions = [
            PartitionState(
                k,
                scenario.replicas(k),
                scenario.replicas(k)[0],
                list(scenario.replicas(k)),
                leo=dict.fromkeys(scenario.replicas(k), 0),
            )
            for k in range(scenario.partitions)
        ]
        self.hosted = {
            b: [p for p in self.partitions if b in p.replicas] for b in range(1, scenario.brokers + 1)
        }
        self.writers = {b: DumpWriter(out / f"broker-{b}", scenario.max_file_bytes) for b in self.hosted}
        self.controller_writer = DumpWriter(out / "controller", scenario.max_file_bytes)
        self.processes: dict[int, BrokerProcess] = {}
        self.fenced: set[int] = set()
        self.stalled: set[tuple[int, int]] = set()
        self.catching_up: dict[tuple[int, int], CatchUp] = {}
        self.events: list[tuple[int, int, str, tuple]] = []  # (ms, sequence, action, arguments), a heap
        self.kills = {restart.killed_ms: restart.broker_id for restart in scenario.restart_schedule()}
        self.killed_at: dict[int, int] = {}  # broker -> the tick it was last killed at
        for restart in scenario.restart_schedule():
            self._schedule(restart.fenced_ms, "fence", restart.broker_id)
            self._schedule(restart.started_ms, "start", restart.broker_id)
        for stall in scenario.stall_schedule():
            self._schedule(stall.begins_ms, "stall_begin", stall.partition_index, stall.follower_id)
            self._schedule(stall.shrinks_ms, "stall_shrink", stall.partition_index, stall.follower_id)
            self._schedule(stall.ends_ms, "stall_end", stall.partition_index, stall.follower_id)

    def _schedule(self, ms: int, action: str, *arguments: int) -> None:
        heapq.heappush(self.events, (ms, len(self.events), action, arguments))

    def run(self) -> None:
        s = self.s
        for broker_id in self.hosted:
            self._start_process(broker_id, s.start_ms)
        self.controller_writer.write(s.start_ms, start_line(s.start_ms, CONTROLLER_ID, "controller"))
        for tick in range(s.start_ms + s.interval_ms, s.end_ms + 1, s.interval_ms):
            while self.events and self.events[0][0] <= tick:
                ms, _, action, arguments = heapq.heappop(self.events)
                getattr(self, f"_on_{action}")(ms, *arguments)
            self._append_and_replicate(tick)
            for broker_id in list(self.processes):
                line = broker_line(s, self.processes[broker_id], self.hosted[broker_id], tick)
                if self.kills.get(tick) == broker_id:
                    self.writers[broker_id].write_partial(line)
                    del self.processes[broker_id]
                    self.killed_at[broker_id] = tick
                else:
                    self.writers[broker_id].write(tick, line)
            self.controller_writer.write(
                tick, controller_line(s, self.partitions, list(self.hosted), self.processes, self.fenced, tick)
            )
        for writer in [*self.writers.values(), self.controller_writer]:
            writer.close()

    # events

    def _start_process(self, broker_id: int, ms: int) -> None:
        self.processes[broker_id] = BrokerProcess(broker_id, ms)
        self.writers[broker_id].close()  # a new process starts a new file
        self.writers[broker_id].write(ms, start_line(ms, broker_id, "broker"))

    def _on_fence(self, ms: int, broker_id: int) -> None:
        self.fenced.add(broker_id)
        for p in self.hosted[broker_id]:
            if p.leader == broker_id:
                # As a follower of its successor, it was last in sync when it died.
                p.last_caught_up_ms[broker_id] = p.last_fetch_ms[broker_id] = self.killed_at[broker_id]
                successors = [r for r in p.isr if r != broker_id and r in self.processes]
                p.leader_epoch += 1
                p.partition_epoch += 1
                if successors:
                    p.leader = successors[0]
                    p.isr = [r for r in p.isr if r != broker_id]
                    for r in p.replicas:  # the others truncate to the new leader's log
                        p.leo[r] = min(p.leo[r], p.leo[p.leader])
                    self._isr_change(ms, p, [], "controller")
                else:
                    p.leader = -1  # offline; the ISR keeps its last member
            elif broker_id in p.isr:
                before = list(p.isr)
                p.isr = [r for r in p.isr if r != broker_id]
                p.partition_epoch += 1
                self._isr_change(ms, p, before, "controller")

    def _on_start(self, ms: int, broker_id: int) -> None:
        self._start_process(broker_id, ms)
        self.fenced.discard(broker_id)
        for p in self.hosted[broker_id]:
            if p.leader == -1 and p.isr == [broker_id]:  # it was the last in-sync replica: it leads again
                p.leader = broker_id
                p.leader_epoch += 1
                p.partition_epoch += 1
                self._isr_change(ms, p, [], "controller")
            elif broker_id not in p.isr:
                rejoin = ms + self.s.catch_up_ms(p.k)
                self.catching_up[(p.k, broker_id)] = CatchUp(ms, p.leo[broker_id], rejoin)
                self._schedule(rejoin, "rejoin", p.k, broker_id)

    def _on_rejoin(self, ms: int, k: int, broker_id: int) -> None:
        self.catching_up.pop((k, broker_id), None)
        self._expand(ms, self.partitions[k], broker_id)

    def _on_stall_begin(self, ms: int, k: int, follower_id: int) -> None:
        self.stalled.add((k, follower_id))

    def _on_stall_shrink(self, ms: int, k: int, follower_id: int) -> None:
        p = self.partitions[k]
        if follower_id in p.isr and follower_id != p.leader and p.leader in self.processes:
            before = list(p.isr)
            p.isr = [r for r in p.isr if r != follower_id]
            p.partition_epoch += 1
            self._isr_change(ms, p, before, "leader")

    def _on_stall_end(self, ms: int, k: int, follower_id: int) -> None:
        self.stalled.discard((k, follower_id))
        if (k, follower_id) not in self.catching_up:
            self._expand(ms, self.partitions[k], follower_id)

    def _expand(self, ms: int, p: PartitionState, broker_id: int) -> None:
        if broker_id in p.isr or broker_id not in self.processes or p.leader not in self.processes:
            return
        before = list(p.isr)
        p.isr = [r for r in p.replicas if r in p.isr or r == broker_id]
        p.partition_epoch += 1
        p.last_caught_up_ms[broker_id] = ms
        self._isr_change(ms, p, before, "leader")

    def _isr_change(self, ms: int, p: PartitionState, before: list[int], source: str) -> None:
        """The leader's line for a change; a leader that is down (not fenced yet) writes none."""
        leader = self.processes.get(p.leader)
        if leader is None:
            return
        if before:
            shrinks = len(p.isr) < len(before)
            leader.totals["isr_shrinks_total" if shrinks else "isr_expands_total"] += 1
        self.writers[p.leader].write(ms, isr_change_line(self.s, ms, p, before, source))

    # ticks

    def _append_and_replicate(self, tick: int) -> None:
        s = self.s
        records = s.records_per_tick
        for p in self.partitions:
            leader = self.processes.get(p.leader)
            if leader is None:
                continue
            p.leo[p.leader] += records
            counters = leader.partition_counters(p.k)
            counters[0] += records * s.record_bytes
            counters[1] += records
            leader.totals["bytes_in_total"] += records * s.record_bytes
            leader.totals["messages_in_total"] += records
            for f in p.replicas:
                follower = self.processes.get(f)
                if f == p.leader or follower is None or (p.k, f) in self.stalled:
                    continue
                self._fetch(tick, p, f, follower, leader)

    def _fetch(
        self, tick: int, p: PartitionState, f: int, follower: BrokerProcess, leader: BrokerProcess
    ) -> None:
        s = self.s
        leader_leo = p.leo[p.leader]
        catch_up = self.catching_up.get((p.k, f))
        if catch_up is None:
            lag = self.rng.randint(0, s.records_per_tick)
        else:  # closing the gap linearly until its rejoin time
            remaining = max(0, catch_up.rejoin_ms - tick) / (catch_up.rejoin_ms - catch_up.started_ms)
            lag = round((leader_leo - catch_up.from_offset) * remaining)
        new_leo = max(p.leo[f], leader_leo - lag)
        fetched = (new_leo - p.leo[f]) * s.record_bytes
        p.leo[f] = new_leo
        p.last_fetch_ms[f] = tick
        if catch_up is None:
            p.last_caught_up_ms[f] = tick - (leader_leo - new_leo) * s.interval_ms // s.records_per_tick
        follower.partition_counters(p.k)[2] += fetched
        follower.totals["replication_bytes_in_total"] += fetched
        leader.totals["replication_bytes_out_total"] += fetched
