"""Reading dumps: valid lines are kept, every other line is counted per file and reason."""

import json

import pytest
from pyspark.testing import assertDataFrameEqual

from replog.analytics import AnalysisError, dumps
from replog.analytics.dumps import find_dump_files, read_dumps

from .builders import T0, broker, isr_change, load, partition, start, write_dump


def test_malformed_lines_are_counted_per_file_and_reason_and_the_rest_kept(spark, tmp_path):
    whole = broker(T0 + 1000, 1, [partition("t", 0, 1, [1, 2], [1, 2])])
    killed_mid_write = json.dumps(broker(T0 + 2000, 1, [partition("t", 0, 1, [1, 2], [1, 2])]))[:70]
    first = write_dump(tmp_path / "broker-1" / "metrics-1.jsonl", [start(T0, 1), whole, killed_mid_write])
    without_started_ms = {k: v for k, v in whole.items() if k != "started_ms"}
    partition_without_isr = broker(
        T0, 2, [{k: v for k, v in partition("t", 0, 1, [1, 2], [1, 2]).items() if k != "isr"}]
    )
    change_without_source = {k: v for k, v in isr_change(T0, 2, "t", 0, [2], [2, 1]).items() if k != "source"}
    second = write_dump(
        tmp_path / "broker-2" / "a dir+x" / "metrics-2.jsonl",
        [
            start(T0, 2) | {"kind": "restart"},
            start(T0, 2) | {"v": 2},
            without_started_ms,
            partition_without_isr,
            change_without_source,
            "not json at all\n",
            isr_change(T0 + 500, 2, "t", 0, [2], [2, 1]),
        ],
    )

    parsed = read_dumps(spark, find_dump_files([tmp_path]))

    expected = [
        (str(first), "unparseable", 1),
        (str(second), "unknown_kind", 1),
        (str(second), "unknown_version", 1),
        (str(second), "missing_field", 3),
        (str(second), "unparseable", 1),
    ]
    assertDataFrameEqual(
        parsed.malformed,
        spark.createDataFrame(expected, "file string, reason string, lines long"),
        checkRowOrder=False,
    )
    assert parsed.valid_lines == 3
    assert sorted(row["kind"] for row in parsed.lines.collect()) == ["broker", "isr_change", "start"]
    assert (parsed.first_ts_ms, parsed.last_ts_ms) == (T0, T0 + 1000)


def test_a_directory_without_dump_files_is_a_clear_error(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("not a dump")
    with pytest.raises(AnalysisError, match="no \\*.jsonl metrics dump files under"):
        find_dump_files([tmp_path / "empty"])
    with pytest.raises(AnalysisError, match="not a directory"):
        find_dump_files([tmp_path / "missing"])


def test_files_without_a_valid_line_are_a_clear_error(spark, tmp_path):
    files = [
        write_dump(tmp_path / "metrics-1.jsonl", ['{"v":1,"kind":"bro']),
        write_dump(tmp_path / "metrics-2.jsonl", [start(T0, 1) | {"v": 7}]),
    ]
    with pytest.raises(
        AnalysisError, match=r"no valid metrics line in 2 dump files \(.*1 unparseable.*\)"
    ) as error:
        read_dumps(spark, files)
    assert "1 unknown_version" in str(error.value)


def test_a_field_no_analysis_reads_is_skipped_unread_whatever_its_value(spark, tmp_path):
    """The schema holds only what the analyses read, so a line is judged by those fields alone; a line that
    is not JSON at all is still unparseable."""
    snapshot = broker(T0, 1, [partition("t", 0, 1, [1, 2], [1, 2]) | {"size_bytes": "not a number"}])
    snapshot["broker"] |= {"bytes_out_total": {"nested": [1, 2]}}
    parsed = load(spark, tmp_path, [snapshot, '{"v":1,"kind":"broker","ts_ms":1,"node_id":1,"broker":\n'])

    assert parsed.valid_lines == 1
    assert [(row["reason"], row["lines"]) for row in parsed.malformed.collect()] == [("unparseable", 1)]


def test_a_broker_line_is_one_row_per_partition_and_other_lines_one_row_each(spark, tmp_path):
    """The flat rows the analyses read: a broker line without partitions is still a broker snapshot (and
    no partition snapshot, whatever top-level fields it carries), and an isr_change line's partition fields
    are its own."""
    two_partitions = broker(
        T0,
        1,
        [partition("t", 0, 1, [1, 2], [1, 2], bytes_in=5), partition("t", 1, 2, [2, 1], [2], min_isr=1)],
    )
    no_partitions = broker(T0 + 1000, 2, []) | {"topic": "t", "partition": 9}
    parsed = load(
        spark, tmp_path, [two_partitions, no_partitions, isr_change(T0 + 500, 2, "t", 1, [2, 1], [2])]
    )

    assert parsed.valid_lines == 3
    assert parsed.rows.count() == 4
    brokers = dumps.broker_snapshots(parsed.rows).select("ts_ms", "node_id", "leader_count")
    assert sorted(tuple(row) for row in brokers.collect()) == [(T0, 1, 1), (T0 + 1000, 2, 0)]
    snapshots = dumps.partition_snapshots(parsed.rows).select(
        "node_id", "topic", "partition", "leader", "isr", "min_isr", "bytes_in_total"
    )
    assert sorted(tuple(row) for row in snapshots.collect()) == [
        (1, "t", 0, 1, [1, 2], 2, 5),
        (1, "t", 1, 2, [2], 1, 0),
    ]
    changes = dumps.isr_changes(parsed.rows).select("topic", "partition", "isr_before", "isr_after")
    assert [tuple(row) for row in changes.collect()] == [("t", 1, [2, 1], [2])]
