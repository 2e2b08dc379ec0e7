"""`replog crash-loop`: SIGKILL brokers again and again during heavy writes, tear their unflushed data, and
prove that every restart recovers and that no corrupt batch is ever served.

A local cluster (controller in this process, three broker processes) with topic `crash`: four partitions,
RF=3, min.insync.replicas=2, unclean leader election off, small segments and a small index interval so that
rolls and index entries happen all the time. Two idempotent acks=all writers and one acks=1 writer (load
that makes leaders run ahead of the HW, so followers truncate; its values are outside the exactly-once check,
as acks=1 promises nothing across a leader change) write until the loop ends. Each round of the seeded loop:

1. picks a victim: sometimes the broker just restarted, killed again before it caught up; sometimes the
   current leader of a partition; otherwise any broker. Before a different broker is killed every ISR must
   be whole again, so at most one broker is ever behind and the other two hold every acknowledged write;
2. lets the writers run for a seeded delay and SIGKILLs the victim;
3. verifies its stopped log dir with the independent verifier (replog/chaos/log_verifier.py): a crash may
   leave a short last write, nothing else;
4. in some rounds (torn-write mode) damages what a power loss could take from the victim's unflushed data
   (only past the recovery point of its checkpoint): cuts the last batch of a partition's active segment at
   a random byte, appends random garbage after it, truncates its offset or time index, or corrupts the tail
   of a recovery-point / log-start checkpoint (Kafka's LogManager.loadLogs then resets them) or leaves a
   torn `.tmp` of a checkpoint write that never got renamed;
5. restarts the victim, times its recovery (process start to serving, then to being unfenced), and
   verifies its log dir again while it runs.

A reader consumes every partition with CRC checking on (`check.crcs=true`) all along. At the end the
writers flush, the run waits for whole ISRs, reads every partition from the start again with CRC checking,
checks the history with the queue checker (every acknowledged write read back exactly once), stops the
cluster cleanly, verifies every replica strictly, and compares replicas below the HW.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import confluent_kafka

from ..harness.local_cluster import LocalCluster
from .chaos_report import print_and_clean_up
from .checker import MAX_EXAMPLES, History, check
from .crash_loop_config import (
    ACKS_ALL_CONFIG,
    ACKS_ALL_WRITERS,
    ACKS_ONE_CONFIG,
    ACKS_ONE_PREFIX,
    ASSIGNMENT,
    BROKER_OVERRIDES,
    BROKERS,
    CATCH_UP_TIMEOUT_S,
    CONSUME_BATCH,
    CONSUME_POLL_S,
    CONSUME_TIMEOUT_S,
    KILL_AGAIN_CHANCE,
    KILL_LEADER_CHANCE,
    LIVE_READS,
    LIVE_RECHECK_S,
    MAX_KILL_DELAY_S,
    MIN_KILL_DELAY_S,
    PARTITIONS,
    RECORDS_PER_SECOND,
    SESSION_TIMEOUT_MS,
    TOPIC,
    TOPIC_CONFIGS,
    UNFENCE_TIMEOUT_S,
    VALUE_BYTES,
)
from .crash_loop_report import CrashLoopReport, Restart
from .duplicate_origins import duplicated_values, explain, find_copies, leaders_by_epoch
from .load import LoadProducer
from .log_verifier import verify_log_dir
from .read_back import read_back
from .replica_checks import isrs_whole, replica_difference
from .torn_writes import DAMAGE_KINDS, inject_damage


class Reader(threading.Thread):
    """Consumes every partition from the start while the loop runs, with librdkafka checking each batch's
    CRC-32C, so a corrupt batch served at any moment (a restarted leader, say) is caught, not only at the end."""

    def __init__(self, bootstrap: str, stop: threading.Event) -> None:
        super().__init__(name="crash-loop-reader", daemon=True)
        self.bootstrap = bootstrap
        self.stop = stop
        self.read = 0
        self.corrupt: list[str] = []

    def run(self) -> None:
        consumer = confluent_kafka.Consumer({"bootstrap.servers": self.bootstrap, "group.id": "replog-crash-reader",
                                             "enable.auto.commit": False, "check.crcs": True, "log_level": 2})
        try:
            consumer.assign([confluent_kafka.TopicPartition(TOPIC, p, confluent_kafka.OFFSET_BEGINNING)
                             for p in ASSIGNMENT])
            while not self.stop.is_set():
                for msg in consumer.consume(CONSUME_BATCH, CONSUME_POLL_S):
                    error = msg.error()
                    if error is None:
                        self.read += 1
                    elif error.code() == confluent_kafka.KafkaError._BAD_MSG:
                        self.corrupt.append(f"during the loop, partition {msg.partition()} offset {msg.offset()}: "
                                            f"{error.str()}")
        finally:
            consumer.close()


def pad(value: str) -> bytes:
    """The value, a separator, and filler up to VALUE_BYTES: heavier writes, same identity."""
    return (value + "|").encode().ljust(VALUE_BYTES, b".")


def unpad(raw: bytes) -> str:
    return raw.split(b"|", 1)[0].decode(errors="replace")



def new_writer(prefix: str, bootstrap: str, config: dict, stop: threading.Event) -> LoadProducer:
    """A writer of `<prefix>-<n>` values padded to VALUE_BYTES, round-robin over the crash topic."""
    return LoadProducer(prefix, bootstrap, stop, topic=TOPIC, partitions=PARTITIONS, config=config,
                        records_per_second=RECORDS_PER_SECOND, encode=pad, decode=unpad)


def eos_logged(config: dict, root: Path, prefix: str) -> dict:
    """`config` with librdkafka's idempotence log (debug context `eos`: epoch bumps, drains, sequence errors
    and their reasons) going to `writer-<prefix>.log` in the cluster directory, which a failed run keeps."""
    logger = logging.getLogger(f"replog.crash_loop.writer.{prefix}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    handler = logging.FileHandler(root / f"writer-{prefix}.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logger.handlers = [handler]
    return {**config, "debug": "eos", "log_level": 7, "logger": logger}


def close_eos_logs(writers: list[LoadProducer]) -> None:
    for writer in writers:
        logger = writer.config.get("logger")
        if logger is not None:
            for handler in logger.handlers:
                handler.close()
            logger.handlers = []


# ------------------------------------------------------------------------------------------------ loop


async def run_crash_loop(root: Path, *, restarts: int, seed: int, torn_fraction: float = 0.5) -> CrashLoopReport:
    """One crash loop with its cluster under root; every process it starts is stopped when it returns."""
    started = time.monotonic()
    # Two streams: the damage draws depend on the files (batch sizes), so sharing one stream would make the
    # schedule (victims, delays, which rounds are torn) depend on timing instead of on the seed alone.
    schedule_rng, damage_rng = random.Random(seed), random.Random(f"{seed}-damage")
    report = CrashLoopReport(seed, restarts, torn_fraction)
    cluster = LocalCluster(root, overrides=BROKER_OVERRIDES, session_timeout_ms=SESSION_TIMEOUT_MS)
    stop_writing = threading.Event()
    writers: list[LoadProducer] = []
    reader: Reader | None = None
    stopped = False
    try:
        await cluster.start()
        await cluster.controller.create_topic(TOPIC, ASSIGNMENT, TOPIC_CONFIGS)
        writers += [new_writer(f"all{i}", cluster.bootstrap, eos_logged(ACKS_ALL_CONFIG, root, f"all{i}"),
                               stop_writing) for i in range(ACKS_ALL_WRITERS)]
        writers.append(new_writer(ACKS_ONE_PREFIX, cluster.bootstrap, ACKS_ONE_CONFIG, stop_writing))
        for writer in writers:
            writer.start()
        reader = Reader(cluster.bootstrap, stop_writing)
        reader.start()
        print(f"cluster up in {root}; {restarts} restarts under load", flush=True)
        try:
            await crash_rounds(cluster, report, schedule_rng, damage_rng)
        except (AssertionError, RuntimeError, TimeoutError, OSError) as e:  # reported; the end checks still run
            report.loop_error = f"{type(e).__name__}: {e}"
            await bring_back(cluster, report)
        stop_writing.set()
        for thread in [*writers, reader]:
            await asyncio.to_thread(thread.join)
        record_writes(report, writers)
        report.read_during_loop = reader.read
        report.corrupt_served += reader.corrupt
        try:
            await cluster.wait_for(lambda: isrs_whole(cluster, TOPIC, ASSIGNMENT), CATCH_UP_TIMEOUT_S, "every ISR to be whole")
            report.converged = True
        except AssertionError:
            pass  # reported as a problem; still read and check what is there
        read = await asyncio.to_thread(read_all_checked, cluster.bootstrap, report)
        report.check = check(History({v for w in writers for v in w.attempted},
                                     {v: at for w in writers if w.prefix != ACKS_ONE_PREFIX
                                      for v, at in w.acknowledged.items()}, read))
        await cluster.stop()
        stopped = True
        await asyncio.to_thread(verify_stopped_cluster, cluster, report)
        report.duplicate_origins = await asyncio.to_thread(explain_duplicates, cluster, root, report, read)
    finally:
        stop_writing.set()
        if not stopped:
            await cluster.stop()
        for thread in [*writers, *([reader] if reader is not None else [])]:
            if thread.is_alive():
                await asyncio.to_thread(thread.join)
        close_eos_logs(writers)
    report.elapsed = time.monotonic() - started
    return report


async def crash_rounds(cluster: LocalCluster, report: CrashLoopReport, rng: random.Random,
                       damage_rng: random.Random) -> None:
    previous: int | None = None
    damage_turn = 0
    for number in range(1, report.planned_restarts + 1):
        victim, why = choose_victim(cluster, rng, previous)
        if victim != previous:
            await cluster.wait_for(lambda: isrs_whole(cluster, TOPIC, ASSIGNMENT), CATCH_UP_TIMEOUT_S,
                                   f"whole ISRs before killing broker {victim}")
        restart = Restart(number, victim, why)
        report.restarts.append(restart)
        await asyncio.sleep(rng.uniform(MIN_KILL_DELAY_S, MAX_KILL_DELAY_S))
        killed_epoch = broker_epoch(cluster, victim)
        await cluster.kill(victim)
        restart.killed_at_ms = int(time.time() * 1000)
        log_dir = cluster.brokers[victim].log_dir
        crashed = await asyncio.to_thread(verify_log_dir, log_dir, TOPIC, torn_tail=True)
        report.torn_tails_seen += sum(1 for p in crashed.partitions.values() if p.torn_tail_bytes)
        report.verifier_problems += [f"restart #{number}, broker {victim} killed: {p}" for p in crashed.all_problems]
        if rng.random() < report.torn_fraction:
            # Kinds take turns, so a short run covers each; the seed picks the rounds, partitions and bytes.
            for kind in DAMAGE_KINDS[damage_turn:] + DAMAGE_KINDS[:damage_turn]:
                description = await asyncio.to_thread(inject_damage, kind, log_dir, damage_rng)
                if description is not None:
                    restart.damage = kind
                    damage_turn = (DAMAGE_KINDS.index(kind) + 1) % len(DAMAGE_KINDS)
                    print(f"#{number}: damage {kind}: {description}", flush=True)
                    break
        await restart_and_time(cluster, restart, killed_epoch)
        print(f"#{number}: broker {victim} ({why}) serving after {restart.process_start_s:.2f}s, "
              f"unfenced after {restart.unfenced_s:.2f}s", flush=True)
        report.verifier_problems += [f"restart #{number}, broker {victim} recovered: {p}"
                                     for p in await verify_live(log_dir)]
        previous = victim


def choose_victim(cluster: LocalCluster, rng: random.Random, previous: int | None) -> tuple[int, str]:
    roll = rng.random()
    if previous is not None and roll < KILL_AGAIN_CHANCE:
        return previous, "again, before it caught up"
    if roll < KILL_AGAIN_CHANCE + KILL_LEADER_CHANCE:
        partition = rng.randrange(PARTITIONS)
        leader = cluster.controller.registration(TOPIC, partition).leader
        if leader in BROKERS:
            return leader, f"leader of partition {partition}"
    return rng.choice(BROKERS), "random"


def broker_epoch(cluster: LocalCluster, node_id: int) -> int:
    return cluster.controller.metadata.brokers[node_id].epoch


async def restart_and_time(cluster: LocalCluster, restart: Restart, killed_epoch: int) -> None:
    """Start the victim and time it: until it serves (its logs are recovered before it listens), then until
    the controller has unfenced its new registration. The killed process's registration stays active until
    its session expires, so being active alone proves nothing: the broker epoch must have moved on."""
    launched = time.monotonic()
    await asyncio.to_thread(cluster.brokers[restart.victim].start)
    restart.process_start_s = time.monotonic() - launched

    def registered_again() -> bool:
        return broker_epoch(cluster, restart.victim) > killed_epoch and restart.victim in cluster.active_brokers()

    await cluster.wait_for(registered_again, UNFENCE_TIMEOUT_S, f"broker {restart.victim} to be unfenced again")
    restart.unfenced_s = time.monotonic() - launched


async def verify_live(log_dir: Path) -> list[str]:
    """Problems of a running broker's log dir that two consecutive reads both find: one read may race an
    append or a truncation in flight. A read that loses a file to a concurrent truncation is repeated."""
    previous: list[str] | None = None
    for _ in range(LIVE_READS):
        try:
            found = (await asyncio.to_thread(verify_log_dir, log_dir, TOPIC, torn_tail=True)).all_problems
        except FileNotFoundError:
            found = None
        if found is not None:
            if not found:
                return []
            if previous is not None:
                return [p for p in found if p in previous]
            previous = found
        await asyncio.sleep(LIVE_RECHECK_S)
    return previous if previous is not None else [f"{log_dir}: files vanished during each of {LIVE_READS} reads"]


async def bring_back(cluster: LocalCluster, report: CrashLoopReport) -> None:
    for node_id, broker in cluster.brokers.items():
        if not broker.running:
            try:
                await cluster.restart(node_id)
            except (AssertionError, RuntimeError, TimeoutError) as e:
                report.loop_error += f"; could not start broker {node_id} again: {e}"


def record_writes(report: CrashLoopReport, writers: list[LoadProducer]) -> None:
    acks_all = [w for w in writers if w.prefix != ACKS_ONE_PREFIX]
    report.attempted = sum(len(w.attempted) for w in acks_all)
    report.acknowledged = sum(len(w.acknowledged) for w in acks_all)
    report.failed = sum(len(w.failed) for w in acks_all)
    report.acks_one_acknowledged = sum(len(w.acknowledged) for w in writers if w.prefix == ACKS_ONE_PREFIX)
    report.failure_reasons = Counter(reason for w in acks_all for reason in w.failed.values())
    report.writer_fatal_errors = [e for w in writers for e in w.fatal]


def read_all_checked(bootstrap: str, report: CrashLoopReport) -> dict[int, list[tuple[int, str]]]:
    """Every partition from offset 0 up to its HW with librdkafka verifying each batch's CRC-32C: a corrupt
    batch is an error message (not a record), counted as served corruption."""
    config = {"bootstrap.servers": bootstrap, "group.id": "replog-crash-loop", "enable.auto.commit": False,
              "check.crcs": True, "log_level": 2}
    return read_back(config, TOPIC, ASSIGNMENT, report, decode=unpad, timeout_s=CONSUME_TIMEOUT_S,
                     on_corrupt=report.corrupt_served.append)


def verify_stopped_cluster(cluster: LocalCluster, report: CrashLoopReport) -> None:
    """After a clean stop: every replica strictly (no torn tail, epochs exact), and replicas identical
    below each partition's HW."""
    verified = {node: verify_log_dir(broker.log_dir, TOPIC, exact_epochs=True)
                for node, broker in cluster.brokers.items()}
    for node, found in verified.items():
        report.verifier_problems += [f"broker {node} after a clean stop: {p}" for p in found.all_problems]
    for partition, replicas in ASSIGNMENT.items():
        high_watermark = report.high_watermarks.get(partition, 0)
        below = {}
        for node in replicas:
            replica = verified[node].partitions.get(f"{TOPIC}-{partition}")
            batches = [] if replica is None else replica.batches
            below[node] = [(b.base_offset, b.last_offset, b.crc, b.leader_epoch, b.producer_id, b.base_sequence)
                           for b in batches if b.last_offset < high_watermark]
        difference = replica_difference(below, high_watermark)
        if difference:
            report.replica_divergence.append(f"partition {partition}: {difference}")


def explain_duplicates(cluster: LocalCluster, root: Path, report: CrashLoopReport,
                       read: dict[int, list[tuple[int, str]]]) -> list[str]:
    """For each of the first duplicated values, where its copies are in a replica that holds them all."""
    wanted = duplicated_values(read, MAX_EXAMPLES)
    if not wanted:
        return []
    kill_times = [(r.number, r.killed_at_ms) for r in report.restarts]
    leaders = leaders_by_epoch(root, TOPIC)
    for node, broker in sorted(cluster.brokers.items()):
        copies = find_copies(broker.log_dir, TOPIC, wanted, unpad)
        if all(len(copies[value]) == len(places) for value, places in wanted.items()):
            return [f"(broker {node}'s replica) {line}" for line in explain(copies, leaders, kill_times)]
    return ["no replica holds every copy of the duplicated values"]


def main(*, restarts: int, seed: int | None, data_dir: Path | None, torn_fraction: float) -> int:
    """The `replog crash-loop` command: run, print the report, exit 0 only if nothing was wrong."""
    if seed is None:
        seed = int.from_bytes(os.urandom(4), "big")  # printed with the report, so the run can be repeated
    if restarts < 1 or not 0 <= torn_fraction <= 1:
        raise ValueError("--restarts must be >= 1 and --torn-fraction within [0, 1]")
    root = data_dir or Path(tempfile.mkdtemp(prefix="replog-crash-loop-"))
    report = asyncio.run(run_crash_loop(root, restarts=restarts, seed=seed, torn_fraction=torn_fraction))
    return print_and_clean_up(report, root, keep=data_dir is not None)
