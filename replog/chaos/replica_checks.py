"""The checks of the replicas at the end of a chaos run: whole ISRs, every high watermark caught up with its log
end offset, and replicas holding the same batches below the high watermark."""

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from ..harness.local_cluster import LocalCluster
from ..log.checkpoint import OffsetCheckpointFile
from ..log.dump import dump_log_file
from ..log.log_manager import HIGH_WATERMARK_CHECKPOINT
from .chaos_report import ChaosReport
from .chaos_run_config import ASSIGNMENT, FILE_POLL_INTERVAL_S, HW_CATCH_UP_BOUND_S, REPLICAS_TIMEOUT_S, TOPIC


def isrs_whole(cluster: LocalCluster, topic: str = TOPIC, assignment: dict[int, list[int]] = ASSIGNMENT) -> bool:
    """Whether every partition of the topic has all its replicas in its ISR, led by one of them."""
    for partition, replicas in assignment.items():
        registration = cluster.registration(topic, partition)
        if set(registration.isr) != set(replicas) or registration.leader not in replicas:
            return False
    return True


def describe_partitions(cluster: LocalCluster) -> str:
    registrations = [cluster.registration(TOPIC, p) for p in ASSIGNMENT]
    return (f"active brokers {sorted(cluster.active_brokers())}; " + "; ".join(
        f"partition {r.partition} leader {r.leader} epoch {r.leader_epoch} ISR {list(r.isr)}" for r in registrations))


def replica_positions(cluster: LocalCluster) -> dict[tuple[int, int], tuple[int | None, int]]:
    """(partition, replica) -> (its checkpointed HW or None, its LEO), read from the replica's files."""
    positions = {}
    for node_id, broker in cluster.brokers.items():
        try:
            checkpointed = OffsetCheckpointFile(broker.log_dir / HIGH_WATERMARK_CHECKPOINT).read()
        except (OSError, ValueError):  # not written yet, or being replaced: no HW known
            checkpointed = {}
        for partition, replicas in ASSIGNMENT.items():
            if node_id in replicas:
                batches = [b for b in dump_log_file(cluster.log_dir(node_id, TOPIC, partition)) if "error" not in b]
                end = batches[-1]["last_offset"] + 1 if batches else 0
                positions[partition, node_id] = (checkpointed.get((TOPIC, partition)), end)
    return positions


async def measure_catch_up(cluster: LocalCluster, report: ChaosReport) -> None:
    """How long after the ISRs are whole every replica's HW equals its LEO, the same on all replicas."""
    began = time.monotonic()
    positions: dict[tuple[int, int], tuple[int | None, int]] = {}

    def caught_up() -> bool:
        positions.update(replica_positions(cluster))
        return all(hw == end for hw, end in positions.values()) and all(
            len({end for (p, _), (_, end) in positions.items() if p == partition}) == 1 for partition in ASSIGNMENT)

    if await poll_off_loop(caught_up, HW_CATCH_UP_BOUND_S):
        report.hw_caught_up_after = time.monotonic() - began
    else:
        report.hw_lagging = [f"partition {p} replica {n}: HW {hw}, LEO {end}"
                             for (p, n), (hw, end) in sorted(positions.items())]


def replica_batches(partition_dir: Path, high_watermark: int) -> list[tuple]:
    """The batches of a replica below the high watermark, as `replog log dump` describes them (without
    file names and positions, which differ between replicas); unreadable data is kept as its error."""
    batches = []
    for entry in dump_log_file(partition_dir):
        if "error" in entry:
            batches.append(("unreadable", entry["error"]))
        elif entry["last_offset"] < high_watermark:
            batches.append((entry["base_offset"], entry["last_offset"], entry["crc"],
                            entry["partition_leader_epoch"], entry["producer_id"], entry["base_sequence"]))
    return batches


def replica_difference(batches: dict[int, list[tuple]], high_watermark: int) -> str | None:
    """Why these replicas' batches below the high watermark are not one gap-free log, or None."""
    first_node, first = next(iter(batches.items()))
    for node, theirs in batches.items():
        if theirs != first:
            at = next((i for i, (a, b) in enumerate(zip(first, theirs, strict=False)) if a != b),
                      min(len(first), len(theirs)))
            return (f"replica {first_node} and replica {node} differ at batch {at}: "
                    f"{first[at] if at < len(first) else 'none'} vs {theirs[at] if at < len(theirs) else 'none'}")
    expected_base = 0
    for batch in first:
        if batch[0] != expected_base:
            return f"every replica lacks offsets {expected_base}..{batch[0] - 1} (batch {batch})"
        expected_base = batch[1] + 1
    if expected_base != high_watermark:
        return f"every replica ends at offset {expected_base - 1}, below the high watermark {high_watermark}"
    return None


async def compare_replicas(cluster: LocalCluster, high_watermarks: dict[int, int]) -> list[str]:
    """Wait (bounded) until each partition's replicas agree below its HW; return the partitions that do not."""
    differences: dict[int, str | None] = {}

    def all_agree() -> bool:
        for partition, replicas in ASSIGNMENT.items():
            batches = {n: replica_batches(cluster.log_dir(n, TOPIC, partition), high_watermarks[partition])
                       for n in replicas}
            differences[partition] = replica_difference(batches, high_watermarks[partition])
        return not any(differences.values())

    await poll_off_loop(all_agree, REPLICAS_TIMEOUT_S)  # if they never agree, the differences are the finding
    return [f"partition {p}: {d}" for p, d in sorted(differences.items()) if d]


async def poll_off_loop(check: Callable[[], bool], timeout: float) -> bool:
    """Poll a check that reads log files in a worker thread, so that the controller, which shares this event
    loop, keeps answering heartbeats (run on the loop, a scan of every replica's log got all brokers fenced);
    whether it passed within timeout."""
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(check):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(FILE_POLL_INTERVAL_S)
    return True
