"""PNG plots of the analysis tables, drawn with matplotlib's Agg renderer (Figure objects, no pyplot state).

Every plot is drawn even without data (it then says so), so an analysis always has the same files."""

from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
from matplotlib.figure import Figure

MAX_SERIES = 10  # lines per chart before the rest are left out (the tables have them all)
MAX_GANTT_ROWS = 40
CHANGE_COLOURS = {
    "shrink": "tab:red",
    "expand": "tab:green",
    "shrink_and_expand": "tab:purple",
    "new_leadership": "tab:blue",
    "unchanged": "tab:gray",
}


def when(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _time_axis(ax: Axes) -> None:
    locator = AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))


def _no_data(ax: Axes) -> None:
    ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", color="gray")


def _save(figure: Figure, path: Path, time_axis: bool = True) -> Path:
    if time_axis:
        figure.supxlabel("time (UTC)")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    return path


def _top_series(
    rows: list[dict], key: str, value: str, score: Callable[[list[float]], float]
) -> dict[object, list[dict]]:
    """The rows grouped by `key`, only the MAX_SERIES groups whose `value`s score highest."""
    groups: dict[object, list[dict]] = defaultdict(list)
    for row in rows:
        groups[row[key]].append(row)
    top = sorted(groups, key=lambda k: -score([row[value] or 0 for row in groups[k]]))[:MAX_SERIES]
    return {k: groups[k] for k in sorted(top)}


def _spread(values: list[float]) -> float:
    return max(values) - min(values)


def lag_percentiles(lag_by_window: list[dict], path: Path) -> Path:
    figure = Figure(figsize=(10, 9))
    axes = figure.subplots(3, 1, sharex=True)
    for ax, (metric, unit) in zip(
        axes, (("lag_messages", "messages"), ("lag_bytes", "bytes"), ("lag_ms", "ms")), strict=True
    ):
        ax.set_title(f"follower lag ({unit}) per window")
        if not lag_by_window:
            _no_data(ax)
            continue
        times = [when(row["window_start_ms"]) for row in lag_by_window]
        for stat in ("p50", "p95", "p99", "max"):
            ax.plot(times, [row[f"{metric}_{stat}"] for row in lag_by_window], label=stat)
        ax.set_ylabel(unit)
        ax.legend(loc="upper right")
        _time_axis(ax)
    return _save(figure, path)


def under_replicated_gantt(intervals: list[dict], path: Path) -> Path:
    """One row per partition (the MAX_GANTT_ROWS longest under-replicated), a bar per interval; hatched bars
    are still open at the end of the data."""
    totals: dict[tuple, int] = defaultdict(int)
    for row in intervals:
        if row["condition"] == "under_replicated":
            totals[(row["topic"], row["partition"])] += row["duration_ms"]
    shown = sorted(totals, key=lambda k: (-totals[k], k))[:MAX_GANTT_ROWS]
    figure = Figure(figsize=(10, max(3, 0.3 * len(shown) + 1.5)))
    ax = figure.subplots()
    ax.set_title(
        f"under-replicated (orange) and under min ISR (red): {len(shown)} of {len(totals)} partitions"
    )
    if not shown:
        _no_data(ax)
        return _save(figure, path)
    position = {partition: i for i, partition in enumerate(shown)}
    for row in intervals:
        y = position.get((row["topic"], row["partition"]))
        if y is None:
            continue
        under_min = row["condition"] == "under_min_isr"
        width = max(row["duration_ms"], 1) / 86_400_000  # matplotlib's dates are in days
        ax.barh(
            y,
            width,
            left=when(row["start_ms"]),
            height=0.35 if under_min else 0.7,
            color="tab:red" if under_min else "tab:orange",
            hatch="//" if row["open"] else None,
            zorder=3 if under_min else 2,
        )
    ax.set_yticks(range(len(shown)), [f"{topic}-{partition}" for topic, partition in shown])
    ax.invert_yaxis()
    _time_axis(ax)
    return _save(figure, path)


def throughput(by_topic: list[dict], by_broker: list[dict], path: Path) -> Path:
    figure = Figure(figsize=(10, 10))
    axes = figure.subplots(3, 1, sharex=True)
    charts = (
        (axes[0], by_topic, "topic", "produce_mb_per_s", "produce MB/s per topic"),
        (axes[1], by_broker, "broker_id", "produce_mb_per_s", "produce MB/s per leader broker"),
        (axes[2], by_broker, "broker_id", "replication_mb_per_s", "replication MB/s per follower broker"),
    )
    for ax, rows, key, value, title in charts:
        ax.set_title(title)
        if not rows:
            _no_data(ax)
            continue
        for name, series in _top_series(rows, key, value, sum).items():
            ax.plot(
                [when(row["window_start_ms"]) for row in series],
                [row[value] for row in series],
                label=str(name),
            )
        ax.set_ylabel("MB/s")
        ax.legend(loc="upper right", fontsize="small", ncol=2)
        _time_axis(ax)
    return _save(figure, path)


def isr_events(timeline: list[dict], window_ms: int, path: Path) -> Path:
    """ISR changes per window, stacked by kind."""
    counts: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for row in timeline:
        counts[row["change"]][row["ts_ms"] - row["ts_ms"] % window_ms] += 1
    figure = Figure(figsize=(10, 4))
    ax = figure.subplots()
    ax.set_title("ISR changes per window")
    if not timeline:
        _no_data(ax)
        return _save(figure, path)
    windows = sorted({w for per_window in counts.values() for w in per_window})
    bottom = [0] * len(windows)
    width = window_ms / 86_400_000 * 0.9
    for change, per_window in sorted(counts.items()):
        heights = [per_window.get(w, 0) for w in windows]
        ax.bar(
            [when(w) for w in windows],
            heights,
            width=width,
            bottom=bottom,
            align="edge",
            color=CHANGE_COLOURS[change],
            label=change,
        )
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    ax.set_ylabel("changes")
    ax.legend(loc="upper right")
    _time_axis(ax)
    return _save(figure, path)


def leader_balance(counts: list[dict], imbalance: list[dict], path: Path) -> Path:
    figure = Figure(figsize=(10, 7))
    top, bottom = figure.subplots(2, 1, sharex=True)
    top.set_title("leaders per broker")
    bottom.set_title("leader imbalance (max / mean over the brokers reporting)")
    if not counts:
        _no_data(top)
        _no_data(bottom)
        return _save(figure, path)
    times = [when(row["window_start_ms"]) for row in imbalance]
    top.fill_between(
        times,
        [row["min_leaders"] for row in imbalance],
        [row["max_leaders"] for row in imbalance],
        color="lightgray",
        label="min-max",
    )
    # The brokers whose leader count moved most are the story; the band shows the rest.
    for broker, series in _top_series(counts, "broker_id", "leader_count", _spread).items():
        top.plot(
            [when(row["window_start_ms"]) for row in series],
            [row["leader_count"] for row in series],
            label=str(broker),
        )
    top.legend(loc="upper right", fontsize="small", ncol=3)
    bottom.plot(times, [row["imbalance"] for row in imbalance])
    bottom.axhline(1.0, color="gray", linestyle=":")
    for ax in (top, bottom):
        _time_axis(ax)
    return _save(figure, path)


def catch_up(by_start: list[dict], by_partition: list[dict], path: Path) -> Path:
    figure = Figure(figsize=(10, 7))
    top, bottom = figure.subplots(2, 1)
    top.set_title("time until every followed partition is back in the ISR, per broker start")
    bottom.set_title("catch-up time per partition")
    if not by_start:
        _no_data(top)
    else:
        labels = [f"broker {row['broker_id']} at {when(row['start_ms']):%H:%M:%S}" for row in by_start]
        seconds = [(row["all_caught_up_ms"] or 0) / 1000 for row in by_start]
        colours = ["tab:blue" if row["all_caught_up_ms"] is not None else "tab:red" for row in by_start]
        top.barh(range(len(by_start)), seconds, color=colours)
        top.set_yticks(range(len(by_start)), labels)
        top.set_xlabel("seconds (red: not every partition caught up)")
        top.invert_yaxis()
    caught_up = [row["catch_up_ms"] / 1000 for row in by_partition if row["catch_up_ms"] is not None]
    if caught_up:
        bottom.hist(caught_up, bins=min(50, max(5, len(caught_up) // 4)))
        bottom.set_xlabel("seconds")
        bottom.set_ylabel("partitions")
    else:
        _no_data(bottom)
    return _save(figure, path, time_axis=False)


def controller(snapshots: list[dict], path: Path) -> Path:
    figure = Figure(figsize=(10, 4))
    ax = figure.subplots()
    ax.set_title("controller: offline partitions and fenced brokers")
    if not snapshots:
        _no_data(ax)
        return _save(figure, path)
    times = [when(row["ts_ms"]) for row in snapshots]
    ax.step(times, [row["offline_partitions"] for row in snapshots], where="post", label="offline partitions")
    ax.step(times, [row["fenced_brokers"] for row in snapshots], where="post", label="fenced brokers")
    ax.legend(loc="upper right")
    _time_axis(ax)
    return _save(figure, path)


def draw_all(results: dict, window_ms: int, directory: Path) -> dict[str, Path]:
    """Every plot, by title."""
    directory.mkdir(parents=True, exist_ok=True)
    rows = {name: result.rows for name, result in results.items()}
    return {
        "Follower lag": lag_percentiles(rows["lag_by_window"], directory / "lag_percentiles.png"),
        "Under-replicated intervals": under_replicated_gantt(
            rows["under_replicated_intervals"], directory / "under_replicated.png"
        ),
        "Throughput": throughput(
            rows["throughput_by_topic"], rows["throughput_by_broker"], directory / "throughput.png"
        ),
        "ISR changes": isr_events(rows["isr_timeline"], window_ms, directory / "isr_events.png"),
        "Leader balance": leader_balance(
            rows["leader_counts"], rows["leader_imbalance"], directory / "leader_balance.png"
        ),
        "Catch-up after restarts": catch_up(
            rows["catch_up_by_start"], rows["catch_up_by_partition"], directory / "catch_up.png"
        ),
        "Controller": controller(rows["controller_snapshots"], directory / "controller.png"),
    }
