"""Analyze throughput: megabytes of metrics dumps per second through the whole `replog analyze` job, on one
core (local[1]) and on two (local[2]).

The dumps are synthetic (replog.analytics.synthetic, FULL_SCENARIO), written once into the
work directory. Each measurement is a fresh `python -m replog.analytics --metrics DUMPS --out OUT --master
local[N]` process timed from Popen to exit, so the JVM's start (several seconds) is in it, as it is for a
user: the "end to end" rows. The job's own progress lines also tell when Spark was ready and when the report
was written; the dump size over that span is the "after Spark started" rows, closer to what a much larger
input would see. Baseline, same run: `json.loads` of every line of the same files in this process (one
core, no analysis at all), in MB/s; the ratio says how far the analysis is from merely decoding the JSON
once. Each round measures the baseline and then every master, one after another, so that a slow patch of
this shared VM hits them alike; full mode runs FULL_ROUNDS (medians). Quick mode skips this benchmark: the JVM
start and Spark's fixed cost per table (half a minute even for a tiny input) would take a quarter of the
quick suite's two minutes, and `replog analyze` has its own end-to-end test (tests/integration/
test_analyze_cluster.py).
"""

import dataclasses
import json
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from replog.analytics.synthetic import generate
from replog.analytics.synthetic_scenario import Scenario

from .harness import Result, Stats

NAME = "analyze"
FULL_SCENARIO = Scenario(brokers=12, partitions=1200, seconds=300, restarts=2, stalls=2)  # ~420 MB
MASTERS = ("local[1]", "local[2]")
FULL_ROUNDS = 2
JOB_TIMEOUT_S = 600
PROGRESS_LINE = re.compile(r"^\[\s*(?P<seconds>[\d.]+) s\] (?P<step>.*)$")


def json_loads_rate(files: list[Path]) -> float:
    """Bytes per second decoding every line of the files with json.loads (partial lines fail and count)."""
    started = time.perf_counter()
    size = 0
    for path in files:
        with open(path, "rb") as f:
            for line in f:
                size += len(line)
                try:
                    json.loads(line)
                except ValueError:
                    pass
    return size / (time.perf_counter() - started)


def analyze_once(dumps: Path, out: Path, master: str) -> tuple[float, float]:
    """Seconds of one job from Popen to exit, and seconds from Spark being ready to the report written."""
    command = [
        sys.executable,
        "-m",
        "replog.analytics",
        "--metrics",
        str(dumps),
        "--out",
        str(out),
        "--master",
        master,
    ]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=JOB_TIMEOUT_S)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"analyze exited with {done.returncode}:\n{done.stderr[-3000:]}")
    steps = [match for line in done.stderr.splitlines() if (match := PROGRESS_LINE.match(line))]
    ready = next(float(step["seconds"]) for step in steps if step["step"].startswith("Spark "))
    return seconds, float(steps[-1]["seconds"]) - ready


def run(quick: bool, workdir: Path) -> list[Result]:
    if quick:
        print(f"{NAME}: full mode only (a Spark job's fixed cost would take a quarter of --quick)", file=sys.stderr)
        return []
    scenario, rounds = FULL_SCENARIO, FULL_ROUNDS
    dumps, out = workdir / "analyze-dumps", workdir / "analyze-out"
    baseline: list[float] = []
    end_to_end: dict[str, list[float]] = {master: [] for master in MASTERS}
    after_start: dict[str, list[float]] = {master: [] for master in MASTERS}
    try:
        started = time.perf_counter()
        files = generate(scenario, dumps)
        generate_s = time.perf_counter() - started
        size = sum(path.stat().st_size for path in files)
        for _ in range(rounds):
            baseline.append(json_loads_rate(files))
            for master in MASTERS:
                seconds, analysis_seconds = analyze_once(dumps, out, master)
                end_to_end[master].append(size / seconds)
                after_start[master].append(size / analysis_seconds)
    finally:
        shutil.rmtree(dumps, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)

    base = statistics.median(baseline)
    extra = {
        "dump_mb": round(size / 1e6, 1),
        "files": len(files),
        "scenario": dataclasses.asdict(scenario),
        "generate_s": round(generate_s, 1),
        "rounds": rounds,
    }
    results = []
    for master in MASTERS:
        results.append(
            Result(
                NAME,
                f"{master}, end to end",
                "B/s",
                Stats.of(end_to_end[master]),
                "json.loads, 1 process",
                base,
                extra,
            )
        )
        results.append(
            Result(
                NAME,
                f"{master}, after Spark started",
                "B/s",
                Stats.of(after_start[master]),
                "json.loads, 1 process",
                base,
                extra,
            )
        )
    return results
