"""The replication throttle (replog.fetcher.replication_quota, Kafka's ReplicationQuotaManager): which
partitions it applies to, and its rate over windows with a fake clock."""

import pytest

from replog.fetcher.replication_quota import ReplicationQuota, throttled_partitions


@pytest.mark.parametrize(("value", "broker", "expected"), [
    ("0:1,1:2,2:1", 1, frozenset({0, 2})),
    ("0:1,1:2,2:1", 2, frozenset({1})),
    ("0:1", 3, frozenset()),
    (" * ", 3, "*"),
    ("", 1, frozenset()),
])
def test_throttled_partitions_of_this_broker(value, broker, expected):
    assert throttled_partitions(value, broker) == expected


def _quota(windows=3, window_ms=1000):
    now = [10_000]
    return ReplicationQuota(lambda: now[0], windows=windows, window_ms=window_ms), now


def test_configure_applies_to_the_listed_partitions_only():
    quota, _ = _quota()
    quota.configure(1000, {"a": {"leader.replication.throttled.replicas": "0:1,1:2"},
                           "b": {"leader.replication.throttled.replicas": "*"}, "c": {}},
                    "leader.replication.throttled.replicas", 1)
    assert quota.is_throttled("a", 0) and not quota.is_throttled("a", 1)
    assert quota.is_throttled("b", 7) and not quota.is_throttled("c", 0)


def test_unlimited_without_a_rate():
    quota, _ = _quota()
    quota.record(10**9)
    assert not quota.is_quota_exceeded()


def test_rate_spans_at_least_windows_minus_one_and_forgets_old_windows():
    quota, now = _quota(windows=3)
    quota.configure(1000, {}, "k", 1)
    quota.record(1500)  # over a minimum span of 2 s: 750 B/s
    assert quota.rate() == 750 and not quota.is_quota_exceeded()
    quota.record(600)  # 2100 B over 2 s
    assert quota.is_quota_exceeded()
    now[0] += 1000
    quota.record(0)
    assert quota.rate() == 1050  # still 2100 B, over 2 s
    now[0] += 2000  # the first window is older than 3 windows: dropped
    assert quota.rate() == 0 and not quota.is_quota_exceeded()


def test_a_steady_rate_reads_as_itself_once_the_windows_fill():
    quota, now = _quota(windows=11)
    for step in range(150):
        quota.record(500)
        now[0] += 100  # 5000 B/s
        if step == 29:  # 3 s in: read over the minimum 10 s span, as Kafka's Rate does
            assert quota.rate() == pytest.approx(1500, rel=0.1)
    assert quota.rate() == pytest.approx(5000, rel=0.1)


def test_time_until_back_under_the_bound():
    quota, now = _quota(windows=3)
    quota.configure(1000, {}, "k", 1)
    assert quota.ms_until_under() == 0
    quota.record(3000)  # over the 2 s minimum span: 1500 B/s; back at 1000 B/s once 3 s have passed
    assert quota.ms_until_under() == 3000
    now[0] += 2000
    assert quota.rate() == 1500 and quota.ms_until_under() == 1000
    now[0] += 999
    assert quota.rate() < 1001 and quota.ms_until_under() == 1


def test_only_a_throttled_replica_out_of_sync_is_held_back_and_only_while_over_the_rate():
    quota, now = _quota(windows=2)
    quota.configure(1000, {"t": {"k": "0:1"}}, "k", 1)
    quota.record_if_throttled("t", 1, 5000)  # not throttled: not counted
    assert not quota.is_quota_exceeded()
    quota.record_if_throttled("t", 0, 5000)
    assert quota.throttles("t", 0, in_sync=False)
    assert not quota.throttles("t", 0, in_sync=True) and not quota.throttles("t", 1, in_sync=False)
    now[0] += 5000
    assert not quota.throttles("t", 0, in_sync=False)
