"""What every benchmark shares: repeated timing, results with their baseline, the table and the JSON file."""

import json
import os
import shutil
import statistics
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from replog.harness.local_cluster import LocalCluster

RESULTS_DIR = Path("bench-results")  # in the working directory: the benchmarks may be installed
MiB = 1 << 20
GiB = 1 << 30

# LocalCluster's defaults shorten lag and back-off so tests see ISR changes quickly; the benchmarks measure
# the brokers as they ship, so these put Kafka's (and BrokerConfig's) defaults back.
KAFKA_REPLICATION_DEFAULTS = {
    "replica.lag.time.max.ms": "30000",
    "replica.fetch.backoff.ms": "1000",
    "replica.fetch.wait.max.ms": "500",
    "replica.high.watermark.checkpoint.interval.ms": "5000",
    "broker.heartbeat.interval.ms": "2000",
}
KAFKA_SESSION_TIMEOUT_MS = 9_000  # broker.session.timeout.ms
# Quick mode (CI's smoke test, whose figures are not quoted) halves the session timeout and the heartbeat
# interval with it (Kafka's 2 s of 9 s), so the benchmarks that wait for a killed broker to be fenced wait
# 4.5 s, not 9.
QUICK_SESSION_TIMEOUT_MS = KAFKA_SESSION_TIMEOUT_MS // 2


def session_timeout_ms(quick: bool) -> int:
    return QUICK_SESSION_TIMEOUT_MS if quick else KAFKA_SESSION_TIMEOUT_MS


def heartbeat_overrides(session_timeout: int) -> dict[str, str]:
    """broker.heartbeat.interval.ms in Kafka's proportion to the session timeout (2 s of 9 s)."""
    return {"broker.heartbeat.interval.ms": str(session_timeout * 2 // 9)}


@dataclass
class Stats:
    """Median and spread of repeated samples (lower-is-better for times, higher-is-better for rates)."""

    median: float
    low: float
    high: float
    samples: list[float]

    @classmethod
    def of(cls, samples: list[float]) -> "Stats":
        return cls(statistics.median(samples), min(samples), max(samples), samples)


def repeat(measure: Callable[[], float], *, warmup: int, repeats: int) -> Stats:
    """Call `measure` warmup times discarding the value, then `repeats` times keeping it."""
    for _ in range(warmup):
        measure()
    return Stats.of([measure() for _ in range(repeats)])


def rate(work: Callable[[], int]) -> float:
    """Run `work`, which returns how many units it handled, and return units per second."""
    started = time.perf_counter()
    units = work()
    return units / (time.perf_counter() - started)


@dataclass
class Result:
    """One headline figure and the same-run baseline it is judged against."""

    bench: str
    case: str
    unit: str
    value: Stats
    baseline: str
    baseline_value: float
    extra: dict = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        """None when the baseline measured zero (e.g. CPU too small for the clock's ticks): the run's other
        figures are still reported and saved."""
        return self.value.median / self.baseline_value if self.baseline_value else None


def percentile(ordered: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list (fraction 0.999 is p99.9)."""
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def format_value(value: float, unit: str) -> str:
    if unit == "B/s":
        return f"{value / 1e6:,.1f} MB/s"
    if unit == "us/op":
        return f"{value:,.1f} µs"
    if unit == "us":
        return f"{value / 1000:,.2f} ms" if value >= 1000 else f"{value:,.1f} µs"
    if unit in ("CPU-s/GiB", "CPU-s/s"):
        return f"{value:,.2f} {unit}"
    return f"{value:,.0f} {unit}"


def print_table(results: list[Result]) -> None:
    header = ("benchmark", "case", "median", "min-max", "baseline", "ratio")
    rows = [header] + [
        (
            r.bench,
            r.case,
            format_value(r.value.median, r.unit),
            f"{format_value(r.value.low, r.unit)} - {format_value(r.value.high, r.unit)}",
            f"{r.baseline} = {format_value(r.baseline_value, r.unit)}",
            "n/a" if r.ratio is None else f"{r.ratio:.3f}",
        )
        for r in results
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for i, row in enumerate(rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
        if i == 0:
            print("  ".join("-" * w for w in widths))


def write_json(name: str, results: list[Result], settings: dict, results_dir: Path = RESULTS_DIR) -> Path:
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / f"{name}-{time.strftime('%Y%m%dT%H%M%S')}.json"
    records = [asdict(r) | {"ratio": r.ratio} for r in results]
    path.write_text(json.dumps({"settings": settings, "results": records}, indent=2))
    return path


@asynccontextmanager
async def replicated_cluster(root: Path, overrides: dict[str, str] | None = None,
                             controller_options: dict | None = None) -> AsyncIterator[LocalCluster]:
    """Three broker processes with Kafka's replication defaults (and `overrides`) and a controller in this event
    loop (`controller_options`: more ControllerConfig fields)."""
    # The options go to the controller's constructor: changing cluster.controller_config afterwards would not
    # reach the controller already built (the 10,000-partition round ran with the default 30 s timeouts).
    cluster = LocalCluster(root, brokers=3, overrides=KAFKA_REPLICATION_DEFAULTS | (overrides or {}),
                           session_timeout_ms=KAFKA_SESSION_TIMEOUT_MS, controller_options=controller_options)
    try:
        await cluster.start()
        yield cluster
    finally:
        await cluster.stop()
        # Nothing reads the logs afterwards, and deleting them frees their page cache for the next cluster.
        shutil.rmtree(root, ignore_errors=True)


def thread_cpu_seconds(pids: Iterable[int]) -> float:
    """CPU time the processes' live threads have run so far, in nanoseconds from /proc/<pid>/task/*/schedstat:
    fine enough for an idle broker, which uses less than one 10 ms clock tick over a short window (utime and
    stime would read 0). Threads that already exited are not counted, so busy measurements use cpu_seconds."""
    total_ns = 0
    for pid in pids:
        for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
            try:
                total_ns += int(stat.read_text().split()[0])
            except FileNotFoundError:
                pass  # the thread exited between the listing and the read
    return total_ns / 1e9


def cpu_seconds(pids: Iterable[int]) -> float:
    """User plus system CPU time the processes have used so far (utime + stime of /proc/<pid>/stat)."""
    total_ticks = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            # Split after the command name, which is in parentheses and may contain spaces: utime and
            # stime, fields 14 and 15 of the line, are then at indexes 11 and 12.
            fields = f.read().rpartition(")")[2].split()
        total_ticks += int(fields[11]) + int(fields[12])
    return total_ticks / os.sysconf("SC_CLK_TCK")
