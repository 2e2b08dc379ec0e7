"""What every benchmark shares: repeated timing, results with their baseline, the table and the JSON file."""

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from replog.demo import BrokerProcess

RESULTS_DIR = Path(__file__).resolve().parent.parent / "bench-results"
MiB = 1 << 20


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
    def ratio(self) -> float:
        return self.value.median / self.baseline_value


def format_value(value: float, unit: str) -> str:
    if unit == "B/s":
        return f"{value / 1e6:,.1f} MB/s"
    if unit == "us/op":
        return f"{value:,.1f} µs"
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
            f"{r.ratio:.3f}",
        )
        for r in results
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for i, row in enumerate(rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
        if i == 0:
            print("  ".join("-" * w for w in widths))


def write_json(name: str, results: list[Result], settings: dict) -> Path:
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"{name}-{time.strftime('%Y%m%dT%H%M%S')}.json"
    records = [asdict(r) | {"ratio": r.ratio} for r in results]
    path.write_text(json.dumps({"settings": settings, "results": records}, indent=2))
    return path


class BenchBroker(BrokerProcess):
    """BrokerProcess with extra `--override KEY=VALUE` settings (demo's helper has none)."""

    def __init__(self, log_dir: Path, overrides: dict[str, str], **kwargs):
        super().__init__(log_dir, **kwargs)
        self.overrides = overrides

    def start(self, timeout: float = 30.0) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "replog", "broker", "start"]
        settings = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.log_dir),
            "node.id": str(self.node_id),
        } | self.overrides
        for key, value in settings.items():
            command += ["--override", f"{key}={value}"]
        with open(self.output, "ab") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        self.wait_ready(timeout)
