"""report.html: the summary, every plot, and the first rows of the key tables, linking the full CSV files."""

from html import escape
from pathlib import Path

from .summary import utc

MAX_ROWS = 25
# Columns holding a point in time, shown as UTC; other *_ms columns are durations.
TIMESTAMP_COLUMNS = {"ts_ms", "start_ms", "end_ms", "window_start_ms", "rejoined_ms"}
# Plot title -> the tables shown under it.
SECTIONS = {
    "Follower lag": ("lag_overall", "lag_by_topic", "lag_by_follower", "lag_by_partition_follower"),
    "Under-replicated intervals": ("under_replicated_totals", "under_replicated_intervals"),
    "ISR changes": ("isr_timeline",),
    "Throughput": ("throughput_by_topic", "throughput_by_broker"),
    "Catch-up after restarts": ("catch_up_by_start", "catch_up_by_partition"),
    "Leader balance": ("leader_imbalance",),
    "Controller": ("controller_snapshots",),
}
STYLE = """body { font-family: sans-serif; margin: 2em; }
table { border-collapse: collapse; font-size: 0.85em; margin-bottom: 1em; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: right; }
th { background: #eee; } td.label { text-align: left; } img { max-width: 100%; }"""


def _cell(column: str, value: object) -> str:
    if value is None:
        return ""
    if column in TIMESTAMP_COLUMNS:
        return utc(value)
    if isinstance(value, float):
        return f"{value:,.3f}"
    if isinstance(value, list):
        return ",".join(str(item) for item in value)
    return str(value)


def _table_html(result) -> str:
    shown = result.rows[:MAX_ROWS]
    header = "".join(f"<th>{escape(column)}</th>" for column in result.columns)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{escape(_cell(column, row[column]))}</td>" for column in result.columns)
        + "</tr>"
        for row in shown
    )
    count = f"{len(result.rows):,} rows" + (
        f", first {MAX_ROWS} shown" if len(result.rows) > MAX_ROWS else ""
    )
    links = f'<a href="csv/{result.name}.csv">CSV</a>, <a href="parquet/{result.name}">Parquet</a>'
    return (
        f"<h3>{escape(result.description)}</h3><p><code>{result.name}</code>: {count} ({links})</p>"
        f"<table><tr>{header}</tr>{body}</table>"
    )


def write_report(path: Path, summary: list[tuple[str, str]], results: dict, images: dict[str, Path]) -> None:
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>replog analysis</title>"
        f"<style>{STYLE}</style></head><body><h1>replog metrics analysis</h1><table>"
    ]
    parts += [
        f"<tr><td class='label'>{escape(label)}</td><td class='label'>{escape(value)}</td></tr>"
        for label, value in summary
    ]
    parts.append("</table>")
    for title, image in images.items():
        relative = image.relative_to(path.parent).as_posix()
        parts.append(f"<h2>{escape(title)}</h2><img src='{relative}' alt='{escape(title)}'>")
        parts += [_table_html(results[name]) for name in SECTIONS[title]]
    parts.append("<h2>Input</h2>" + _table_html(results["malformed_lines"]))
    parts.append("<h2>All tables</h2><ul>")
    parts += [
        f'<li>{escape(result.description)}: <a href="csv/{name}.csv">csv/{name}.csv</a>, '
        f'<a href="parquet/{name}">parquet/{name}</a></li>'
        for name, result in results.items()
    ]
    parts.append("</ul></body></html>")
    path.write_text("\n".join(parts), encoding="utf-8")
