"""kafka-metadata-quorum's `describe --status` and `--replication` from a DescribeQuorum answer, the "quorum"
object of `cluster status --json`, and --bootstrap-controller parsing, without a controller."""

import pytest

from replog.client.quorum_admin import QuorumInfo, ReplicaState, parse_controllers
from replog.cluster_nodes.quorum_report import (
    format_quorum_replication,
    format_quorum_status,
    max_follower_lag,
    quorum_json,
    replication_rows,
)

T = 1_700_000_000_000  # ms since the epoch


def quorum(voters, observers=(), leader_id=3001, epoch=7, high_watermark=40) -> QuorumInfo:
    return QuorumInfo(leader_id, epoch, high_watermark, tuple(ReplicaState(*v) for v in voters),
                      tuple(ReplicaState(*o) for o in observers))


THREE = quorum([(3000, 38, T - 900, T - 500), (3001, 42, T, T), (3002, 42, T - 100, T - 100)],
               observers=[(2, 42, T - 5, T - 5), (1, 30, T - 7, T - 2000)])


@pytest.mark.parametrize(("q", "expected"), [
    # the slowest voter's distance from the leader, and the gap between their last caught-up times
    (THREE, (4, 500)),
    # every voter at the leader's end: no lag, even when the slowest found is not the leader
    (quorum([(3000, 42, T - 9, T - 9), (3001, 42, T, T)]), (0, 0)),
    # a quorum of one: the leader is its own slowest voter
    (quorum([(3001, 42, T, T)]), (0, 0)),
    # a voter that never caught up (-1): the time is unknown, as Kafka prints it
    (quorum([(3000, 0, -1, -1), (3001, 42, T, T)]), (42, -1)),
    # no leader known (an election): nothing to measure against
    (quorum([(3000, 10, T, T), (3001, 42, T, T)], leader_id=-1), (-1, -1)),
    # observers never count: a lagging broker does not make the quorum lag
    (quorum([(3001, 42, T, T)], observers=[(1, 0, -1, -1)]), (0, 0)),
])  # fmt: skip
def test_max_follower_lag_follows_metadata_quorum_command(q, expected):
    assert max_follower_lag(q) == expected


def test_status_prints_kafka_metadata_quorums_fields_in_its_order():
    lines = format_quorum_status(THREE, "cluster-x").splitlines()
    assert [line.split(":", 1)[0] for line in lines] == [
        "ClusterId", "LeaderId", "LeaderEpoch", "HighWatermark", "MaxFollowerLag", "MaxFollowerLagTimeMs",
        "CurrentVoters", "CurrentObservers"]
    assert [line.split()[1] for line in lines] == ["cluster-x", "3001", "7", "40", "4", "500",
                                                  "[3000,3001,3002]", "[1,2]"]
    assert len({line.index(line.split()[1]) for line in lines}) == 1  # values in one column


def test_status_without_a_cluster_id_says_so_with_a_dash():
    assert format_quorum_status(THREE).splitlines()[0].split() == ["ClusterId:", "-"]


def test_replication_lists_the_leader_then_followers_then_observers():
    assert replication_rows(THREE) == [
        ("NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"),
        ("3001", "42", "0", str(T), str(T), "Leader"),
        ("3000", "38", "4", str(T - 900), str(T - 500), "Follower"),
        ("3002", "42", "0", str(T - 100), str(T - 100), "Follower"),
        ("1", "30", "12", str(T - 7), str(T - 2000), "Observer"),
        ("2", "42", "0", str(T - 5), str(T - 5), "Observer"),
    ]
    lines = format_quorum_replication(THREE).splitlines()
    assert lines[0].split() == list(replication_rows(THREE)[0])
    assert lines[1].split() == ["3001", "42", "0", str(T), str(T), "Leader"]


def test_replication_human_readable_says_how_long_ago():
    rows = replication_rows(THREE, now_ms=T + 250)
    assert rows[1][3:5] == ("250 ms ago", "250 ms ago")
    assert rows[2][3:5] == ("1150 ms ago", "750 ms ago")
    unknown = replication_rows(quorum([(3001, 1, -1, -1)]), now_ms=T)
    assert unknown[1][3:5] == ("-1", "-1")
    assert replication_rows(quorum([(3001, 1, T + 5, T + 5)]), now_ms=T)[1][3] == "0 ms ago"  # clock skew


def test_replication_without_a_leader_lists_every_voter_as_a_follower_with_unknown_lag():
    rows = replication_rows(quorum([(3000, 5, T, T), (3001, 6, T, T)], leader_id=-1))
    assert [(r[0], r[2], r[5]) for r in rows[1:]] == [("3000", "-1", "Follower"), ("3001", "-1", "Follower")]


def test_quorum_json_has_the_issues_shape():
    assert quorum_json(THREE) == {
        "leader_id": 3001, "epoch": 7, "high_watermark": 40,
        "voters": [{"id": 3000, "log_end_offset": 38, "lag": 4}, {"id": 3001, "log_end_offset": 42, "lag": 0},
                   {"id": 3002, "log_end_offset": 42, "lag": 0}],
    }
    assert quorum_json(None) is None


@pytest.mark.parametrize(("text", "expected"), [
    ("127.0.0.1:9093", [("127.0.0.1", 9093)]),
    ("a:1, b:2", [("a", 1), ("b", 2)]),
    ("[::1]:9093", [("::1", 9093)]),
])  # fmt: skip
def test_bootstrap_controllers_parse(text, expected):
    assert parse_controllers(text) == expected


@pytest.mark.parametrize("text", ["host", ":9093", "host:", "host:port", "host:0", "host:65536", "a:1,,b:2"])
def test_a_bad_bootstrap_controller_is_refused_naming_it(text):
    with pytest.raises(ValueError, match="is not HOST:PORT"):
        parse_controllers(text)
