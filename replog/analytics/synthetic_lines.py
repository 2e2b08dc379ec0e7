"""The lines of a synthetic metrics dump (docs/metrics-dumps.md), built from the simulated cluster's state, and
the files they go to."""

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from .synthetic_scenario import CONTROLLER_ID, Scenario
from .synthetic_state import BrokerProcess, PartitionState


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


def start_line(ms: int, node_id: int, role: str) -> dict:
    """The first line of a process's dump."""
    return {"v": 1, "kind": "start", "ts_ms": ms, "node_id": node_id, "role": role}


def isr_change_line(scenario: Scenario, ms: int, p: PartitionState, before: list[int], source: str) -> dict:
    """The partition leader's line for a change of the ISR."""
    return {
        "v": 1,
        "kind": "isr_change",
        "ts_ms": ms,
        "node_id": p.leader,
        "topic": scenario.topic(p.k),
        "partition": scenario.partition_number(p.k),
        "leader_epoch": p.leader_epoch,
        "partition_epoch": p.partition_epoch,
        "isr_before": before,
        "isr_after": list(p.isr),
        "source": source,
        "replicas": list(p.replicas),
        "min_isr": scenario.min_isr,
    }


def broker_line(scenario: Scenario, process: BrokerProcess, hosted: Sequence[PartitionState], tick: int) -> dict:
    """A broker's snapshot line: its counters, and every partition it hosts with, where it leads, its followers."""
    s = scenario
    broker_id = process.broker_id
    entries = []
    led = under_replicated = under_min = at_min = 0
    max_lag = 0
    for p in hosted:
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


def controller_line(
    scenario: Scenario,
    partitions: Sequence[PartitionState],
    broker_ids: Sequence[int],
    processes: Mapping[int, BrokerProcess],
    fenced: set[int],
    tick: int,
) -> dict:
    """The controller's snapshot line: cluster-wide counts and every broker's registration."""
    s = scenario
    offline = sum(p.leader == -1 for p in partitions)
    not_preferred = sum(p.leader != p.replicas[0] for p in partitions)
    brokers = [
        {
            "broker_id": b,
            "fenced": b in fenced,
            "in_controlled_shutdown": False,
            "broker_epoch": processes[b].started_ms if b in processes else 0,
        }
        for b in broker_ids
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
            "fenced_broker_count": len(fenced),
            "active_broker_count": len(broker_ids) - len(fenced),
            "preferred_replica_imbalance_count": not_preferred,
            "controller_epoch": 1,
        },
        "brokers": brokers,
    }
