"""`replog analyze` end to end on generated dumps, whose schedule is the truth the outputs are checked
against, and its clear errors."""

import csv
import subprocess
import sys

from pyspark.testing import assertDataFrameEqual

from replog.analytics.synthetic import generate
from replog.analytics.synthetic_scenario import Scenario
from replog.cli import main

WINDOW_S = 10
TABLES = {
    "malformed_lines",
    "lag_overall",
    "lag_by_topic",
    "lag_by_follower",
    "lag_by_window",
    "lag_by_partition_follower",
    "under_replicated_intervals",
    "under_replicated_totals",
    "isr_timeline",
    "throughput_by_topic",
    "throughput_by_broker",
    "catch_up_by_start",
    "catch_up_by_partition",
    "leader_counts",
    "leader_imbalance",
    "controller_snapshots",
}
PLOTS = (
    "lag_percentiles",
    "under_replicated",
    "throughput",
    "isr_events",
    "leader_balance",
    "catch_up",
    "controller",
)


def test_analyze_writes_every_output_and_recovers_the_generated_scenario(spark, tmp_path, capsys):
    scenario = Scenario(brokers=4, partitions=8, seconds=90, topics=2, restarts=1, stalls=1, seed=3)
    generate(scenario, tmp_path / "dumps")
    out = tmp_path / "analysis"

    code = main(
        [
            "analyze",
            "--metrics",
            str(tmp_path / "dumps"),
            "--out",
            str(out),
            "--master",
            "local[2]",
            "--window",
            str(WINDOW_S),
        ]
    )

    assert code == 0
    printed = capsys.readouterr()
    assert "under-replicated" in printed.out and "report:" in printed.err
    report = (out / "report.html").read_text()
    assert {path.name for path in (out / "parquet").iterdir()} == TABLES
    for name in TABLES:
        columns = spark.read.parquet(str(out / "parquet" / name)).columns
        with open(out / "csv" / f"{name}.csv", newline="") as f:
            assert next(csv.reader(f)) == columns, name
        assert f"csv/{name}.csv" in report and f"parquet/{name}" in report, name
    for plot in PLOTS:
        assert (out / "plots" / f"{plot}.png").read_bytes().startswith(b"\x89PNG"), plot
        assert f"src='plots/{plot}.png'" in report

    (restart,) = scenario.restart_schedule()
    (stall,) = scenario.stall_schedule()
    rejoined = {
        k: restart.started_ms + scenario.catch_up_ms(k)
        for k in range(scenario.partitions)
        if restart.broker_id in scenario.replicas(k)
    }

    def at(k: int) -> tuple[str, int]:
        return scenario.topic(k), scenario.partition_number(k)

    # The stalled follower keeps its partition under-replicated until the stall ends, and under min ISR from
    # the leader dropping it until the restarted broker is back.
    ends = rejoined | {stall.partition_index: stall.ends_ms}
    intervals = [
        (*at(k), "under_replicated", restart.fenced_ms, end, end - restart.fenced_ms, False)
        for k, end in ends.items()
    ]
    intervals.append(
        (
            *at(stall.partition_index),
            "under_min_isr",
            stall.shrinks_ms,
            rejoined[stall.partition_index],
            rejoined[stall.partition_index] - stall.shrinks_ms,
            False,
        )
    )
    catch_up = [
        (restart.broker_id, restart.started_ms, *at(k), ms, ms - restart.started_ms, "rejoined")
        for k, ms in rejoined.items()
    ]
    all_back = max(rejoined.values()) - restart.started_ms
    killed_file = (
        tmp_path / "dumps" / f"broker-{restart.broker_id}" / f"metrics-{scenario.start_ms:013d}.jsonl"
    )
    expected = {
        "under_replicated_intervals": intervals,
        "catch_up_by_partition": catch_up,
        "catch_up_by_start": [
            (restart.broker_id, restart.started_ms, len(rejoined), len(rejoined), all_back, all_back)
        ],
        "malformed_lines": [(str(killed_file), "unparseable", 1)],
    }
    for name, rows in expected.items():
        written = spark.read.parquet(str(out / "parquet" / name))
        assertDataFrameEqual(written, spark.createDataFrame(rows, written.schema), checkRowOrder=False)

    # Before the kill every window is whole: each topic takes 4 partitions x bytes_per_second.
    throughput = spark.read.parquet(str(out / "parquet" / "throughput_by_topic"))
    steady = throughput.filter(
        f"window_start_ms >= {scenario.start_ms + 10_000} and window_start_ms < {restart.killed_ms - 10_000}"
    )
    per_topic = 4 * scenario.bytes_per_second * WINDOW_S
    assert sorted(
        (row["topic"], row["produce_bytes"], row["produce_mb_per_s"]) for row in steady.collect()
    ) == [
        (topic, per_topic, per_topic / 1e6 / WINDOW_S) for topic in ("topic-0", "topic-1") for _ in range(3)
    ]
    # An in-sync follower lags by at most one tick of records, each record_bytes long.
    lag = spark.read.parquet(str(out / "parquet" / "lag_by_window"))
    before_kill = lag.filter(f"window_start_ms < {restart.killed_ms - 10_000}").collect()
    assert before_kill and all(row["lag_messages_max"] <= scenario.records_per_tick for row in before_kill)
    assert all(row["lag_bytes_p50"] == row["lag_messages_p50"] * scenario.record_bytes for row in before_kill)


def test_analyze_of_only_malformed_lines_exits_1_with_the_counts(spark, tmp_path, capsys):
    (tmp_path / "dumps").mkdir()
    (tmp_path / "dumps" / "metrics-1.jsonl").write_text('{"v":1,"kind":"broker","ts_')

    assert main(["analyze", "--metrics", str(tmp_path / "dumps"), "--out", str(tmp_path / "out")]) == 1

    assert "error: no valid metrics line in 1 dump files (1 unparseable)" in capsys.readouterr().err


def run_cli(*code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "\n".join(code)], capture_output=True, text=True, timeout=60)


def test_analyze_of_an_empty_directory_exits_1_without_a_traceback(tmp_path):
    (tmp_path / "empty").mkdir()

    done = subprocess.run(
        [sys.executable, "-m", "replog", "analyze", "--metrics", str(tmp_path / "empty")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )

    assert done.returncode == 1
    assert done.stderr == f"error: no *.jsonl metrics dump files under {tmp_path / 'empty'}\n"
    assert not (tmp_path / "replog-analysis").exists()


def test_analyze_without_pyspark_tells_how_to_install_it(tmp_path):
    done = run_cli(
        "import sys",
        "sys.modules['pyspark'] = None  # as if it were not installed",
        "from replog.cli import main",
        f"sys.exit(main(['analyze', '--metrics', {str(tmp_path)!r}]))",
    )

    assert done.returncode == 1
    assert "pyspark is missing" in done.stderr and "pip install 'replog[analytics]'" in done.stderr
    assert "Traceback" not in done.stderr
