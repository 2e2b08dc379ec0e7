"""`replog bench table RUN.json`: a run's results as a Markdown table, the form docs/benchmarks.md shows."""

import json
from pathlib import Path

from .harness import format_value


def markdown_table(path: Path) -> str:
    """One row per result: benchmark, case, median (min-max), baseline with its value, ratio; then how the run
    was made (mode, machine, seconds), so the table says where its figures come from."""
    try:
        run = json.loads(Path(path).read_text())
        settings, results = run["settings"], run["results"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise ValueError(f"{path} is not a benchmark results file ({e})") from e
    lines = ["| benchmark | case | median (min-max) | same-run baseline | ratio |", "|---|---|---|---|---|"]
    for r in results:
        value, unit = r["value"], r["unit"]
        spread = "" if value["low"] == value["high"] else \
            f" ({format_value(value['low'], unit)} - {format_value(value['high'], unit)})"
        lines.append(f"| {r['bench']} | {r['case']} | {format_value(value['median'], unit)}{spread} | "
                     f"{r['baseline']} = {format_value(r['baseline_value'], unit)} | {_ratio(r['ratio'])} |")
    machine = settings.get("machine", {})
    lines.append("")
    lines.append(f"{'Quick' if settings.get('quick') else 'Full'} run of {', '.join(settings.get('benchmarks', []))} "
                 f"in {settings.get('seconds')} s on {machine.get('cpus')} x {machine.get('cpu_model')}, "
                 f"{machine.get('memory_gib')} GiB, Linux {machine.get('kernel')}, Python {machine.get('python')}.")
    return "\n".join(lines)


def _ratio(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{ratio:.3g}"
