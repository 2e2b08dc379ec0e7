"""Analyze throughput: megabytes of metrics dumps per second through the whole `replog analyze` job, on one
core (local[1]) and on two (local[2]), and the CPU time it takes.

The dumps are synthetic (replog.analytics.synthetic, FULL_SCENARIO, about 1 GB so that Spark's start does not
dominate), written once into the work directory. Each measurement is a fresh `python -m replog.analytics
--metrics DUMPS --out OUT --master local[N]` process. Its progress lines on stderr tell when Spark was ready
and when the report was written; the dump size over that span is the "after Spark started" rate, and the CPU
time the job's processes (Python and the JVM) used over it, per GiB of dumps, is the figure a loaded machine
does not distort. Spark's start (JVM, session) is reported on its own, and end to end (Popen to exit) is
what a user waits. Baseline, same run: `json.loads` of every line of the same files in this process (one
core, no analysis at all), in MB/s and CPU-s/GiB; the ratio says how far the analysis is from merely
decoding the JSON once. local[2] against local[1] says how the job scales with executors. Each round
measures the baseline and then every master, one after another, so that a slow patch of this shared VM hits
them alike; full mode runs FULL_ROUNDS (medians). Quick mode skips this benchmark: the JVM start and Spark's
fixed cost would take a quarter of the quick suite's two minutes, and `replog analyze` has its own
end-to-end test (tests/integration/test_analyze_cluster.py).
"""

import dataclasses
import json
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from replog.analytics.synthetic import generate
from replog.analytics.synthetic_scenario import Scenario

from .harness import GiB, Result, Stats, cpu_seconds

NAME = "analyze"
FULL_SCENARIO = Scenario(brokers=12, partitions=1200, seconds=720, restarts=2, stalls=2)  # ~1 GB
MASTERS = ("local[1]", "local[2]")
FULL_ROUNDS = 2
JOB_TIMEOUT_S = 900
PROGRESS_LINE = re.compile(r"^\[\s*(?P<seconds>[\d.]+) s\] (?P<step>.*)$")
BASELINE = "json.loads, 1 process"


@dataclass
class JobRun:
    """One `replog analyze` process: wall seconds end to end, until Spark was ready, and from then until the
    report was written, with the CPU seconds of the job's processes over that last span."""

    end_to_end_s: float
    startup_s: float
    analysis_s: float
    analysis_cpu_s: float


def json_loads_cost(files: list[Path]) -> tuple[float, float]:
    """Bytes per second and CPU seconds per GiB decoding every line of the files with json.loads (partial
    lines fail and count)."""
    started, started_cpu = time.perf_counter(), time.process_time()
    size = 0
    for path in files:
        with open(path, "rb") as f:
            for line in f:
                size += len(line)
                try:
                    json.loads(line)
                except ValueError:
                    pass
    return size / (time.perf_counter() - started), (time.process_time() - started_cpu) / size * GiB


def process_tree(pid: int) -> list[int]:
    """The process and its descendants (the JVM PySpark starts is a child of the job's Python)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile
            children.setdefault(parent, []).append(int(entry.name))
    tree, pending = [], [pid]
    while pending:
        tree.append(pending.pop())
        pending += children.get(tree[-1], [])
    return tree


def live_cpu_seconds(pids: list[int]) -> float:
    """CPU seconds of those of the processes still there: a short-lived child of the job may exit between
    listing the tree and reading its /proc files."""
    total = 0.0
    for pid in pids:
        try:
            total += cpu_seconds([pid])
        except FileNotFoundError:
            pass
    return total


def analyze_once(dumps: Path, out: Path, master: str) -> JobRun:
    """Run one job, reading its progress lines as they come to take the CPU time at Spark's start and at
    the report."""
    command = [sys.executable, "-m", "replog.analytics", "--metrics", str(dumps), "--out", str(out)]
    started = time.perf_counter()
    job = subprocess.Popen(
        [*command, "--master", master], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    seen: list[tuple[str, float, float]] = []  # step, seconds since Popen, CPU seconds of the job so far
    stderr_tail: list[str] = []
    assert job.stderr is not None
    for line in job.stderr:
        stderr_tail = [*stderr_tail[-50:], line]
        if match := PROGRESS_LINE.match(line.rstrip("\n")):
            seen.append((match["step"], time.perf_counter() - started, live_cpu_seconds(process_tree(job.pid))))
    code = job.wait(timeout=JOB_TIMEOUT_S)
    end_to_end_s = time.perf_counter() - started
    if code != 0 or not seen or not seen[-1][0].startswith("report:"):
        raise RuntimeError(f"analyze exited with {code}:\n{''.join(stderr_tail)}")
    ready_at, ready_cpu = next((at, cpu) for step, at, cpu in seen if step.startswith("Spark "))
    _, report_at, report_cpu = seen[-1]
    return JobRun(end_to_end_s, ready_at, report_at - ready_at, report_cpu - ready_cpu)


def run(quick: bool, workdir: Path) -> list[Result]:
    if quick:
        print(
            f"{NAME}: full mode only (a Spark job's fixed cost would take a quarter of --quick)",
            file=sys.stderr,
        )
        return []
    scenario, rounds = FULL_SCENARIO, FULL_ROUNDS
    dumps, out = workdir / "analyze-dumps", workdir / "analyze-out"
    baseline_rates: list[float] = []
    baseline_cpu: list[float] = []
    runs: dict[str, list[JobRun]] = {master: [] for master in MASTERS}
    try:
        started = time.perf_counter()
        files = generate(scenario, dumps)
        generate_s = time.perf_counter() - started
        size = sum(path.stat().st_size for path in files)
        for _ in range(rounds):
            rate, cpu_per_gib = json_loads_cost(files)
            baseline_rates.append(rate)
            baseline_cpu.append(cpu_per_gib)
            for master in MASTERS:
                runs[master].append(analyze_once(dumps, out, master))
    finally:
        shutil.rmtree(dumps, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)

    base_rate, base_cpu = statistics.median(baseline_rates), statistics.median(baseline_cpu)
    extra = {
        "dump_mb": round(size / 1e6, 1),
        "files": len(files),
        "scenario": dataclasses.asdict(scenario),
        "generate_s": round(generate_s, 1),
        "rounds": rounds,
    }
    results = []
    for master in MASTERS:
        of_master = runs[master]
        results += [
            Result(
                NAME,
                f"{master}, end to end",
                "B/s",
                rates(size, of_master, "end_to_end_s"),
                BASELINE,
                base_rate,
                extra,
            ),
            Result(
                NAME,
                f"{master}, after Spark started",
                "B/s",
                rates(size, of_master, "analysis_s"),
                BASELINE,
                base_rate,
                extra,
            ),
            Result(
                NAME,
                f"{master}, after Spark started: CPU",
                "CPU-s/GiB",
                Stats.of([run.analysis_cpu_s / size * GiB for run in of_master]),
                BASELINE,
                base_cpu,
                extra,
            ),
        ]
    one, two = (rates(size, runs[master], "analysis_s") for master in MASTERS)
    results.append(
        Result(
            NAME, "local[2] against local[1], after Spark started", "B/s", two, "local[1]", one.median, extra
        )
    )
    startup = Stats.of([run.startup_s * 1e6 for run in runs["local[2]"]])
    analysis = statistics.median(run.analysis_s * 1e6 for run in runs["local[2]"])
    results.append(
        Result(NAME, "Spark start-up, local[2]", "us", startup, "the analysis after it", analysis, extra)
    )
    return results


def rates(size: int, runs: list[JobRun], seconds: str) -> Stats:
    return Stats.of([size / getattr(run, seconds) for run in runs])
