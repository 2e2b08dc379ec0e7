"""The analysis from dump files to its outputs: Parquet tables, CSV files, PNG plots, report.html and a
summary."""

import csv
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from . import plots, report, summary
from .dumps import find_dump_files, read_dumps
from .session import spark_session
from .tables import Table, build_tables

# Tables written at once. Each table is a few small Spark jobs whose cost is mostly fixed (planning, code
# generation, scheduling, the Parquet commit); run one after another they left the executors idle more than
# half the time. Spark runs jobs from several driver threads side by side, sharing its cores.
CONCURRENT_TABLES = 4


class Progress:
    """One line per step on stderr, with the seconds since the analysis began (from any thread)."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self._lock = threading.Lock()

    def step(self, message: str) -> None:
        with self._lock:
            print(f"[{time.monotonic() - self.started:7.1f} s] {message}", file=sys.stderr, flush=True)


@dataclass
class TableResult:
    name: str
    description: str
    columns: list[str]
    rows: list[dict]


def analyze_directories(
    directories: list[Path], out: Path, window_s: float, master: str | None, progress: Progress
) -> str:
    """Analyse the dumps under `directories` into `out`; returns the summary text."""
    files = find_dump_files(directories)  # before Spark starts, so a wrong path fails at once
    progress.step(f"{len(files)} dump files; starting Spark")
    with spark_session(master) as spark:
        progress.step(f"Spark {spark.version} on {spark.sparkContext.master}")
        return analyze(spark, files, out, round(window_s * 1000), progress)


def analyze(spark: SparkSession, files: list[Path], out: Path, window_ms: int, progress: Progress) -> str:
    parsed = read_dumps(spark, files)
    progress.step(f"parsed {parsed.total_bytes / 1e6:,.1f} MB: {parsed.valid_lines:,} valid lines")
    tables, intermediates = build_tables(parsed, window_ms)

    def write(table: Table) -> TableResult:
        result = write_table(spark, table, out)
        progress.step(f"{table.name}: {len(result.rows):,} rows")
        return result

    try:
        with ThreadPoolExecutor(CONCURRENT_TABLES, thread_name_prefix="table") as pool:
            written = list(pool.map(write, tables))
        results = {result.name: result for result in written}
    finally:
        for frame in intermediates:
            frame.unpersist()
        parsed.release()
    images = plots.draw_all(results, window_ms, out / "plots")
    progress.step(f"{len(images)} plots")
    summary_rows = summary.summarize(parsed, results, out)
    report.write_report(out / "report.html", summary_rows, results, images)
    progress.step(f"report: {out / 'report.html'}")
    return summary.format_summary(summary_rows)


def write_table(spark: SparkSession, table: Table, out: Path) -> TableResult:
    """Write the table as Parquet, then its rows, read back and put in order, as CSV; return the rows."""
    parquet_path = out / "parquet" / table.name
    table.frame.write.mode("overwrite").parquet(str(parquet_path))
    written: DataFrame = spark.read.schema(table.frame.schema).parquet(str(parquet_path))
    # A table is a small aggregate: sorting it here spares Spark a sampling job and a shuffle.
    rows = sorted((row.asDict() for row in written.collect()), key=lambda row: sort_key(row, table.order_by))
    result = TableResult(table.name, table.description, written.columns, rows)
    write_csv(result, out / "csv" / f"{table.name}.csv")
    return result


def sort_key(row: dict, columns: tuple[str, ...]) -> tuple:
    """Spark's ascending order on `columns`: nulls first (strings compare alike: UTF-8 keeps code point
    order)."""
    return tuple((0,) if row[column] is None else (1, row[column]) for column in columns)


def write_csv(result: TableResult, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(result.columns)
        writer.writerows([csv_value(row[column]) for column in result.columns] for row in result.rows)


def csv_value(value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, list):
        return " ".join(str(item) for item in value)
    if isinstance(value, float):
        return round(value, 6)
    return value
