"""`replog chaos`: a Jepsen-style run against a local three-broker cluster.

A controller (in this process) and three broker processes; topic `chaos` with three partitions, RF=3,
min.insync.replicas=2 and unclean leader election off. Producer threads (confluent-kafka, acks=all,
enable.idempotence=true) write unique values `p<i>-<n>` round-robin over the partitions while the nemesis
plays its seeded schedule (replog/chaos/nemesis.py): SIGKILL and restart brokers, SIGSTOP and SIGCONT
them, cut network links around a broker (refused or blackholed, through the proxies LocalCluster puts in
front of every broker and of the controller) and heal them, restart the controller or stop it for a while.
With `controllers` > 1 the controllers are a Raft quorum of processes (LocalCluster(controller_processes=True)),
and the quorum faults (SIGKILL, SIGSTOP, isolation of the active controller or a standby, and the active
controller killed together with a broker) join the schedule; the checks are the same.
Before each fault the run waits (bounded by ISR_WHOLE_TIMEOUT_S) until every ISR holds every replica again,
so faults never pile up beyond what min.insync.replicas=2 survives; the wait shifts the rest of the schedule
and is reported. A reader consumes every partition (read_committed, up to the HW) while the faults go on.

Then everything is healed, the producers flush, the run waits (bounded) until every ISR holds every replica,
reads every partition from offset 0 up to its high watermark, and checks:

- the history, with the queue checker (replog/chaos/checker.py): lost, duplicated, divergent offsets,
  non-monotonic offsets, unexpected values, reads during the faults that the final read contradicts,
  definitely failed writes that were read; other failed writes count as indeterminate;
- the replicas: every replica of a partition holds the same batches (offsets, CRC, leader epoch, producer
  id and sequence, as `replog log dump` shows them) below the high watermark, with no gap from offset 0;
- catching up: once the ISRs are whole and the producers are done, every replica's high watermark
  (its replication-offset-checkpoint) reaches its log end offset, the same on every replica, within
  HW_CATCH_UP_BOUND_S.

The history (every write and its outcome, both reads) and the report go to history.json and report.json
in the data directory; the seed replays the schedule.
"""
import asyncio
import os
import tempfile
import threading
import time
from pathlib import Path

from ..harness.cluster_security import sasl_ssl_cluster
from ..harness.controller_quorum import controller_host
from ..harness.local_cluster import CLIENT_HOST, CONTROLLER_HOST, LocalCluster, broker_host
from . import nemesis
from .chaos_report import ChaosReport, print_and_clean_up, record_writes, write_json
from .chaos_run_config import (
    ASSIGNMENT,
    BROKERS,
    CONVERGENCE_TIMEOUT_S,
    ISR_WHOLE_TIMEOUT_S,
    PRODUCER_CONFIG,
    PRODUCERS,
    TOPIC,
    TOPIC_CONFIGS,
)
from .checker import History, check
from .load import LiveReader, LoadProducer
from .quorum_faults import QUORUM_ACTIONS, FaultTarget, perform_quorum_action
from .read_back import read_all
from .replica_checks import compare_replicas, describe_partitions, isrs_whole, measure_catch_up


async def run_chaos(root: Path, *, duration: float, faults: tuple[str, ...], seed: int,
                    controllers: int = 1, security: str = "plaintext") -> ChaosReport:
    """Run one chaos test with its cluster under root; every process it starts is stopped when it returns.
    The history and the report are written to root/history.json and root/report.json. security: plaintext,
    or sasl_ssl (every link of the cluster over TLS, the controllers' too, each node logging in as itself and
    the clients with SCRAM-SHA-512)."""
    nemesis.check_quorum_faults(faults, controllers)
    started = time.monotonic()
    secured = None
    if security == "sasl_ssl":
        hosts = [CLIENT_HOST, CONTROLLER_HOST, *(broker_host(b) for b in BROKERS),
                 *(controller_host(i) for i in range(controllers))]
        secured = sasl_ssl_cluster(root / "tls", hosts)
    elif security != "plaintext":
        raise ValueError(f"--security {security}: expected plaintext or sasl_ssl")
    cluster = LocalCluster(root, broker_proxies=True, controllers=controllers, controller_processes=controllers > 1,
                           security=secured)
    client_security = secured.client_config if secured else {}
    report = ChaosReport(seed, duration, faults, nemesis.schedule(seed, duration, faults, BROKERS))
    stop_producing = threading.Event()
    stop_reading = threading.Event()
    producers: list[LoadProducer] = []
    reader: LiveReader | None = None
    history: History | None = None
    try:
        await cluster.start()
        await cluster.create_topic(TOPIC, ASSIGNMENT, TOPIC_CONFIGS)
        await cluster.wait_for(lambda: isrs_whole(cluster), ISR_WHOLE_TIMEOUT_S, "the topic's ISRs")
        producers += [LoadProducer(f"p{i}", cluster.bootstrap, stop_producing,
                                   config={**PRODUCER_CONFIG, **client_security}) for i in range(PRODUCERS)]
        reader = LiveReader(cluster.bootstrap, stop_reading, client_security)
        for thread in (*producers, reader):
            thread.start()
        print(f"cluster up in {root}; producing while the nemesis runs {len(report.schedule)} actions",
              flush=True)
        await play(cluster, report, time.monotonic())
        stop_reading.set()
        await heal(cluster, report)
        healed = time.monotonic()
        stop_producing.set()
        for thread in (*producers, reader):
            await asyncio.to_thread(thread.join)
        record_writes(report, producers)
        report.read_during_faults = sum(len(records) for records in reader.read.values())
        report.reader_errors = reader.errors
        try:
            await cluster.wait_for(lambda: isrs_whole(cluster), CONVERGENCE_TIMEOUT_S, "every ISR to be whole")
            report.converged_after = time.monotonic() - healed
            await measure_catch_up(cluster, report)
        except AssertionError:  # reported as a problem; still read and check what is there
            report.unconverged_state = describe_partitions(cluster)
        read = await asyncio.to_thread(read_all, cluster.bootstrap, report, client_security)
        history = History({v for p in producers for v in p.attempted},
                          {v: at for p in producers for v, at in p.acknowledged.items()}, read,
                          failed={v: e for p in producers for v, e in p.failed.items()},
                          read_during_faults=reader.read)
        report.check = check(history)
        if report.converged_after is not None:
            report.replica_divergence = await compare_replicas(cluster, report.high_watermarks)
    finally:
        stop_producing.set()
        stop_reading.set()
        resume_all(cluster)  # a stopped process would not see SIGTERM
        await cluster.stop()
        for thread in (*producers, *([reader] if reader else [])):
            if thread.is_alive():
                await asyncio.to_thread(thread.join)
        report.elapsed = time.monotonic() - started
        write_json(root, report, history)
    return report


async def play(cluster: LocalCluster, report: ChaosReport, started: float) -> None:
    """Each action at its time (or as soon as the one before it is done: a restart waits until the broker
    is unfenced), then the rest of the duration. Before a fault, wait until every ISR is whole; the wait
    postpones the rest of the schedule, so each fault still lasts as long as the seed says."""
    postponed = 0.0
    hit = FaultTarget()
    for action in report.schedule:
        await asyncio.sleep(max(0.0, started + postponed + action.at - time.monotonic()))
        if action.starts_fault:
            waited = await wait_for_whole_isrs(cluster, report, action)
            report.isr_waits.append(waited)
            postponed = max(postponed, time.monotonic() - started - action.at)
        report.performed_at.append(time.monotonic() - started)
        print(f"nemesis: {action}", flush=True)
        try:
            await perform(cluster, action, hit)
        except (AssertionError, RuntimeError, TimeoutError, OSError) as e:  # heal() brings the broker back
            report.nemesis_errors.append(f"{action}: {e}")
    # The load runs the whole duration, postponements included.
    await asyncio.sleep(max(0.0, started + postponed + report.duration - time.monotonic()))


async def wait_for_whole_isrs(cluster: LocalCluster, report: ChaosReport, action: nemesis.Action) -> float:
    """Seconds until every ISR held every replica (ISR_WHOLE_TIMEOUT_S if it never did: then noted)."""
    began = time.monotonic()
    try:
        await cluster.wait_for(lambda: isrs_whole(cluster), ISR_WHOLE_TIMEOUT_S, "every ISR to be whole")
    except AssertionError:
        report.isrs_not_whole.append(f"{action}: {describe_partitions(cluster)}")
    return time.monotonic() - began


async def perform(cluster: LocalCluster, action: nemesis.Action, hit: FaultTarget) -> None:
    if action.op in QUORUM_ACTIONS:
        await perform_quorum_action(cluster, action, hit)
    elif action.op == nemesis.KILL_BROKER:
        await cluster.kill(action.broker)
    elif action.op == nemesis.START_BROKER:
        await cluster.restart(action.broker)
    elif action.op == nemesis.PAUSE_BROKER:
        cluster.brokers[action.broker].pause()
    elif action.op == nemesis.RESUME_BROKER:
        cluster.brokers[action.broker].resume()
    elif action.op == nemesis.CUT_NETWORK:
        cut = action.cut
        cluster.partition(action.broker, cut.peers, controller=cut.controller, clients=cut.clients, mode=cut.mode)
    elif action.op == nemesis.HEAL_NETWORK:
        cut = action.cut
        cluster.heal_partition(action.broker, cut.peers, controller=cut.controller, clients=cut.clients)
    elif action.op == nemesis.RESTART_CONTROLLER:
        await cluster.restart_controller()
    elif action.op == nemesis.STOP_CONTROLLER:
        hit.controller_id = await cluster.active_controller_id()
        await cluster.stop_controller(hit.controller_id)
    elif action.op == nemesis.START_CONTROLLER:
        await cluster.start_controller(hit.controller_id)
    else:
        raise ValueError(f"unknown nemesis action {action}")


def resume_all(cluster: LocalCluster) -> None:
    for broker in cluster.brokers.values():
        broker.resume()
    if cluster.quorum_processes is not None:
        for controller in cluster.quorum_processes.processes.values():
            controller.resume()


async def heal(cluster: LocalCluster, report: ChaosReport) -> None:
    """The schedule heals its own faults; this covers an action that failed half-way."""
    resume_all(cluster)
    cluster.heal_network()
    if cluster.quorum_processes is not None:
        for controller_id, controller in cluster.quorum_processes.processes.items():
            if not controller.running:
                try:
                    await cluster.start_controller(controller_id)
                except (RuntimeError, TimeoutError, OSError) as e:
                    report.nemesis_errors.append(f"heal: start controller {controller_id}: {e}")
    elif not cluster.controller_running:
        try:
            await cluster.start_controller()
        except OSError as e:
            report.nemesis_errors.append(f"heal: start the controller: {e}")
    for node_id, broker in cluster.brokers.items():
        if not broker.running:
            try:
                await cluster.restart(node_id)
            except (AssertionError, RuntimeError, TimeoutError) as e:
                report.nemesis_errors.append(f"heal: start broker {node_id}: {e}")


def main(*, duration: float, nemesis_faults: str | None, seed: int | None, data_dir: Path | None,
         controllers: int = 1, security: str = "plaintext") -> int:
    """The `replog chaos` command: run, print the report, exit 0 only if the run found nothing wrong.
    Without nemesis_faults: every fault, the quorum faults too with three controllers or more."""
    if controllers < 1:
        raise ValueError(f"--controllers must be at least 1 (got {controllers})")
    if nemesis_faults is None:
        faults = nemesis.FAULTS + (nemesis.QUORUM_FAULTS if controllers >= 3 else ())
    else:
        faults = nemesis.parse_faults(nemesis_faults)
    nemesis.check_quorum_faults(faults, controllers)
    if seed is None:
        seed = int.from_bytes(os.urandom(4), "big")  # printed with the report, so the run can be repeated
    root = data_dir or Path(tempfile.mkdtemp(prefix="replog-chaos-"))
    report = asyncio.run(run_chaos(root, duration=duration, faults=faults, seed=seed, controllers=controllers,
                                   security=security))
    return print_and_clean_up(report, root, keep=data_dir is not None)
