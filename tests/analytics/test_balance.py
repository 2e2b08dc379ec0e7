"""Leader balance per window and the controller's snapshots."""

from pyspark.testing import assertDataFrameEqual

from replog.analytics import balance, dumps

from .builders import T0, broker, controller, load, partition

WINDOW_MS = 10_000


def leading(ts: int, node_id: int, leaders: int) -> dict:
    """A snapshot of `node_id` leading `leaders` partitions (its leader_count)."""
    return broker(ts, node_id, [partition("t", p, node_id, [node_id], [node_id]) for p in range(leaders)])


def test_leader_counts_take_each_brokers_last_snapshot_and_imbalance_is_max_over_mean(spark, tmp_path):
    lines = [
        leading(T0, 1, 3),
        leading(T0 + 5000, 1, 2),
        leading(T0 + 1000, 2, 1),
        leading(T0 + 2000, 3, 1),
        leading(T0 + 10_000, 1, 3),
        leading(T0 + 19_000, 2, 0),  # broker 3 does not report
        leading(T0 + 20_000, 2, 0),
    ]
    parsed = load(spark, tmp_path, lines)

    counts = balance.leader_counts(dumps.broker_snapshots(parsed.rows), WINDOW_MS)
    imbalance = balance.leader_imbalance(counts)

    expected_counts = [
        (T0, 1, 2),
        (T0, 2, 1),
        (T0, 3, 1),
        (T0 + 10_000, 1, 3),
        (T0 + 10_000, 2, 0),
        (T0 + 20_000, 2, 0),
    ]
    assertDataFrameEqual(counts, spark.createDataFrame(expected_counts, counts.schema), checkRowOrder=False)
    expected_imbalance = [
        (T0, 3, 4, 2, 1, 4 / 3, 2 / (4 / 3)),
        (T0 + 10_000, 2, 3, 3, 0, 1.5, 2.0),
        (T0 + 20_000, 1, 0, 0, 0, 0.0, None),
    ]
    assertDataFrameEqual(
        imbalance, spark.createDataFrame(expected_imbalance, imbalance.schema), checkRowOrder=False
    )


def test_controller_table_lists_offline_partitions_and_fenced_brokers(spark, tmp_path):
    parsed = load(spark, tmp_path, [controller(T0, []), controller(T0 + 1000, [3, 1], offline_partitions=2)])

    table = balance.controller_table(dumps.controller_snapshots(parsed.rows))

    expected = [(T0, 3000, 1, 0, 0, 3, 1, 0, []), (T0 + 1000, 3000, 1, 2, 2, 1, 1, 0, [1, 3])]
    assertDataFrameEqual(table, spark.createDataFrame(expected, table.schema), checkRowOrder=False)
