"""Benchmark plots: one PNG per figure the run has data for, none for the others."""

from benchmarks.plots import draw_plots

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def result(bench: str, case: str, unit: str, median: float, extra: dict, baseline="b", baseline_value=1.0):
    return {"bench": bench, "case": case, "unit": unit, "value": {"median": median}, "baseline": baseline,
            "baseline_value": baseline_value, "extra": extra}


def test_each_plot_is_drawn_from_its_benchmarks_results(tmp_path):
    results = [
        result("partition-scaling", f"RF=3, {n} partitions", "B/s", 1e8 / n, {"partitions": n}) for n in (1, 100)
    ] + [
        result("partition-scaling", f"idle, {n} partitions", "CPU-s/s", 0.01 * n, {"partitions": n}) for n in (1, 100)
    ] + [
        result("replicated-latency", f"{rate} MB/s, p50", "us", 5000,
               {"target_bytes_per_s": rate * 1e6, "overall_us": {"p50": 5000, "p99": 9000, "p99.9": 12000}})
        for rate in (10, 50)
    ] + [
        result("replicated-latency", f"{rate} MB/s, linger 0 ms, not idempotent, p50", "us", 2000,
               {"target_bytes_per_s": rate * 1e6, "linger_ms": 0, "idempotent": False,
                "overall_us": {"p50": 2000, "p99": 4000, "p99.9": 6000}})
        for rate in (10, 50)
    ] + [result("replicated-produce", "RF=3 broker CPU", "CPU-s/GiB", 5.8, {}, "RF=1", 3.6)]
    drawn = draw_plots(results, tmp_path / "plots")
    assert [p.name for p in drawn] == ["throughput-vs-partitions.png", "latency-vs-rate.png",
                                       "cpu-per-gib-by-system.png"]
    assert all(p.read_bytes().startswith(PNG_MAGIC) for p in drawn)


def test_a_run_without_those_benchmarks_draws_nothing(tmp_path):
    assert draw_plots([result("startup", "empty", "us", 400_000, {})], tmp_path / "plots") == []
