"""`replog bench --quick` as CI's smoke test of the benchmark suite: every benchmark runs end to end against
real brokers, peers and baselines, and leaves the table, the run file and the plots; `replog bench compare`
reads the run file back. How long the quick suite takes is printed by the run itself, not asserted here."""

import json
import os
import signal
import subprocess
import sys

import pytest

# Every benchmark but `analyze`, which is full mode only (see benchmarks/analyze.py).
QUICK_BENCHMARKS = {"codec", "baselines", "produce", "consume", "replicated-produce", "replicated-latency",
                    "follower-catchup", "partition-scaling", "failover", "controller-failover", "startup", "peers",
                    "log-cleaning", "groups", "reassignment", "idle-neighbours", "partition-request-cost",
                    "idle-partitions"}  # fmt: skip


def run_in_own_session(command: list[str], timeout_s: float) -> subprocess.CompletedProcess:
    """Run the command in a session of its own and, if it does not finish in time, kill the whole session:
    killing only `replog bench` would leave the brokers it started running."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)


# About 2 minutes on an idle 2-vCPU VM; a loaded CI machine may take several times that.
@pytest.mark.timeout(900)
def test_replog_bench_quick_runs_every_benchmark_writes_table_run_file_and_plots(tmp_path):
    command = [sys.executable, "-m", "replog", "bench", "--quick", "--results-dir", str(tmp_path)]
    first = run_in_own_session(command, timeout_s=840)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "analyze: full mode only" in first.stderr
    (run_file,) = tmp_path.glob("quick-*.json")
    run = json.loads(run_file.read_text())
    settings = run["settings"]
    assert settings["machine"]["cpus"] >= 1
    assert set(settings["seconds_by_benchmark"]) == QUICK_BENCHMARKS | {"analyze"}
    results = run["results"]
    assert {r["bench"] for r in results} == QUICK_BENCHMARKS
    assert all(r["value"]["samples"] and r["baseline_value"] > 0 and r["ratio"] > 0 for r in results)
    cases = {r["case"] for r in results}
    # The headline figures each sit against their same-run baseline, and both peers served.
    assert "os.sendfile of a cached file" in cases and "file append + fdatasync/16 MiB" in cases
    assert any(case.startswith("sendfile=false") for case in cases)
    assert any(case.startswith("Tansu") for case in cases) and any(case.startswith("NATS") for case in cases)
    assert {r["extra"]["partitions"] for r in results if r["bench"] == "partition-scaling"} == {1, 100}
    table = first.stdout.split("\n\n")[0].splitlines()  # the table ends at the first blank line
    assert table[0].split()[:2] == ["benchmark", "case"] and len(table) == 2 + len(results)
    assert all(row.split()[0] in QUICK_BENCHMARKS for row in table[2:])
    plots = {path.name for path in run_file.with_suffix("").glob("*.png")}
    assert plots == {"throughput-vs-partitions.png", "latency-vs-rate.png", "cpu-per-gib-by-system.png"}, plots

    compared = subprocess.run([sys.executable, "-m", "replog", "bench", "compare", str(run_file), str(run_file)],
                              capture_output=True, text=True, timeout=60)
    assert compared.returncode == 0, compared.stderr
    assert compared.stdout.count("+0.0%") == len(results)
