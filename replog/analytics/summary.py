"""The short summary printed at the end of an analysis and shown at the top of the report."""

from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path

from .dumps import Dumps


def utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _seconds(ms: float | None) -> str:
    return "-" if ms is None else f"{ms / 1000:,.1f} s"


def summarize(parsed: Dumps, results: dict, out: Path) -> list[tuple[str, str]]:
    """(label, value) pairs, from the dumps' extent and the written tables."""
    rows = {name: result.rows for name, result in results.items()}
    malformed = Counter()
    for row in rows["malformed_lines"]:
        malformed[row["reason"]] += row["lines"]
    malformed_text = ", ".join(f"{count:,} {reason}" for reason, count in sorted(malformed.items())) or "none"
    span_ms = parsed.last_ts_ms - parsed.first_ts_ms
    pairs = [
        ("input", f"{len(parsed.files)} files, {parsed.total_bytes / 1e6:,.1f} MB"),
        ("lines used", f"{parsed.valid_lines:,}"),
        ("malformed lines", malformed_text),
        ("time range", f"{utc(parsed.first_ts_ms)} - {utc(parsed.last_ts_ms)} ({_seconds(span_ms)})"),
        ("brokers", str(len({row["broker_id"] for row in rows["leader_counts"]}))),
    ]
    overall = rows["lag_overall"][0] if rows["lag_overall"] else {"samples": 0}
    if overall["samples"]:
        for metric, unit in (("lag_messages", "messages"), ("lag_ms", "ms")):
            figures = " / ".join(f"{overall[f'{metric}_{p}']:,}" for p in ("p50", "p95", "p99", "max"))
            pairs.append((f"lag p50/p95/p99/max ({unit})", figures))
    else:
        pairs.append(("lag", "no follower reports"))
    pairs += _interval_summary(rows["under_replicated_intervals"])
    changes = Counter(row["change"] for row in rows["isr_timeline"])
    pairs.append(("ISR changes", ", ".join(f"{n:,} {kind}" for kind, n in sorted(changes.items())) or "none"))
    pairs += _throughput_summary(rows["throughput_by_topic"], span_ms)
    pairs.append(("restarts", _catch_up_summary(rows["catch_up_by_start"])))
    imbalance = [row["imbalance"] for row in rows["leader_imbalance"] if row["imbalance"] is not None]
    if imbalance:
        pairs.append(("leader imbalance (max/mean)", f"last {imbalance[-1]:.2f}, worst {max(imbalance):.2f}"))
    controller = rows["controller_snapshots"]
    if controller:
        pairs.append(
            ("controller: most offline partitions", str(max(row["offline_partitions"] for row in controller)))
        )
        pairs.append(
            ("controller: most fenced brokers", str(max(row["fenced_brokers"] for row in controller)))
        )
    pairs.append(("outputs", str(out)))
    return pairs


def _interval_summary(intervals: list[dict]) -> list[tuple[str, str]]:
    pairs = []
    for condition, label in (("under_replicated", "under-replicated"), ("under_min_isr", "under min ISR")):
        of_condition = [row for row in intervals if row["condition"] == condition]
        if not of_condition:
            pairs.append((label, "never"))
            continue
        partitions = {(row["topic"], row["partition"]) for row in of_condition}
        total = sum(row["duration_ms"] for row in of_condition)
        longest = max(row["duration_ms"] for row in of_condition)
        still_open = sum(row["open"] for row in of_condition)
        pairs.append(
            (
                label,
                f"{len(of_condition):,} intervals in {len(partitions):,} partitions, "
                f"{_seconds(total)} in all, longest {_seconds(longest)}, {still_open} open at the end",
            )
        )
    return pairs


def _throughput_summary(by_topic: list[dict], span_ms: int) -> list[tuple[str, str]]:
    per_window = defaultdict(float)
    for row in by_topic:
        per_window[row["window_start_ms"]] += row["produce_mb_per_s"]
    produce_mb = sum(row["produce_bytes"] for row in by_topic) / 1e6
    records = sum(row["produce_records"] for row in by_topic)
    replication_mb = sum(row["replication_bytes"] for row in by_topic) / 1e6
    seconds = max(span_ms, 1) / 1000
    return [
        (
            "produce",
            f"{produce_mb / seconds:,.2f} MB/s, {records / seconds:,.0f} records/s on average; "
            f"busiest window {max(per_window.values(), default=0):,.2f} MB/s",
        ),
        ("replication", f"{replication_mb / seconds:,.2f} MB/s on average"),
    ]


def _catch_up_summary(by_start: list[dict]) -> str:
    if not by_start:
        return "none after the first line"
    all_back = [row["all_caught_up_ms"] for row in by_start if row["all_caught_up_ms"] is not None]
    text = f"{len(by_start)} broker starts; {len(all_back)} with every followed partition back in the ISR"
    if all_back:
        text += f" (slowest after {_seconds(max(all_back))})"
    return text


def format_summary(pairs: list[tuple[str, str]]) -> str:
    width = max(len(label) for label, _ in pairs)
    return "\n".join(f"{label.ljust(width)}  {value}" for label, value in pairs)
