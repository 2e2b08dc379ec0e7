"""Lag percentiles from the leaders' follower entries, per partition and follower, follower, topic, window and
overall, against nearest-rank percentiles of the samples the test wrote."""

import math

from pyspark.sql import DataFrame
from pyspark.testing import assertDataFrameEqual

from replog.analytics import dumps, lag

from .builders import T0, broker, follower, load, partition

WINDOW_MS = 10_000


def nearest_rank(values: list[int], fraction: float) -> int:
    return sorted(values)[math.ceil(fraction * len(values)) - 1]


def expected_row(keys: tuple, samples: list[tuple[int, int, int]]) -> tuple:
    """keys, sample count, then p50/p95/p99/max of messages, bytes and ms."""
    row = [*keys, len(samples)]
    for metric in range(3):
        values = [sample[metric] for sample in samples]
        row += [
            nearest_rank(values, 0.5),
            nearest_rank(values, 0.95),
            nearest_rank(values, 0.99),
            max(values),
        ]
    return tuple(row)


def reads_cache_of(frame: DataFrame, cached: DataFrame) -> bool:
    """Whether the optimized plan of `frame` reads the cached data of `cached` (instead of computing it)."""
    cache = cached._jdf.queryExecution().optimizedPlan().cacheBuilder()
    leaves = frame._jdf.queryExecution().optimizedPlan().collectLeaves()
    return any(
        leaves.apply(i).nodeName() == "InMemoryRelation" and leaves.apply(i).cacheBuilder().equals(cache)
        for i in range(leaves.size())
    )


def test_lag_percentiles_per_partition_follower_topic_window_and_overall(spark, tmp_path):
    lines, samples = [], []  # samples: (topic, partition, follower, window, (messages, bytes, ms))
    for i in range(
        100
    ):  # leader 1 of t-0 every 200 ms over two windows: follower 2 lags i+1, follower 3 none
        ts = T0 + 200 * i
        lag_2 = (i + 1, 10 * (i + 1), 5 * (i + 1))
        lines.append(
            broker(
                ts,
                1,
                [partition("t", 0, 1, [1, 2, 3], [1, 2, 3], followers=[follower(2, *lag_2), follower(3)])],
            )
        )
        window = ts - ts % WINDOW_MS
        samples += [("t", 0, 2, window, lag_2), ("t", 0, 3, window, (0, 0, 0))]
    for i in range(10):  # leader 2 of u-0, follower 1 lags 7 messages; its follower lines have no entries
        ts = T0 + 1000 * i
        lines.append(
            broker(
                ts,
                2,
                [
                    partition("u", 0, 2, [2, 1], [2, 1], followers=[follower(1, 7, 700, 70)]),
                    partition("t", 0, 1, [1, 2, 3], [1, 2, 3]),
                ],
            )
        )
        samples.append(("u", 0, 1, ts - ts % WINDOW_MS, (7, 700, 70)))
    parsed = load(spark, tmp_path, lines)

    tables = lag.lag_tables(lag.follower_lags(dumps.partition_snapshots(parsed.rows), WINDOW_MS))

    def grouped(key_of) -> list[tuple]:
        groups: dict[tuple, list] = {}
        for sample in samples:
            groups.setdefault(key_of(sample), []).append(sample[4])
        return [expected_row(keys, values) for keys, values in groups.items()]

    expected = {
        "lag_by_partition_follower": grouped(lambda s: (s[0], s[1], s[2])),
        "lag_by_follower": grouped(lambda s: (s[2],)),
        "lag_by_topic": grouped(lambda s: (s[0],)),
        "lag_by_window": grouped(lambda s: (s[3],)),
        "lag_overall": grouped(lambda s: ()),
    }
    assert expected["lag_by_partition_follower"][0][2:7] == (
        2,
        100,
        50,
        95,
        99,
    )  # the construction, spelled out
    for name, rows in expected.items():
        frame = tables[name]
        assertDataFrameEqual(frame, spark.createDataFrame(rows, frame.schema), checkRowOrder=False)


def test_without_follower_reports_overall_is_one_row_of_zero_samples_and_the_groupings_are_empty(
    spark, tmp_path
):
    single_replica = partition("t", 0, 1, [1], [1], followers=[])
    parsed = load(spark, tmp_path, [broker(T0, 1, [single_replica])])

    tables = lag.lag_tables(lag.follower_lags(dumps.partition_snapshots(parsed.rows), WINDOW_MS))

    overall = tables["lag_overall"].collect()
    assert [row.asDict() for row in overall] == [
        {"samples": 0, **{column: None for column in tables["lag_overall"].columns if column != "samples"}}
    ]
    for name in ("lag_by_partition_follower", "lag_by_follower", "lag_by_topic", "lag_by_window"):
        assert tables[name].count() == 0, name


def test_the_approximate_groupings_come_from_one_aggregation_that_keep_is_given(spark, tmp_path):
    lines = [
        broker(T0 + 1000 * i, 1, [partition("t", 0, 1, [1, 2], [1, 2], followers=[follower(2, i, i, i)])])
        for i in range(3)
    ]
    parsed = load(spark, tmp_path, lines)
    kept = []

    def keep(frame):
        kept.append(frame.cache())
        return kept[-1]

    tables = lag.lag_tables(lag.follower_lags(dumps.partition_snapshots(parsed.rows), WINDOW_MS), keep)

    assert len(kept) == 1
    for name in lag.APPROX_GROUPINGS:
        assert reads_cache_of(tables[name], kept[0]), name
    assert not reads_cache_of(tables["lag_by_partition_follower"], kept[0])
    assert tables["lag_by_follower"].collect()[0]["samples"] == 3
    kept[0].unpersist()
