"""The benchmark runner (`python -m benchmarks`, `replog bench`): the order it runs the cases in and what it
leaves behind each one, which the cases after it are measured beside."""

import types

import pytest

from benchmarks import __main__ as runner
from benchmarks.harness import Result, Stats


def test_only_runs_the_named_benchmarks_in_the_complete_suites_order():
    assert runner.in_suite_order(["replicated-produce", "codec", "consume", "produce", "baselines"]) == [
        "codec", "baselines", "produce", "consume", "replicated-produce"]  # fmt: skip
    assert runner.in_suite_order(["consume", "consume"]) == ["consume"]
    assert runner.in_suite_order(list(runner.BENCHMARKS)) == list(runner.BENCHMARKS)


def fake_benchmark(name: str, run) -> types.SimpleNamespace:
    return types.SimpleNamespace(NAME=name, run=run)


def test_a_benchmarks_files_are_deleted_when_it_ends(tmp_path):
    seen = {}

    def write_logs(quick, workdir):
        seen["workdir"] = workdir
        (workdir / "logs").mkdir()
        (workdir / "logs" / "00000000000000000000.log").write_bytes(b"x" * 4096)
        return [Result("fake", "case", "B/s", Stats.of([1.0]), "itself", 1.0)]

    results = runner.run_case(fake_benchmark("fake", write_logs), False, tmp_path)
    assert [r.case for r in results] == ["case"]
    assert seen["workdir"] == tmp_path / "fake"
    assert not seen["workdir"].exists()
    assert list(tmp_path.iterdir()) == []


def test_a_benchmark_that_fails_still_leaves_no_files_for_the_next(tmp_path):
    def fail(quick, workdir):
        (workdir / "partial.log").write_bytes(b"x")
        raise RuntimeError("broker did not start")

    with pytest.raises(RuntimeError, match="broker did not start"):
        runner.run_case(fake_benchmark("fake", fail), True, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_the_next_benchmark_starts_without_its_predecessors_files(tmp_path, monkeypatch):
    """Through main(): the second case sees none of the first case's files, and --only given out of order
    still runs the cases in the suite's order."""
    order = []

    def first(quick, workdir):
        order.append(("codec", sorted(p.name for p in workdir.parent.iterdir())))
        (workdir / "big.log").write_bytes(b"x" * 4096)
        return []

    def second(quick, workdir):
        order.append(("produce", sorted(p.name for p in workdir.parent.iterdir())))
        return [Result("produce", "case", "B/s", Stats.of([1.0]), "itself", 1.0)]

    monkeypatch.setattr(runner, "BENCHMARKS", {"codec": fake_benchmark("codec", first),
                                               "produce": fake_benchmark("produce", second)})
    monkeypatch.chdir(tmp_path)
    assert runner.main(["--quick", "--only", "produce", "--only", "codec", "--results-dir",
                        str(tmp_path / "results")]) == 0
    assert order == [("codec", ["codec"]), ("produce", ["produce"])]
    assert not list(tmp_path.glob("replog-bench-*"))
