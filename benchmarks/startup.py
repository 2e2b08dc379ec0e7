"""Broker start-up: from Popen of `python -m replog broker start` to the first answered ApiVersions.

A single node (no controller) is started and its ready file, which the broker writes once it serves (after
loading every log), polled every POLL_INTERVAL_S; then one ApiVersions v0 request must be answered
(replog.harness.probes.answers_api_versions). Two cases:
- an empty log directory, new for every start;
- a log directory holding PARTITIONS partitions (QUICK_PARTITIONS in quick mode; one topic, created with
  `replog topics create`, a few records in each) that the broker left with a clean shutdown (SIGTERM, so no
  log recovery on the way up); between starts the broker is stopped the same way, and that stop is not
  timed.
Baselines, measured in the same run the same way (Popen until exit): `python -c pass`, the interpreter's
own start, which the ratios are against; and `python -c "import os, replog.broker.server; os._exit(0)"`,
the cost of importing the broker's code (without the interpreter's teardown, which a starting broker does
not pay), reported as a row of its own against the same baseline. Both import the way a replog process does
(replog/process_startup.py: no cyclic collector while modules load, and hypothesis, which kio would import in
the development environment, kept out). `replog broker start` imports replog.cli too, and the client library.

Every child process gets a bytecode cache of its own (PYTHONPYCACHEPREFIX in the work directory, and
PYTHONDONTWRITEBYTECODE unset), as an installed broker has __pycache__ directories: without one, which is
how the sandbox this was written in runs (PYTHONDONTWRITEBYTECODE=1), every start compiles replog's
sources; in full mode `extra` has the empty-directory start in the caller's own environment for comparison.

Each round measures everything once, one after another, so that a slow patch of this shared VM hits them
alike; the first round is a discarded warm-up (the set-up has already filled the bytecode cache; it brings
the rest of what the processes read into the page cache). Medians over the rounds.
"""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import confluent_kafka

from replog.harness.broker_process import BrokerProcess
from replog.harness.probes import answers_api_versions
from replog.harness.processes import HOST

from .harness import Result, Stats

NAME = "startup"
TOPIC = "startup"
PARTITIONS = 1000
QUICK_PARTITIONS = 100  # creating 1,000 takes ~10 s on this VM (fsyncs per partition), stopping ~5 s more
RECORDS_PER_PARTITION = 10
VALUE_BYTES = 1024
POLL_INTERVAL_S = 0.005
# Imported, then out without the interpreter's teardown (~90 ms here after ~430 modules), which a broker
# that has just started does not pay either.
IMPORT_BROKER = ("import os, replog.process_startup as s; s.begin_quiet_start(); import replog.broker.server; "
                 "os._exit(0)")
READY_TIMEOUT_S = 120.0
SETUP_TIMEOUT_S = 120.0


def child_environment(pycache: Path) -> dict[str, str]:
    """This environment, but compiled modules are written to and read from `pycache`."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return env | {"PYTHONPYCACHEPREFIX": str(pycache)}


class TimedBroker(BrokerProcess):
    """A single-node BrokerProcess whose start() polls every POLL_INTERVAL_S and returns the seconds from
    Popen to the first answered ApiVersions."""

    def start(self, timeout: float = READY_TIMEOUT_S) -> float:
        started = time.perf_counter()
        self.launch()
        self.wait_ready(timeout, POLL_INTERVAL_S)
        if not answers_api_versions(HOST, self.port):
            raise RuntimeError(f"broker wrote its ready file but does not answer:\n{self.output_tail()}")
        return time.perf_counter() - started

    def stop_cleanly(self) -> float:
        """SIGTERM and wait; returns the seconds it took. A broker that does not exit cleanly fails the run:
        the next start would recover its logs instead of loading them."""
        started = time.perf_counter()
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(READY_TIMEOUT_S)
        if code != 0:
            raise RuntimeError(f"broker exited with {code} on SIGTERM:\n{self.output_tail()}")
        return time.perf_counter() - started


def process_seconds(env: dict[str, str], *args: str) -> float:
    """Seconds from Popen of `python args...` until it exits."""
    started = time.perf_counter()
    subprocess.run([sys.executable, *args], check=True, env=env)
    return time.perf_counter() - started


def empty_start(root: Path, env: dict[str, str]) -> float:
    shutil.rmtree(root, ignore_errors=True)
    broker = TimedBroker(root / "data", env=env, output=root / "broker.out")
    try:
        return broker.start()
    finally:
        broker.stop()


def fill(broker: TimedBroker, partitions: int) -> None:
    """`partitions` partitions of one topic with RECORDS_PER_PARTITION records each, through the CLI and a
    client, as an operator would."""
    command = [sys.executable, "-m", "replog", "topics", "create", "--bootstrap-server", broker.bootstrap,
               "--topic", TOPIC, "--partitions", str(partitions)]  # fmt: skip
    subprocess.run(command, check=True, timeout=SETUP_TIMEOUT_S, stdout=subprocess.DEVNULL, env=broker.env)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5}
    )
    value = bytes(VALUE_BYTES)
    for partition in range(partitions):
        for _ in range(RECORDS_PER_PARTITION):
            producer.produce(TOPIC, value, partition=partition)
    if remaining := producer.flush(SETUP_TIMEOUT_S):
        raise RuntimeError(f"confluent-kafka: {remaining} records undelivered")


def run(quick: bool, workdir: Path) -> list[Result]:
    partitions, repeats = (QUICK_PARTITIONS, 1) if quick else (PARTITIONS, 10)
    root = workdir / "startup-loaded"
    env = child_environment(workdir / "startup-pycache")
    broker = TimedBroker(root / "data", env=env, output=root / "broker.out")
    stops: list[float] = []

    def restart() -> float:
        seconds = broker.start()
        stops.append(broker.stop_cleanly())
        return seconds

    measures = {
        "interpreter": lambda: process_seconds(env, "-c", "pass"),
        "import": lambda: process_seconds(env, "-c", IMPORT_BROKER),
        "empty": lambda: empty_start(workdir / "startup-empty", env),
        "loaded": restart,
    }
    if not quick:  # the same as "empty" in the environment this runs in (PYTHONDONTWRITEBYTECODE=1 here)
        measures["empty_caller_env"] = lambda: empty_start(workdir / "startup-empty", dict(os.environ))
    samples: dict[str, list[float]] = {name: [] for name in measures}
    try:
        broker.start()
        fill(broker, partitions)
        stops.append(broker.stop_cleanly())
        # One of each measure after another, so that a slow patch of this shared VM hits them alike; the
        # first round is the warm-up.
        for round_ in range(1 + repeats):
            for name, measure in measures.items():
                seconds = measure()
                if round_:
                    samples[name].append(seconds * 1e6)
    finally:
        broker.stop()
        for directory in ("startup-loaded", "startup-empty", "startup-pycache"):
            shutil.rmtree(workdir / directory, ignore_errors=True)

    stats = {name: Stats.of(values) for name, values in samples.items()}
    base = stats["interpreter"].median
    extra = {
        "poll_interval_ms": POLL_INTERVAL_S * 1000,
        "repeats": repeats,
        "interpreter_ms": base / 1000,
        "import_broker_ms": stats["import"].median / 1000,
        "empty_start_in_caller_env_ms": stats["empty_caller_env"].median / 1000 if not quick else None,
        "caller_PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE"),
    }
    loaded_extra = extra | {
        "partitions": partitions,
        "records_per_partition": RECORDS_PER_PARTITION,
        "value_bytes": VALUE_BYTES,
        "clean_stop_s (the first after filling)": [round(s, 3) for s in stops],
    }
    return [
        Result(NAME, "import replog.broker.server", "us", stats["import"], "python -c pass", base, extra),
        Result(NAME, "single node, empty log dir", "us", stats["empty"], "python -c pass", base, extra),
        Result(
            NAME,
            f"single node, {partitions:,} partitions, clean restart",
            "us",
            stats["loaded"],
            "python -c pass",
            base,
            loaded_extra,
        ),  # fmt: skip
    ]
