"""The ISR timeline, under-replicated and under-min-ISR intervals, and catch-up after a restart, on dumps
whose ISR history the test wrote."""

from pyspark.testing import assertDataFrameEqual

from replog.analytics import dumps, isr

from .builders import T0, broker, isr_change, load, partition, start

INTERVAL_COLUMNS = (
    "topic string, partition int, condition string, start_ms long, end_ms long, duration_ms long, "
    "open boolean"
)


def leadership_move_lines() -> list[dict]:
    """t-0 (replicas 1,2,3, min ISR 2) with exact isr_change edges: 3 leaves at +1.5 s; leader 1 dies and 2
    leads from +4.2 s with ISR [2] (a deposed leader 1 still reports a full ISR at +4.5 s); 3 joins at
    +6.3 s and 1 at +7.6 s. t-1 (replicas 1,2) has leader snapshots only: 2 is out from +1 s to +3 s and
    again from +4 s to the end (+5 s)."""

    def t0(ts: int, leader: int, isr_ids: list[int], epoch: int) -> dict:
        return partition("t", 0, leader, [1, 2, 3], isr_ids, leader_epoch=epoch)

    def t1(isr_ids: list[int]) -> dict:
        return partition("t", 1, 1, [1, 2], isr_ids)

    return [
        broker(T0, 1, [t0(T0, 1, [1, 2, 3], 0), t1([1, 2])]),
        broker(T0 + 1000, 1, [t0(T0, 1, [1, 2, 3], 0), t1([1])]),
        broker(
            T0 + 1000, 2, [t0(T0, 1, [1, 2, 3], 0), partition("t", 1, 1, [1, 2], [1, 2, 3])]
        ),  # follower lines
        isr_change(T0 + 1500, 1, "t", 0, [1, 2, 3], [1, 2]),
        broker(T0 + 2000, 1, [t0(T0, 1, [1, 2], 0), t1([1])]),
        broker(T0 + 3000, 1, [t0(T0, 1, [1, 2], 0), t1([1, 2])]),
        broker(T0 + 4000, 1, [t1([1])]),
        isr_change(T0 + 4200, 2, "t", 0, [], [2], leader_epoch=1, source="controller"),
        broker(T0 + 4500, 1, [t0(T0, 1, [1, 2, 3], 0), t1([1])]),
        broker(T0 + 5000, 2, [t0(T0, 2, [2], 1)]),
        broker(T0 + 5000, 1, [t1([1])]),
        isr_change(T0 + 6300, 2, "t", 0, [2], [2, 3], leader_epoch=1),
        broker(T0 + 7000, 2, [t0(T0, 2, [2, 3], 1)]),
        isr_change(T0 + 7600, 2, "t", 0, [2, 3], [2, 3, 1], leader_epoch=1),
        broker(T0 + 8000, 2, [t0(T0, 2, [2, 3, 1], 1)]),
    ]


def test_intervals_use_exact_edges_survive_a_leadership_move_and_flag_open_ones(spark, tmp_path):
    parsed = load(spark, tmp_path, leadership_move_lines())
    states = isr.partition_states(dumps.partition_snapshots(parsed.rows), dumps.isr_changes(parsed.rows))

    intervals = isr.condition_intervals(states)

    expected = [
        ("t", 0, "under_replicated", T0 + 1500, T0 + 7600, 6100, False),
        ("t", 0, "under_min_isr", T0 + 4200, T0 + 6300, 2100, False),
        ("t", 1, "under_replicated", T0 + 1000, T0 + 3000, 2000, False),
        ("t", 1, "under_replicated", T0 + 4000, T0 + 5000, 1000, True),
        ("t", 1, "under_min_isr", T0 + 1000, T0 + 3000, 2000, False),
        ("t", 1, "under_min_isr", T0 + 4000, T0 + 5000, 1000, True),
    ]
    assertDataFrameEqual(intervals, spark.createDataFrame(expected, INTERVAL_COLUMNS), checkRowOrder=False)
    totals = [
        ("t", 0, "under_replicated", 1, 6100, 6100, False),
        ("t", 0, "under_min_isr", 1, 2100, 2100, False),
        ("t", 1, "under_replicated", 2, 3000, 2000, True),
        ("t", 1, "under_min_isr", 2, 3000, 2000, True),
    ]
    assertDataFrameEqual(
        isr.interval_totals(intervals),
        spark.createDataFrame(totals, isr.interval_totals(intervals).schema),
        checkRowOrder=False,
    )


def test_isr_timeline_classifies_every_change(spark, tmp_path):
    lines = leadership_move_lines() + [
        isr_change(T0 + 9000, 4, "v", 0, [4, 5], [4, 6]),
        isr_change(T0 + 9100, 4, "v", 0, [4, 6], [4, 6], source="controller"),
    ]
    parsed = load(spark, tmp_path, lines)

    timeline = isr.isr_timeline(dumps.isr_changes(parsed.rows)).select(
        "ts_ms", "topic", "partition", "leader", "source", "change", "removed", "added"
    )

    expected = [
        (T0 + 1500, "t", 0, 1, "leader", "shrink", [3], []),
        (T0 + 4200, "t", 0, 2, "controller", "new_leadership", [], []),
        (T0 + 6300, "t", 0, 2, "leader", "expand", [], [3]),
        (T0 + 7600, "t", 0, 2, "leader", "expand", [], [1]),
        (T0 + 9000, "v", 0, 4, "leader", "shrink_and_expand", [5], [6]),
        (T0 + 9100, "v", 0, 4, "controller", "unchanged", [], []),
    ]
    assertDataFrameEqual(timeline, spark.createDataFrame(expected, timeline.schema), checkRowOrder=False)


def test_catch_up_after_a_restart_per_partition_and_per_start(spark, tmp_path):
    """Broker 3 goes down; at +5 s the controller takes it out of t-0 and t-1 and moves t-2's leadership to 1;
    it starts at +10 s, rejoins t-0 at +11.5 s and t-1 at +13.25 s, never t-2, and never left t-3's ISR."""

    def leaders(ts: int, isr_0: list[int], isr_1: list[int], isr_2: list[int] | None) -> list[dict]:
        led_by_1 = [partition("t", 0, 1, [1, 2, 3], isr_0)]
        if isr_2 is not None:
            led_by_1.append(partition("t", 2, 1, [3, 1, 2], isr_2, leader_epoch=1))
        led_by_2 = [partition("t", 1, 2, [2, 3, 1], isr_1), partition("t", 3, 2, [2, 3], [2, 3])]
        return [broker(ts, 1, led_by_1), broker(ts, 2, led_by_2)]

    def broker_3(ts: int) -> dict:
        return broker(
            ts,
            3,
            [
                partition("t", 0, 1, [1, 2, 3], []),
                partition("t", 1, 2, [2, 3, 1], []),
                partition("t", 2, 1, [3, 1, 2], [], leader_epoch=1),
                partition("t", 3, 2, [2, 3], []),
            ],
            started_ms=T0 + 10_000,
        )

    lines = [
        start(T0, 1),
        start(T0, 2),
        start(T0, 3),
        broker(T0, 3, [partition("t", 2, 3, [3, 1, 2], [3, 1, 2])]),
        *leaders(T0, [1, 2, 3], [2, 3, 1], None),
        isr_change(T0 + 5000, 1, "t", 0, [1, 2, 3], [1, 2], source="controller"),
        isr_change(T0 + 5000, 2, "t", 1, [2, 3, 1], [2, 1], source="controller"),
        isr_change(T0 + 5000, 1, "t", 2, [], [1, 2], leader_epoch=1, source="controller"),
        *leaders(T0 + 6000, [1, 2], [2, 1], [1, 2]),
        start(T0 + 10_000, 3),
        broker_3(T0 + 11_000),
        *leaders(T0 + 11_000, [1, 2], [2, 1], [1, 2]),
        isr_change(T0 + 11_500, 1, "t", 0, [1, 2], [1, 2, 3]),
        broker_3(T0 + 12_000),
        *leaders(T0 + 12_000, [1, 2, 3], [2, 1], [1, 2]),
        isr_change(T0 + 13_250, 2, "t", 1, [2, 1], [2, 1, 3]),
        *leaders(T0 + 14_000, [1, 2, 3], [2, 1, 3], [1, 2]),
    ]
    parsed = load(spark, tmp_path, lines)
    snapshots, changes = dumps.partition_snapshots(parsed.rows), dumps.isr_changes(parsed.rows)
    restarts = isr.restarts(dumps.starts(parsed.rows), parsed.first_ts_ms, parsed.last_ts_ms)

    by_partition = isr.catch_up_by_partition(
        restarts, snapshots, isr.isr_timeline(changes), isr.partition_states(snapshots, changes)
    )
    by_start = isr.catch_up_by_start(restarts, by_partition)

    started = T0 + 10_000
    expected_partitions = [
        (3, started, "t", 0, T0 + 11_500, 1500, "rejoined"),
        (3, started, "t", 1, T0 + 13_250, 3250, "rejoined"),
        (3, started, "t", 2, None, None, "not_caught_up"),
        (3, started, "t", 3, None, 0, "stayed_in_isr"),
    ]
    assertDataFrameEqual(
        by_partition, spark.createDataFrame(expected_partitions, by_partition.schema), checkRowOrder=False
    )
    assertDataFrameEqual(by_start, spark.createDataFrame([(3, started, 4, 3, 3250, None)], by_start.schema))
