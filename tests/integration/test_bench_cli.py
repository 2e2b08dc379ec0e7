"""`replog bench` end to end on its fastest benchmark: the table on stdout, a run file that `replog bench
compare` reads back."""

import json
import subprocess
import sys


def test_replog_bench_runs_a_benchmark_writes_its_run_file_and_compares_two_runs(tmp_path):
    command = [sys.executable, "-m", "replog", "bench", "--quick", "--only", "startup",
               "--results-dir", str(tmp_path)]
    first = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "single node, empty log dir" in first.stdout
    (run_file,) = tmp_path.glob("quick-*.json")
    run = json.loads(run_file.read_text())
    assert run["settings"]["benchmarks"] == ["startup"] and run["settings"]["machine"]["cpus"] >= 1
    assert set(run["settings"]["seconds_by_benchmark"]) == {"startup"}
    assert all(r["bench"] == "startup" and r["value"]["samples"] for r in run["results"])

    compared = subprocess.run([sys.executable, "-m", "replog", "bench", "compare", str(run_file), str(run_file)],
                              capture_output=True, text=True, timeout=60)
    assert compared.returncode == 0, compared.stderr
    assert compared.stdout.count("+0.0%") == len(run["results"])
