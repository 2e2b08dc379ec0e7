"""`replog bench compare`: two runs' JSON files become one table of changes."""

import json

import pytest

from benchmarks.compare import compare_runs, load_results
from replog import cli


def run_file(tmp_path, name: str, cases: dict[str, tuple[float, float]]):
    results = [{"bench": "produce", "case": case, "unit": "MB/s", "value": {"median": median},
                "ratio": ratio} for case, (median, ratio) in cases.items()]
    path = tmp_path / name
    path.write_text(json.dumps({"settings": {}, "results": results}))
    return path


def test_compare_lists_each_case_with_its_change_and_ratios(tmp_path):
    before = run_file(tmp_path, "a.json", {"1 KiB": (200.0, 0.05), "100 B": (100.0, 0.02)})
    after = run_file(tmp_path, "b.json", {"1 KiB": (250.0, 0.06), "new case": (10.0, 1.0)})
    table = compare_runs(before, after).splitlines()
    assert table[0].split() == ["benchmark", "case", "unit", "before", "after", "change", "ratio", "before",
                                "ratio", "after"]
    assert table[2].split() == ["produce", "1", "KiB", "MB/s", "200.00", "250.00", "+25.0%", "0.050", "0.060"]
    assert table[3].split() == ["produce", "100", "B", "MB/s", "100.00", "-", "only", "before", "0.020", "-"]
    assert table[4].split() == ["produce", "new", "case", "MB/s", "-", "10.00", "only", "after", "-", "1.000"]


def test_a_file_that_is_not_a_run_is_refused_with_its_name(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"results": [{"case": "no bench"}]}')
    with pytest.raises(ValueError, match="x.json is not a benchmark results file"):
        load_results(bad)


def test_replog_bench_compare_prints_the_table_and_refuses_a_wrong_call(tmp_path, capsys):
    before = run_file(tmp_path, "a.json", {"1 KiB": (200.0, 0.05)})
    after = run_file(tmp_path, "b.json", {"1 KiB": (100.0, 0.025)})
    assert cli.main(["bench", "compare", str(before), str(after)]) == 0
    assert "-50.0%" in capsys.readouterr().out
    assert cli.main(["bench", "compare", str(before)]) == 1
    assert "usage: replog bench compare" in capsys.readouterr().err


def test_a_case_judged_against_two_baselines_keeps_a_row_for_each(tmp_path):
    results = [{"bench": "consume", "case": "sendfile=true, raw fetch driver", "unit": "B/s",
                "value": {"median": 500.0}, "ratio": ratio, "baseline": baseline}
               for baseline, ratio in (("raw sendfile", 0.5), ("read()+send()", 0.25))]
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"settings": {}, "results": results}))
    table = compare_runs(path, path)
    assert "sendfile=true, raw fetch driver (vs raw sendfile)" in table
    assert "sendfile=true, raw fetch driver (vs read()+send())" in table
    assert table.count("+0.0%") == 2
