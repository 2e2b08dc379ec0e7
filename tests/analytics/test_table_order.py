"""The order a table's rows are listed in (CSV, plots, report): Spark's ascending order, nulls first, sorted
on the driver since a table is a small aggregate."""

from replog.analytics.pipeline import sort_key


def test_rows_sort_by_each_column_in_turn_with_nulls_first():
    rows = [
        {"topic": "b", "partition": 0},
        {"topic": None, "partition": 5},
        {"topic": "a", "partition": None},
        {"topic": "a", "partition": 2},
        {"topic": "a", "partition": 10},
        {"topic": "é", "partition": 0},
        {"topic": "z", "partition": 0},
    ]

    ordered = sorted(rows, key=lambda row: sort_key(row, ("topic", "partition")))

    assert [(row["topic"], row["partition"]) for row in ordered] == [
        (None, 5),
        ("a", None),
        ("a", 2),
        ("a", 10),
        ("b", 0),
        ("z", 0),
        ("é", 0),  # UTF-8 byte order, as Spark compares strings
    ]


def test_a_table_without_an_order_keeps_its_rows_as_they_are():
    rows = [{"n": 2}, {"n": 1}]
    assert sorted(rows, key=lambda row: sort_key(row, ())) == rows
