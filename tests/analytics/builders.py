"""Metrics dump lines (docs/metrics-dumps.md) for tests, built field by field so each test states only what
it is about."""

import json
from pathlib import Path

from pyspark.sql import SparkSession

from replog.analytics.dumps import Dumps, read_dumps

T0 = 1_700_000_000_000  # a multiple of every window the tests use


def start(ts_ms: int, node_id: int, role: str = "broker") -> dict:
    return {"v": 1, "kind": "start", "ts_ms": ts_ms, "node_id": node_id, "role": role}


def follower(broker_id: int, lag_messages: int = 0, lag_bytes: int = 0, lag_ms: int = 0) -> dict:
    return {
        "broker_id": broker_id,
        "fetch_offset": 0,
        "last_fetch_ms": 0,
        "last_caught_up_ms": 0,
        "lag_messages": lag_messages,
        "lag_bytes": lag_bytes,
        "lag_ms": lag_ms,
    }


def partition(
    topic: str,
    number: int,
    leader: int,
    replicas: list[int],
    isr: list[int],
    *,
    leader_epoch: int = 0,
    min_isr: int = 2,
    bytes_in: int = 0,
    messages_in: int = 0,
    replication_bytes_in: int = 0,
    followers: list[dict] = (),
) -> dict:
    return {
        "topic": topic,
        "partition": number,
        "leader": leader,
        "leader_epoch": leader_epoch,
        "replicas": replicas,
        "isr": isr,
        "min_isr": min_isr,
        "log_start_offset": 0,
        "log_end_offset": 0,
        "high_watermark": 0,
        "size_bytes": 0,
        "bytes_in_total": bytes_in,
        "messages_in_total": messages_in,
        "replication_bytes_in_total": replication_bytes_in,
        "followers": list(followers),
    }


def broker(ts_ms: int, node_id: int, partitions: list[dict], *, started_ms: int = T0) -> dict:
    leader_count = sum(p["leader"] == node_id for p in partitions)
    metrics = {
        "bytes_in_total": 0,
        "messages_in_total": 0,
        "bytes_out_total": 0,
        "replication_bytes_in_total": 0,
        "replication_bytes_out_total": 0,
        "isr_shrinks_total": 0,
        "isr_expands_total": 0,
        "under_replicated_partitions": 0,
        "under_min_isr_partitions": 0,
        "at_min_isr_partitions": 0,
        "leader_count": leader_count,
        "partition_count": len(partitions),
        "max_lag_messages": 0,
        "fetch_purgatory_size": 0,
        "produce_purgatory_size": 0,
    }
    return {
        "v": 1,
        "kind": "broker",
        "ts_ms": ts_ms,
        "node_id": node_id,
        "started_ms": started_ms,
        "broker": metrics,
        "partitions": partitions,
    }


def isr_change(
    ts_ms: int,
    leader: int,
    topic: str,
    number: int,
    before: list[int],
    after: list[int],
    *,
    leader_epoch: int = 0,
    source: str = "leader",
) -> dict:
    return {
        "v": 1,
        "kind": "isr_change",
        "ts_ms": ts_ms,
        "node_id": leader,
        "topic": topic,
        "partition": number,
        "leader_epoch": leader_epoch,
        "partition_epoch": 0,
        "isr_before": before,
        "isr_after": after,
        "source": source,
    }


def controller(
    ts_ms: int, fenced: list[int], offline_partitions: int = 0, brokers: tuple[int, ...] = (1, 2, 3)
) -> dict:
    return {
        "v": 1,
        "kind": "controller",
        "ts_ms": ts_ms,
        "node_id": 3000,
        "started_ms": T0,
        "controller": {
            "active_controller_count": 1,
            "offline_partitions_count": offline_partitions,
            "global_partition_count": 1,
            "global_topic_count": 1,
            "fenced_broker_count": len(fenced),
            "active_broker_count": len(brokers) - len(fenced),
            "preferred_replica_imbalance_count": 0,
            "controller_epoch": 1,
        },
        "brokers": [
            {"broker_id": b, "fenced": b in fenced, "in_controlled_shutdown": False, "broker_epoch": 1}
            for b in brokers
        ],
    }


def write_dump(path: Path, lines: list[dict | str]) -> Path:
    """A dump file of these lines; a str is written as it is (with no newline added)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line if isinstance(line, str) else json.dumps(line) + "\n" for line in lines))
    return path


def load(spark: SparkSession, directory: Path, lines: list[dict | str]) -> Dumps:
    """The lines written to one dump file in `directory`, read back."""
    return read_dumps(spark, [write_dump(directory / "metrics-0000000000000.jsonl", lines)])
