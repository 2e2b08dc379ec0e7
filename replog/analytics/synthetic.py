"""Synthetic metrics dumps (docs/metrics-dumps.md) of a cluster whose throughput, lag and ISR changes are
known by construction, at any scale (lines are written as they are made; memory grows with the partition
count only).

    python -m replog.analytics.synthetic --brokers 3 --partitions 30 --seconds 120 --out DIR [--seed 1]

The model, every `interval_ms` tick:
- brokers 1..N and a controller (CONTROLLER_ID) start at `start_ms`; partition k (of all topics) is
  partition k // topics of topic-(k % topics), with replicas [(k + j) % N + 1 for j < replication_factor],
  the first one its leader, and min ISR `min_isr`;
- every partition with a live leader appends `bytes_per_second` of records of `record_bytes` each; a
  following replica that is in sync lags its leader by a number of records drawn (seeded) uniformly from
  0 to one tick's worth, and its lag_ms is the time the leader took to append them;
- restart r kills broker (r % N) + 1 at a tick (it leaves half a line), the controller fences it
  SESSION_TIMEOUT_MS later (moving its leaderships to the next in-sync replica and removing it from the
  other ISRs), it starts again `downtime_s` after the kill and each partition it follows takes it back into
  the ISR catch_up_ms(k) after the start (its log catching up linearly meanwhile); leaders do not move back;
- stall s stops one follower fetching: its leader removes it from the ISR REPLICA_LAG_TIME_MS later and
  adds it back when the stall ends. Stall s overlaps restart s when there is one, on a partition both
  brokers replicate, so the partition goes under min ISR (with a replication factor of 3 or more).
"""

import argparse
import heapq
import json
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path

CONTROLLER_ID = 3000
SESSION_TIMEOUT_MS = 6_500
REPLICA_LAG_TIME_MS = 10_000
STALL_MS = 30_000
STALL_AFTER_KILL_MS = 1_000
CATCH_UP_BASE_MS, CATCH_UP_STEP_MS = 1_500, 250
DEFAULT_START_MS = 1_700_000_000_000  # a multiple of any whole number of seconds up to 100 s
DEFAULT_MAX_FILE_BYTES = 64 << 20  # metrics.dump.max.bytes


@dataclass(frozen=True)
class Restart:
    broker_id: int
    killed_ms: int
    fenced_ms: int
    started_ms: int


@dataclass(frozen=True)
class Stall:
    partition_index: int
    follower_id: int
    begins_ms: int
    shrinks_ms: int
    ends_ms: int


@dataclass(frozen=True)
class Scenario:
    brokers: int
    partitions: int
    seconds: int
    interval_ms: int = 1000
    topics: int = 1
    replication_factor: int = 3
    min_isr: int = 2
    bytes_per_second: int = 10_000  # per partition
    record_bytes: int = 100
    restarts: int = 1
    stalls: int = 1
    downtime_s: int = 20
    seed: int = 0
    start_ms: int = DEFAULT_START_MS
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES

    def __post_init__(self) -> None:
        if not 1 <= self.replication_factor <= self.brokers:
            raise ValueError("the replication factor must be between 1 and the number of brokers")
        per_tick = self.bytes_per_second * self.interval_ms
        if per_tick % (1000 * self.record_bytes) or per_tick == 0:
            raise ValueError("a tick must append a whole, positive number of records")
        if self.downtime_s * 1000 <= SESSION_TIMEOUT_MS:
            raise ValueError(f"a restarted broker must stay down longer than {SESSION_TIMEOUT_MS} ms")
        settle_ms = max(
            self.downtime_s * 1000 + CATCH_UP_BASE_MS + 7 * CATCH_UP_STEP_MS, STALL_AFTER_KILL_MS + STALL_MS
        )
        if self.restarts and self.seconds * 1000 // (self.restarts + 1) <= settle_ms:
            raise ValueError(
                "restarts this close overlap: fewer restarts, more seconds or a shorter downtime"
            )

    @property
    def records_per_tick(self) -> int:
        return self.bytes_per_second * self.interval_ms // (1000 * self.record_bytes)

    @property
    def end_ms(self) -> int:
        return self.start_ms + self.seconds * 1000

    def topic(self, k: int) -> str:
        return f"topic-{k % self.topics}"

    def partition_number(self, k: int) -> int:
        return k // self.topics

    def replicas(self, k: int) -> list[int]:
        return [(k + j) % self.brokers + 1 for j in range(self.replication_factor)]

    def catch_up_ms(self, k: int) -> int:
        """How long after its restart a broker is back in partition k's ISR."""
        return CATCH_UP_BASE_MS + CATCH_UP_STEP_MS * (k % 8)

    def _tick_at_or_before(self, ms: int) -> int:
        return ms - (ms - self.start_ms) % self.interval_ms

    def restart_schedule(self) -> list[Restart]:
        schedule = []
        for r in range(self.restarts):
            killed = self._tick_at_or_before(
                self.start_ms + (r + 1) * self.seconds * 1000 // (self.restarts + 1)
            )
            schedule.append(
                Restart(
                    r % self.brokers + 1, killed, killed + SESSION_TIMEOUT_MS, killed + self.downtime_s * 1000
                )
            )
        return schedule

    def stall_schedule(self) -> list[Stall]:
        if self.replication_factor < 2:
            return []
        restarts = self.restart_schedule()
        schedule = []
        for s in range(self.stalls):
            overlapping = s < len(restarts) and self.replication_factor >= 3
            if overlapping:  # a partition the restarted broker follows (second replica); stall its third
                restart = restarts[s]
                k = (restart.broker_id - 2) % self.brokers
                follower, begins = self.replicas(k)[2], restart.killed_ms + STALL_AFTER_KILL_MS
            else:
                k = (7 * s) % self.partitions
                follower = self.replicas(k)[1]
                begins = self.start_ms + (s + 1) * self.seconds * 1000 // (self.stalls + 1)
            if k < self.partitions:
                schedule.append(Stall(k, follower, begins, begins + REPLICA_LAG_TIME_MS, begins + STALL_MS))
        return schedule


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


def generate(scenario: Scenario, out: Path) -> list[Path]:
    """Write the scenario's dumps under `out` (broker-<id>/ and controller/); returns the files."""
    Simulation(scenario, out).run()
    return sorted(out.rglob("*.jsonl"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m replog.analytics.synthetic",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--brokers", type=int, required=True, help="brokers in the cluster (required)")
    parser.add_argument("--partitions", type=int, required=True, help="partitions in all, over the topics (required)")
    parser.add_argument("--seconds", type=int, required=True, help="length of the dumped history (required)")
    parser.add_argument("--interval-ms", type=int, default=1000,
                        help="time between snapshot lines (default: %(default)s)")
    parser.add_argument("--out", type=Path, required=True,
                        help="where the dumps go: broker-<id>/ and controller/ (required)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the lag draws (default: %(default)s)")
    parser.add_argument("--topics", type=int, default=1, help="topics the partitions spread over (default: "
                        "%(default)s)")
    parser.add_argument("--replication-factor", type=int, default=3,
                        help="replicas of each partition (default: %(default)s)")
    parser.add_argument("--min-isr", type=int, default=2, help="min.insync.replicas of every partition (default: "
                        "%(default)s)")
    parser.add_argument("--bytes-per-second", type=int, default=10_000,
                        help="produced to each partition (default: %(default)s)")
    parser.add_argument("--record-bytes", type=int, default=100, help="size of one record (default: %(default)s)")
    parser.add_argument("--restarts", type=int, default=1,
                        help="broker kills and restarts, spread evenly (default: %(default)s)")
    parser.add_argument("--stalls", type=int, default=1,
                        help="followers that stop fetching for a while (default: %(default)s)")
    parser.add_argument("--downtime-s", type=int, default=20,
                        help="how long a killed broker stays down (default: %(default)s)")
    parser.add_argument("--max-file-bytes", type=int, default=DEFAULT_MAX_FILE_BYTES,
                        help="a new dump file past this size, as metrics.dump.max.bytes (default: %(default)s)")
    args = parser.parse_args(argv)
    options = {name: value for name, value in vars(args).items() if name != "out"}
    try:
        scenario = Scenario(**options)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    files = generate(scenario, args.out)
    total = sum(path.stat().st_size for path in files)
    print(f"{len(files)} files, {total / 1e6:,.1f} MB under {args.out}")
    for restart in scenario.restart_schedule():
        print(f"restart: {restart}")
    for stall in scenario.stall_schedule():
        print(f"stall: {stall}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
