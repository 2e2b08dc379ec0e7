"""`python -m benchmarks [--quick] [--only NAME]`: run the benchmarks, print one table, write the JSON."""

import argparse
import importlib.metadata
import os
import platform
import shutil
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from . import (
    analyze,
    baselines,
    codec_kio_vs_handwritten,
    consume_catchup,
    consumer_groups,
    controller_failover,
    failover,
    follower_catchup,
    idle_neighbours,
    idle_partitions,
    log_cleaning,
    partition_request_cost,
    partition_scaling,
    peers,
    produce_throughput,
    reassignment,
    replicated_latency,
    replicated_produce,
    startup,
)
from .harness import RESULTS_DIR, Result, print_table, write_json
from .plots import draw_plots

BENCHMARKS = {
    m.NAME: m for m in (codec_kio_vs_handwritten, baselines, produce_throughput, consume_catchup,
                        replicated_produce, replicated_latency, follower_catchup, partition_scaling,
                        partition_request_cost, idle_neighbours, idle_partitions, failover,
                        controller_failover, startup, analyze, peers, log_cleaning, consumer_groups, reassignment)
}  # fmt: skip


def in_suite_order(names: list[str]) -> list[str]:
    """The benchmarks named, once each, in the order the complete suite runs them, whatever the order of the
    --only options: a subset then measures each case after the same predecessors as the complete run does
    (what ran before matters: see run_case)."""
    return [name for name in BENCHMARKS if name in names]


def run_case(benchmark, quick: bool, root: Path) -> list[Result]:
    """Run one benchmark in a directory of its own under `root`, and delete that directory when it ends.

    A case's files would otherwise stay until the whole run ends: ~3 GiB of logs from `produce` and 1 GiB from
    `consume`, holding page cache while the next cases are timed, whose writes then need the kernel to find
    memory for theirs. In the complete run the first round of `replicated-produce` went at less than half the
    speed of the later ones with 2-3x the brokers' CPU per GiB; on the shared VM, runs that wrote while free
    memory was short took up to twice the brokers' CPU per GiB for the same requests, the excess in kernel time
    (docs/profiles/rf3-throughput.md, "Session 12"). Deleting the files frees their pages between the cases,
    and the sync leaves the next case no dirty data of its predecessors to write back."""
    workdir = root / benchmark.NAME
    workdir.mkdir()
    try:
        return benchmark.run(quick, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        os.sync()


def machine_info() -> dict:
    """What the figures depend on: CPU, memory, kernel, Python and the packages on the data path."""
    cpu_model = next((line.split(":", 1)[1].strip() for line in _read("/proc/cpuinfo").splitlines()
                      if line.startswith("model name")), "unknown")
    mem_kib = next((int(line.split()[1]) for line in _read("/proc/meminfo").splitlines()
                    if line.startswith("MemTotal:")), 0)
    packages = {}
    for name in ("replog", "uvloop", "confluent-kafka", "kio", "pyspark"):
        try:
            packages[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            packages[name] = None
    return {"cpus": os.cpu_count(), "cpu_model": cpu_model, "memory_gib": round(mem_kib / (1 << 20), 1),
            "kernel": platform.release(), "python": sys.version.split()[0], "packages": packages}


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true",
                        help="smaller volumes and fewer repeats (default: off, the full suite)")
    parser.add_argument(
        "--only", choices=sorted(BENCHMARKS), action="append",
        help="run only this one; repeatable, run in the complete suite's order (default: all)")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR,
                        help=f"where the JSON and plots go (default: {RESULTS_DIR})")
    args = parser.parse_args(argv)
    names = in_suite_order(args.only or list(BENCHMARKS))
    results = []
    seconds_by_benchmark = {}
    started = time.monotonic()
    # Files go in the working directory, on the disk the broker would use, not a possible tmpfs /tmp.
    with tempfile.TemporaryDirectory(prefix="replog-bench-", dir=Path.cwd()) as tmp:
        # On stderr, so the table on stdout stays clean when redirected.
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=Console(stderr=True)) as progress:
            bar = progress.add_task("benchmarks", total=len(names))
            for name in names:
                progress.update(bar, description=f"running {name}")
                benchmark_started = time.monotonic()
                results += run_case(BENCHMARKS[name], args.quick, Path(tmp))
                seconds_by_benchmark[name] = round(time.monotonic() - benchmark_started, 1)
                progress.advance(bar)
    print_table(results)
    settings = {"quick": args.quick, "benchmarks": names, "seconds": round(time.monotonic() - started, 1),
                "seconds_by_benchmark": seconds_by_benchmark, "machine": machine_info()}  # fmt: skip
    path = write_json("quick" if args.quick else "full", results, settings, args.results_dir)
    print(f"\n{len(results)} results in {settings['seconds']} s; written to {path}")
    for plot in draw_plots([asdict(r) for r in results], path.with_suffix("")):
        print(f"plot: {plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
