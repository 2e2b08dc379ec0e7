"""The simulated cluster behind a synthetic metrics dump (replog/analytics/synthetic.py): partitions
appending and replicating tick by tick, brokers killed, fenced and restarted, followers stalled, ISRs shrinking
and expanding, each process writing its dump lines as it goes."""

import heapq
import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from .synthetic_scenario import CONTROLLER_ID, Scenario


@dataclass
class PartitionState:
    k: int
    replicas: list[int]
    leader: int
    isr: list[int]
    leader_epoch: int = 0
    partition_epoch: int = 0
    leo: dict[int, int] = field(default_factory=dict)  # log end offset of every replica
    last_caught_up_ms: dict[int, int] = field(default_factory=dict)
    last_fetch_ms: dict[int, int] = field(default_factory=dict)


@dataclass
class CatchUp:
    started_ms: int
    from_offset: int
    rejoin_ms: int


class DumpWriter:
    """One process's dump directory: `metrics-<first ts_ms>.jsonl` files, a new one past max_file_bytes and
    at every process start."""

    def __init__(self, directory: Path, max_file_bytes: int):
        self.directory = directory
        self.max_file_bytes = max_file_bytes
        self.file = None
        self.size = 0
        directory.mkdir(parents=True, exist_ok=True)

    def write(self, ts_ms: int, record: dict) -> None:
        line = json.dumps(record, separators=(",", ":")) + "\n"
        if self.file is None or self.size + len(line) > self.max_file_bytes:
            self.close()
            self.file = open(self.directory / f"metrics-{ts_ms:013d}.jsonl", "w", encoding="utf-8")
            self.size = 0
        self.file.write(line)
        self.size += len(line)

    def write_partial(self, record: dict) -> None:
        """Half of the line, as a process killed while writing it leaves."""
        line = json.dumps(record, separators=(",", ":"))
        self.file.write(line[: len(line) // 2])
        self.close()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


class BrokerProcess:
    """A broker's counters since its process started."""

    COUNTERS = (
        "bytes_in_total",
        "messages_in_total",
        "bytes_out_total",
        "replication_bytes_in_total",
        "replication_bytes_out_total",
        "isr_shrinks_total",
        "isr_expands_total",
    )

    def __init__(self, broker_id: int, started_ms: int):
        self.broker_id = broker_id
        self.started_ms = started_ms
        self.totals = dict.fromkeys(self.COUNTERS, 0)
        self.per_partition: dict[int, list[int]] = {}  # k -> [bytes in, messages in, replication bytes in]

    def partition_counters(self, k: int) -> list[int]:
        return self.per_partition.setdefault(k, [0, 0, 0])


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
        self.controller_writer.write(
            s.start_ms,
            {"v": 1, "kind": "start", "ts_ms": s.start_ms, "node_id": CONTROLLER_ID, "role": "controller"},
        )
        for tick in range(s.start_ms + s.interval_ms, s.end_ms + 1, s.interval_ms):
            while self.events and self.events[0][0] <= tick:
                ms, _, action, arguments = heapq.heappop(self.events)
                getattr(self, f"_on_{action}")(ms, *arguments)
            self._append_and_replicate(tick)
            for broker_id in list(self.processes):
                line = self._broker_line(broker_id, tick)
                if self.kills.get(tick) == broker_id:
                    self.writers[broker_id].write_partial(line)
                    del self.processes[broker_id]
                    self.killed_at[broker_id] = tick
                else:
                    self.writers[broker_id].write(tick, line)
            self.controller_writer.write(tick, self._controller_line(tick))
        for writer in [*self.writers.values(), self.controller_writer]:
            writer.close()

    # events

    def _start_process(self, broker_id: int, ms: int) -> None:
        self.processes[broker_id] = BrokerProcess(broker_id, ms)
        self.writers[broker_id].close()  # a new process starts a new file
        self.writers[broker_id].write(
            ms, {"v": 1, "kind": "start", "ts_ms": ms, "node_id": broker_id, "role": "broker"}
        )

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
        self.writers[p.leader].write(
            ms,
            {
                "v": 1,
                "kind": "isr_change",
                "ts_ms": ms,
                "node_id": p.leader,
                "topic": self.s.topic(p.k),
                "partition": self.s.partition_number(p.k),
                "leader_epoch": p.leader_epoch,
                "partition_epoch": p.partition_epoch,
                "isr_before": before,
                "isr_after": list(p.isr),
                "source": source,
                "replicas": list(p.replicas),
                "min_isr": self.s.min_isr,
            },
        )

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

    def _broker_line(self, broker_id: int, tick: int) -> dict:
        s = self.s
        process = self.processes[broker_id]
        entries = []
        led = under_replicated = under_min = at_min = 0
        max_lag = 0
        for p in self.hosted[broker_id]:
            leads = p.leader == broker_id
            own_leo = p.leo[broker_id]
            high_watermark = min(p.leo[r] for r in p.isr)
            followers = []
            if leads:
                led += 1
                under_replicated += len(p.isr) < len(p.replicas)
                under_min += len(p.isr) < s.min_isr
                at_min += len(p.isr) == s.min_isr
                for f in p.replicas:
                    if f == broker_id:
                        continue
                    caught_up = p.last_caught_up_ms.get(f, s.start_ms)
                    lag = own_leo - p.leo[f]
                    followers.append(
                        {
                            "broker_id": f,
                            "fetch_offset": p.leo[f],
                            "last_fetch_ms": p.last_fetch_ms.get(f, s.start_ms),
                            "last_caught_up_ms": caught_up,
                            "lag_messages": lag,
                            "lag_bytes": lag * s.record_bytes,
                            "lag_ms": tick - caught_up,
                        }
                    )
            else:
                max_lag = max(max_lag, high_watermark - own_leo)
            counters = process.partition_counters(p.k)
            entries.append(
                {
                    "topic": s.topic(p.k),
                    "partition": s.partition_number(p.k),
                    "leader": p.leader,
                    "leader_epoch": p.leader_epoch,
                    "replicas": p.replicas,
                    "isr": p.isr,
                    "min_isr": s.min_isr,
                    "log_start_offset": 0,
                    "log_end_offset": own_leo,
                    "high_watermark": min(high_watermark, own_leo),
                    "size_bytes": own_leo * s.record_bytes,
                    "bytes_in_total": counters[0],
                    "messages_in_total": counters[1],
                    "replication_bytes_in_total": counters[2],
                    "followers": followers,
                }
            )
        metrics = dict(process.totals) | {
            "under_replicated_partitions": under_replicated,
            "under_min_isr_partitions": under_min,
            "at_min_isr_partitions": at_min,
            "leader_count": led,
            "partition_count": len(entries),
            "max_lag_messages": max(max_lag, 0),
            "fetch_purgatory_size": 0,
            "produce_purgatory_size": 0,
        }
        return {
            "v": 1,
            "kind": "broker",
            "ts_ms": tick,
            "node_id": broker_id,
            "started_ms": process.started_ms,
            "broker": metrics,
            "partitions": entries,
        }

    def _controller_line(self, tick: int) -> dict:
        s = self.s
        offline = sum(p.leader == -1 for p in self.partitions)
        not_preferred = sum(p.leader != p.replicas[0] for p in self.partitions)
        brokers = [
            {
                "broker_id": b,
                "fenced": b in self.fenced,
                "in_controlled_shutdown": False,
                "broker_epoch": self.processes[b].started_ms if b in self.processes else 0,
            }
            for b in self.hosted
        ]
        return {
            "v": 1,
            "kind": "controller",
            "ts_ms": tick,
            "node_id": CONTROLLER_ID,
            "started_ms": s.start_ms,
            "controller": {
                "active_controller_count": 1,
                "offline_partitions_count": offline,
                "global_partition_count": s.partitions,
                "global_topic_count": min(s.topics, s.partitions),
                "fenced_broker_count": len(self.fenced),
                "active_broker_count": len(self.hosted) - len(self.fenced),
                "preferred_replica_imbalance_count": not_preferred,
                "controller_epoch": 1,
            },
            "brokers": brokers,
        }
