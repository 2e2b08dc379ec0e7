"""PNG plots of one benchmark run: throughput and idle CPU against partitions, latency percentiles against
rate, and broker CPU-seconds per GiB by system. Each plot is drawn only when the run has its benchmark."""

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

LATENCY_PERCENTILES = ("p50", "p99", "p99.9")


def draw_plots(results: list[dict], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    drawn = [
        _partition_scaling(results, out_dir / "throughput-vs-partitions.png"),
        _latency_vs_rate(results, out_dir / "latency-vs-rate.png"),
        _cpu_per_gib(results, out_dir / "cpu-per-gib-by-system.png"),
    ]
    return [path for path in drawn if path is not None]


def _partition_scaling(results: list[dict], path: Path) -> Path | None:
    rows = [r for r in results if r["bench"] == "partition-scaling"]
    throughput = sorted((r["extra"]["partitions"], r["value"]["median"] / 1e6) for r in rows if r["unit"] == "B/s")
    idle = sorted((r["extra"]["partitions"], r["value"]["median"]) for r in rows if r["unit"] == "CPU-s/s")
    if not throughput:
        return None
    figure, left = plt.subplots(figsize=(7, 4))
    left.plot(*zip(*throughput, strict=True), marker="o")
    left.set_xscale("log")
    left.set_xlabel("partitions (RF=3, 3 brokers)")
    left.set_ylabel("MB/s")
    right = left.twinx()
    right.plot(*zip(*idle, strict=True), marker="s", color="tab:red")
    right.set_ylabel("idle CPU, fraction of a core")
    left.legend(left.get_lines() + right.get_lines(), ["acks=all produce, MB/s", "idle CPU per broker"],
                loc="center left")
    left.set_title("Throughput and idle cost against partitions")
    return _save(figure, path)


def _latency_vs_rate(results: list[dict], path: Path) -> Path | None:
    """One line per percentile and producer (its linger.ms and idempotence; runs from before those rows count
    as an idempotent producer at linger 5)."""
    by_producer: dict[tuple[int, bool], dict[float, dict]] = {}
    for r in results:
        if r["bench"] == "replicated-latency":
            extra = r["extra"]
            producer = (extra.get("linger_ms", 5), extra.get("idempotent", True))
            by_producer.setdefault(producer, {})[extra["target_bytes_per_s"]] = extra["overall_us"]
    if not by_producer:
        return None
    figure, axes = plt.subplots(figsize=(7, 4))
    for (linger_ms, idempotent), by_rate in sorted(by_producer.items(), reverse=True):
        rates = sorted(by_rate)
        label = f"linger {linger_ms} ms" + ("" if idempotent else ", not idempotent")
        for name in LATENCY_PERCENTILES:
            axes.plot([rate / 1e6 for rate in rates], [by_rate[rate][name] / 1000 for rate in rates], marker="o",
                      linestyle="-" if linger_ms else ("--" if idempotent else ":"), label=f"{name}, {label}")
    axes.set_xlabel("offered load, MB/s (RF=3, acks=all)")
    axes.set_ylabel("end-to-end latency, ms")
    axes.legend()
    axes.set_title("Latency percentiles against rate")
    return _save(figure, path)


def _cpu_per_gib(results: list[dict], path: Path) -> Path | None:
    """Each CPU-per-GiB figure beside its same-run baseline (replog's own, for a peer)."""
    rows = sorted((r for r in results if r["unit"] == "CPU-s/GiB"), key=lambda r: (r["bench"], r["case"]))
    if not rows:
        return None
    figure, axes = plt.subplots(figsize=(10, 1.5 + 1.1 * len(rows)))
    positions = range(len(rows))
    axes.barh([y + 0.2 for y in positions], [r["value"]["median"] for r in rows], height=0.4, label="measured")
    axes.barh([y - 0.2 for y in positions], [r["baseline_value"] for r in rows], height=0.4,
              label="its same-run baseline")
    # Case texts are long: wrapped, so the bars keep most of the width.
    axes.set_yticks(list(positions), [textwrap.fill(f"{r['case']} (baseline: {r['baseline']})", 50)
                                      for r in rows])
    axes.set_xlabel("broker CPU-seconds per GiB (summed over broker processes)")
    axes.set_title("CPU per GiB by system")
    axes.legend()
    return _save(figure, path)


def _save(figure, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
