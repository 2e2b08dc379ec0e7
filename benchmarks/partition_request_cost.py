"""Broker CPU per request as the partitions in it grow, in-process: a leader's ReplicaManager with two
followers, no sockets, so the figure is the broker's own per-partition work (issue 18: no loop over all
partitions per request or per append).

Two operations per partition count N, each timed with time.process_time:
- an idle follower fetch over all N partitions: read at the LEO, park, expire (as replica.fetch.wait.max.ms
  ends), which is what an idle broker does twice a second per fetcher;
- an acks=all produce of one 1 KiB batch to each of the N partitions, plus the two follower fetches that
  move every HW and complete it, with both followers' previous fetches parked on the N partitions.
Baseline: N times the 1-partition cost of the same run, so 1.0 means the cost grows linearly with the
partitions and anything above it is per-request work that grows faster.
Index entries are off (index.interval.bytes at its maximum): a first write into a fresh page of the
mmap'd index is a page fault whose cost is the disk's, and would swamp the CPU figures.
"""

import asyncio
import tempfile
import time
import uuid
from pathlib import Path

from kio.schema.errors import ErrorCode

from replog.broker.fetch_params import FetchParams, FetchPartitionParams
from replog.broker.replica_manager import ReplicaManager
from replog.log.config import LogConfig
from replog.log.log_manager import LogManager
from replog.protocol.control import LeaderAndIsrPartitionState, LeaderAndIsrRequest, LeaderAndIsrTopicState
from replog.protocol.records import build_batch
from replog.server.completion import Completion

from .harness import Result, Stats

NAME = "partition-request-cost"
LEADER, FOLLOWERS = 1, (2, 3)
TOPIC = "t"
VALUE = b"x" * 1024
FETCH_MAX_WAIT_MS = 500


def clock_ms() -> int:
    return time.time_ns() // 1_000_000


async def leader_of(log_dir: Path, partitions: int) -> ReplicaManager:
    config = LogConfig(index_interval_bytes=2**31 - 1)
    manager = ReplicaManager(LEADER, LogManager([log_dir], config, clock_ms=clock_ms), config, 2,
                             clock_ms=clock_ms, replica_lag_time_max_ms=30_000, fetch_purgatory_size=1_000,
                             produce_purgatory_size=1_000, alter_isr=lambda partition, change: None)
    replicas = [LEADER, *FOLLOWERS]
    states = [LeaderAndIsrPartitionState(TOPIC, p, 1, LEADER, 1, replicas, 1, replicas) for p in range(partitions)]
    error, errors = await manager.become_leader_or_follower(
        LeaderAndIsrRequest(9, 1, -1, [LeaderAndIsrTopicState(TOPIC, uuid.uuid4(), states)], []))
    assert error == ErrorCode.none and set(errors.values()) == {ErrorCode.none}
    return manager


def follower_fetch(manager: ReplicaManager, replica_id: int, partitions: int) -> FetchParams:
    """A caught-up follower's fetch of every partition, at the leader's LEO (so it moves each HW there)."""
    return FetchParams(replica_id, FETCH_MAX_WAIT_MS, 1, 50 << 20, [
        FetchPartitionParams(TOPIC, p, manager.get_partition(TOPIC, p).log.log_end_offset, 1, -1, 0, 1 << 20)
        for p in range(partitions)])


def idle_fetch_seconds(manager: ReplicaManager, partitions: int) -> float:
    params = follower_fetch(manager, FOLLOWERS[0], partitions)
    started = time.process_time()
    parked = manager.fetch_messages(params)
    manager.fetch_purgatory.complete_all()  # as its expiry would
    elapsed = time.process_time() - started
    assert isinstance(parked, Completion) and parked.done()
    return elapsed


def produce_seconds(manager: ReplicaManager, partitions: int) -> float:
    for replica_id in FOLLOWERS:  # both followers wait on every partition, as between rounds
        manager.fetch_messages(follower_fetch(manager, replica_id, partitions))
    batch = bytes(build_batch([(None, VALUE, [], 1000)]))
    entries = [(TOPIC, p, memoryview(bytearray(batch))) for p in range(partitions)]
    started = time.process_time()
    produced = manager.append_records(entries, -1, 30_000)
    for replica_id in FOLLOWERS:
        manager.fetch_messages(follower_fetch(manager, replica_id, partitions))
    elapsed = time.process_time() - started
    assert isinstance(produced, Completion) and produced.done()
    assert all(result.error_code == ErrorCode.none for result in produced.result().values())
    manager.fetch_purgatory.complete_all()
    return elapsed


async def measure(workdir: Path, partitions: int, rounds: int) -> tuple[list[float], list[float]]:
    """(idle fetch seconds, produce seconds) per round, after one discarded round: each partition's first
    append writes its leader-epoch checkpoint."""
    with tempfile.TemporaryDirectory(dir=workdir) as log_dir:
        manager = await leader_of(Path(log_dir), partitions)
        idle, produce = [], []
        for round_number in range(rounds + 1):
            fetch_s, produce_s = idle_fetch_seconds(manager, partitions), produce_seconds(manager, partitions)
            if round_number:
                idle.append(fetch_s)
                produce.append(produce_s)
        await manager.shutdown()
        manager.log_manager.shutdown()
    return idle, produce


def run(quick: bool, workdir: Path) -> list[Result]:
    counts, rounds = ((1, 100), 3) if quick else ((1, 100, 333, 1_000, 3_000), 5)
    measured = {partitions: asyncio.run(measure(workdir, partitions, rounds)) for partitions in counts}
    one_idle, one_produce = (Stats.of(samples).median for samples in measured[1])
    results = []
    for partitions, (idle, produce) in measured.items():
        extra = {"partitions": partitions, "rounds": rounds}
        results.append(Result(NAME, f"idle follower fetch, {partitions:,} partitions", "CPU-s",
                              Stats.of(idle), "1 partition x N, same run", one_idle * partitions, extra))
        results.append(Result(NAME, f"acks=all produce + 2 follower fetches, {partitions:,} partitions", "CPU-s",
                              Stats.of(produce), "1 partition x N, same run", one_produce * partitions, extra))
    return results
