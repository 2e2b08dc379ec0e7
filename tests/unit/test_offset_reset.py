"""The pure half of `consumer-groups --reset-offsets`: its argument grammars (java.time.Duration, Kafka's
datetime, T:0,1) and the clamping of new offsets into the log, as kafka-consumer-groups does them."""

from datetime import UTC, datetime, timedelta

import pytest

from replog.client.offset_reset import (
    clamp_offsets,
    parse_datetime_ms,
    parse_duration_ms,
    parse_topic_argument,
    shifted,
)

HOUR_MS = 3_600_000


@pytest.mark.parametrize(("text", "ms"), [
    ("PT1H", HOUR_MS),
    ("PT30M", 30 * 60_000),
    ("PT1.5S", 1_500),
    ("P1D", 24 * HOUR_MS),
    ("P1DT2H3M4S", 24 * HOUR_MS + 2 * HOUR_MS + 3 * 60_000 + 4_000),
    ("pt2h", 2 * HOUR_MS),  # Duration.parse ignores case
    ("-PT1H", -HOUR_MS),
    ("PT-1H30M", -HOUR_MS + 30 * 60_000),
])
def test_durations_read_as_java_time_duration_parse(text, ms):
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "P", "PT", "P1DT", "1H", "PT1X", "P1H", "PT1H junk"])
def test_malformed_durations_are_refused(text):
    with pytest.raises(ValueError, match="ISO-8601 duration"):
        parse_duration_ms(text)


@pytest.mark.parametrize(("text", "utc"), [
    ("2026-01-02T03:04:05.678Z", datetime(2026, 1, 2, 3, 4, 5, 678_000, tzinfo=UTC)),
    ("2026-01-02T03:04:05.678+02:00", datetime(2026, 1, 2, 1, 4, 5, 678_000, tzinfo=UTC)),
    ("2026-01-02T03:04:05+00:00", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
    ("1970-01-01T00:00:01.005Z", datetime(1970, 1, 1, 0, 0, 1, 5_000, tzinfo=UTC)),  # 1.005 * 1000 is 1004.99...
])
def test_datetimes_with_a_zone(text, utc):
    assert parse_datetime_ms(text) == (utc - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


def test_a_datetime_without_a_zone_is_local_time():
    assert parse_datetime_ms("2026-01-02T03:04:05.000") == datetime(2026, 1, 2, 3, 4, 5).timestamp() * 1000


@pytest.mark.parametrize("text", ["yesterday", "2026-13-01T00:00:00", ""])
def test_malformed_datetimes_are_refused(text):
    with pytest.raises(ValueError, match="--to-datetime"):
        parse_datetime_ms(text)


@pytest.mark.parametrize(("text", "parsed"), [
    ("events", ("events", None)),
    ("events:0", ("events", [0])),
    ("events:0,2", ("events", [0, 2])),
])
def test_topic_arguments(text, parsed):
    assert parse_topic_argument(text) == parsed


@pytest.mark.parametrize("text", [":0", "events:", "events:a", "events:0,-1"])
def test_malformed_topic_arguments_are_refused(text):
    with pytest.raises(ValueError, match="invalid --topic"):
        parse_topic_argument(text)


def test_offsets_clamp_into_the_log_with_kafkas_warnings():
    starts = {("t", 0): 10, ("t", 1): 0, ("t", 2): 5}
    ends = {("t", 0): 20, ("t", 1): 7, ("t", 2): 9}
    offsets, warnings = clamp_offsets({("t", 0): 3, ("t", 1): 50, ("t", 2): 6}, starts, ends)
    assert offsets == {("t", 0): 10, ("t", 1): 7, ("t", 2): 6}
    assert warnings == [
        "New offset (3) is lower than earliest offset for topic partition t-0. Value will be set to 10",
        "New offset (50) is higher than latest offset for topic partition t-1. Value will be set to 7",
    ]


def test_shift_moves_committed_offsets_and_refuses_a_partition_without_one():
    assert shifted({("t", 0): 10, ("t", 1): 4}, [("t", 0), ("t", 1)], -3) == {("t", 0): 7, ("t", 1): 1}
    with pytest.raises(ValueError, match="no current committed offset"):
        shifted({("t", 0): 10}, [("t", 0), ("t", 1)], 1)
