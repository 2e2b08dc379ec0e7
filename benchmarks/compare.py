"""`replog bench compare A.json B.json`: what changed between two benchmark runs, case by case."""

import json
from pathlib import Path


def load_results(path: Path) -> dict[tuple[str, str, str], dict]:
    """A run's results by (benchmark, case, baseline): one case may be judged against several baselines;
    ValueError if the file is not a benchmark run."""
    try:
        data = json.loads(Path(path).read_text())
        return {(r["bench"], r["case"], r.get("baseline", "")): r for r in data["results"]}
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise ValueError(f"{path} is not a benchmark results file ({e})") from e


def compare_runs(before: Path, after: Path) -> str:
    """A table of each case's median and ratio to its baseline in both runs, and the change of each."""
    a, b = load_results(before), load_results(after)
    rows = [("benchmark", "case", "unit", "before", "after", "change", "ratio before", "ratio after")]
    for key in sorted(a.keys() | b.keys()):
        old, new = a.get(key), b.get(key)
        bench, case, baseline = key
        rows.append((
            bench, f"{case} (vs {baseline})" if baseline else case, (old or new)["unit"],
            _median(old), _median(new), _change(old, new),
            _ratio(old), _ratio(new),
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines) + f"\n\nbefore: {before}\nafter:  {after}"


def _median(result: dict | None) -> str:
    return "-" if result is None else f"{result['value']['median']:,.2f}"


def _ratio(result: dict | None) -> str:
    return "-" if result is None or result["ratio"] is None else f"{result['ratio']:.3f}"


def _change(old: dict | None, new: dict | None) -> str:
    if old is None or new is None:
        return "only after" if old is None else "only before"
    before = old["value"]["median"]
    if before == 0:
        return "-"
    return f"{(new['value']['median'] - before) / before:+.1%}"
