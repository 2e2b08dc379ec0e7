"""Produce and replication throughput from per-partition counter increases, with a counter reset, a process
that started before the data and one that started inside it."""

from pyspark.testing import assertDataFrameEqual

from replog.analytics import dumps, throughput

from .builders import T0, broker, load, partition, start

WINDOW_MS = 10_000


def test_throughput_per_topic_and_broker_handles_resets_and_where_counting_starts(spark, tmp_path):
    def on_1(ts: int, t0_bytes: int, t1_replicated: int, t2_bytes: int | None = None) -> dict:
        partitions = [
            partition("t", 0, 1, [1, 2], [1, 2], bytes_in=t0_bytes, messages_in=t0_bytes // 100),
            partition("t", 1, 2, [2, 1], [2, 1], replication_bytes_in=t1_replicated),
        ]
        if t2_bytes is not None:  # a replica created after the process's first line
            partitions.append(partition("t", 2, 1, [1], [1], bytes_in=t2_bytes, messages_in=t2_bytes // 100))
        return broker(ts, 1, partitions, started_ms=T0 - 60_000)  # started before the data: baseline first

    def on_2(ts: int, t1_bytes: int, t0_replicated: int) -> dict:
        return broker(
            ts,
            2,
            [
                partition("t", 1, 2, [2, 1], [2, 1], bytes_in=t1_bytes, messages_in=t1_bytes // 100),
                partition("t", 0, 1, [1, 2], [1, 2], replication_bytes_in=t0_replicated),
            ],
        )

    lines = [
        start(T0, 2),
        on_1(T0 + 1000, 50_000, 1000),  # baseline only
        on_2(T0 + 2000, 8_000, 5_000),  # started at the first line: counts from zero
        on_1(T0 + 3000, 60_000, 3000),
        on_1(T0 + 6000, 75_000, 3000),
        on_2(T0 + 7000, 18_000, 9_000),
        on_1(T0 + 9000, 4_000, 3500),  # t-0's counter reset: the step counts 4,000
        on_2(T0 + 11_000, 30_000, 20_000),
        on_1(T0 + 12_000, 24_000, 9500, t2_bytes=700),
    ]
    parsed = load(spark, tmp_path, lines)

    increases = throughput.counter_increases(
        dumps.broker_snapshots(parsed.rows),
        dumps.partition_snapshots(parsed.rows),
        parsed.first_ts_ms,
        WINDOW_MS,
    )
    tables = throughput.throughput_tables(increases, WINDOW_MS)

    def row(key: object, window: int, produced: int, replicated: int) -> tuple:
        return (
            T0 + window,
            key,
            produced,
            produced // 100,
            replicated,
            produced / 1e6 / 10,
            produced / 100 / 10,
            replicated / 1e6 / 10,
        )

    by_topic = [
        row("t", 0, 10_000 + 15_000 + 4_000 + 8_000 + 10_000, 2000 + 0 + 500 + 5000 + 4000),
        row("t", WINDOW_MS, 20_000 + 700 + 12_000, 6000 + 11_000),
    ]
    by_broker = [
        row(1, 0, 10_000 + 15_000 + 4_000, 2000 + 0 + 500),
        row(2, 0, 8_000 + 10_000, 5000 + 4000),
        row(1, WINDOW_MS, 20_000 + 700, 6000),
        row(2, WINDOW_MS, 12_000, 11_000),
    ]
    for name, rows in (("throughput_by_topic", by_topic), ("throughput_by_broker", by_broker)):
        frame = tables[name]
        assertDataFrameEqual(frame, spark.createDataFrame(rows, frame.schema), checkRowOrder=False)
