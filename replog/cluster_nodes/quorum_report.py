"""The metadata quorum as text and JSON: kafka-metadata-quorum's `describe --status` and `--replication`
(MetadataQuorumCommand's fields and rules), and the "quorum" object of `replog cluster status --json`."""

from collections.abc import Sequence

from ..client.quorum_admin import QuorumInfo, ReplicaState


def max_follower_lag(quorum: QuorumInfo) -> tuple[int, int]:
    """(MaxFollowerLag, MaxFollowerLagTimeMs) as MetadataQuorumCommand computes them: the voter with the
    smallest log end offset against the leader; the time is the gap between their last caught-up timestamps,
    0 when the leader is that voter, -1 when a timestamp is unknown (or there is no leader). Unlike Kafka, a
    follower level with the leader also counts 0 ms, where Kafka may subtract timestamps if it picks it."""
    leader = quorum.leader
    if leader is None or not quorum.voters:
        return -1, -1
    slowest = min(quorum.voters, key=lambda v: v.log_end_offset)
    lag = leader.log_end_offset - slowest.log_end_offset
    if slowest.replica_id == leader.replica_id or lag == 0:
        return lag, 0
    if leader.last_caught_up_timestamp < 0 or slowest.last_caught_up_timestamp < 0:
        return lag, -1
    return lag, leader.last_caught_up_timestamp - slowest.last_caught_up_timestamp


def format_quorum_status(quorum: QuorumInfo, cluster_id: str | None = None) -> str:
    lag, lag_ms = max_follower_lag(quorum)
    fields = [
        ("ClusterId", cluster_id or "-"),
        ("LeaderId", str(quorum.leader_id)),
        ("LeaderEpoch", str(quorum.leader_epoch)),
        ("HighWatermark", str(quorum.high_watermark)),
        ("MaxFollowerLag", str(lag)),
        ("MaxFollowerLagTimeMs", str(lag_ms)),
        ("CurrentVoters", _id_list(quorum.voters)),
        ("CurrentObservers", _id_list(quorum.observers)),
    ]
    width = max(len(name) for name, _ in fields) + 2
    return "\n".join(f"{name + ':':<{width}}{value}" for name, value in fields)


def replication_rows(quorum: QuorumInfo, now_ms: int | None = None) -> list[tuple[str, ...]]:
    """The leader first, then the other voters, then the observers, each group by node id (as Kafka orders).
    With now_ms (--human-readable), timestamps read "N ms ago"."""
    followers = sorted((v for v in quorum.voters if v.replica_id != quorum.leader_id), key=lambda r: r.replica_id)
    leader = quorum.leader
    ordered = ([(leader, "Leader")] if leader is not None else []) + [(v, "Follower") for v in followers]
    ordered += [(o, "Observer") for o in sorted(quorum.observers, key=lambda r: r.replica_id)]
    header = ("NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status")
    return [header] + [
        (str(r.replica_id), str(r.log_end_offset), str(quorum.lag(r)), _timestamp(r.last_fetch_timestamp, now_ms),
         _timestamp(r.last_caught_up_timestamp, now_ms), status)
        for r, status in ordered
    ]


def format_quorum_replication(quorum: QuorumInfo, now_ms: int | None = None) -> str:
    return table(replication_rows(quorum, now_ms))


def _timestamp(ms: int, now_ms: int | None) -> str:
    if ms < 0 or now_ms is None:
        return str(ms)
    return f"{max(0, now_ms - ms)} ms ago"  # 0 when the controller's clock runs a little ahead of ours


def quorum_json(quorum: QuorumInfo | None) -> dict | None:
    """The "quorum" object of `cluster status --json` (issue 19); None when no controller leads."""
    if quorum is None:
        return None
    return {
        "leader_id": quorum.leader_id,
        "epoch": quorum.leader_epoch,
        "high_watermark": quorum.high_watermark,
        "voters": [{"id": v.replica_id, "log_end_offset": v.log_end_offset, "lag": quorum.lag(v)}
                   for v in quorum.voters],
    }


def table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows
    )


def _id_list(replicas: Sequence[ReplicaState]) -> str:
    return "[" + ",".join(str(r.replica_id) for r in sorted(replicas, key=lambda r: r.replica_id)) + "]"
