"""`replog bench table RUN.json`: one run as the Markdown table docs/benchmarks.md shows."""

import json

import pytest

from benchmarks.markdown_table import markdown_table
from replog import cli

RUN = {
    "settings": {"quick": False, "benchmarks": ["baselines", "failover"], "seconds": 812.4,
                 "machine": {"cpus": 2, "cpu_model": "AMD EPYC", "memory_gib": 23.5, "kernel": "6.18",
                             "python": "3.11.7"}},
    "results": [
        {"bench": "baselines", "case": "os.sendfile of a cached file", "unit": "B/s",
         "value": {"median": 2.1e9, "low": 1.9e9, "high": 2.2e9}, "baseline": "read()+send()",
         "baseline_value": 2.4e9, "ratio": 0.875},
        {"bench": "failover", "case": "SIGTERM: moved + applied", "unit": "us",
         "value": {"median": 2.6e6, "low": 2.6e6, "high": 2.6e6}, "baseline": "ApiVersions RTT",
         "baseline_value": 200.0, "ratio": 13000.0},
    ],
}  # fmt: skip


def test_table_has_a_row_per_result_with_spread_baseline_and_ratio_then_how_the_run_was_made(tmp_path):
    path = tmp_path / "full.json"
    path.write_text(json.dumps(RUN))
    lines = markdown_table(path).splitlines()
    assert lines[0] == "| benchmark | case | median (min-max) | same-run baseline | ratio |"
    assert lines[2] == ("| baselines | os.sendfile of a cached file | 2,100.0 MB/s (1,900.0 MB/s - 2,200.0 MB/s) | "
                        "read()+send() = 2,400.0 MB/s | 0.875 |")
    # One sample (or all equal): no spread to show.
    assert lines[3] == "| failover | SIGTERM: moved + applied | 2,600.00 ms | ApiVersions RTT = 200.0 µs | 1.3e+04 |"
    assert lines[5] == ("Full run of baselines, failover in 812.4 s on 2 x AMD EPYC, 23.5 GiB, Linux 6.18, "
                        "Python 3.11.7.")


def test_replog_bench_table_prints_it_and_refuses_a_file_that_is_not_a_run(tmp_path, capsys):
    path = tmp_path / "full.json"
    path.write_text(json.dumps(RUN))
    assert cli.main(["bench", "table", str(path)]) == 0
    assert "| failover | SIGTERM: moved + applied |" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert cli.main(["bench", "table", str(bad)]) == 1
    assert "bad.json is not a benchmark results file" in capsys.readouterr().err


@pytest.mark.parametrize("words", [["table"], ["table", "a.json", "b.json"], ["tabel", "a.json"]])
def test_a_wrong_bench_report_call_says_the_usage(words, capsys):
    assert cli.main(["bench", *words]) == 1
    assert "usage: replog bench compare BEFORE.json AFTER.json | replog bench table RUN.json" in capsys.readouterr().err


def test_a_result_whose_baseline_measured_zero_is_printed_saved_and_tabled_without_a_ratio(tmp_path, capsys):
    from benchmarks.harness import Result, Stats, print_table, write_json

    result = Result("idle", "broker CPU, dumps on", "CPU-s/s", Stats.of([0.01]), "dumps off", 0.0)
    assert result.ratio is None
    print_table([result])
    assert capsys.readouterr().out.splitlines()[-1].split()[-1] == "n/a"
    path = write_json("quick", [result], {"quick": True}, tmp_path)
    assert json.loads(path.read_text())["results"][0]["ratio"] is None
    assert markdown_table(path).count("| n/a |") == 1
