"""The controller's metadata records (controller/records.py): a snapshot rebuilds the state exactly, a
sequence of changes replays in order, and anything this controller did not write stops the replay."""

import json
import uuid

import pytest

from replog.controller import quorum, records
from replog.controller.cluster import BrokerRegistration, ClusterMetadata
from replog.controller.quorum import QuorumMetadataLog
from replog.controller.records import CorruptMetadataError
from replog.controller.registry import NO_LEADER, LeaderRecoveryState, elect_leader
from replog.raft.config import QuorumConfig


def state() -> ClusterMetadata:
    """Brokers in every state, and topics with leaderless, recovering and ordinary partitions."""
    metadata = ClusterMetadata()
    metadata.brokers[1] = BrokerRegistration(1, "10.0.0.1", 9092, 7, uuid.UUID(int=11), "rack-a")
    metadata.brokers[2] = BrokerRegistration(2, "10.0.0.2", 9092, 9, uuid.UUID(int=12), None, fenced=True)
    metadata.brokers[3] = BrokerRegistration(3, "10.0.0.3", 9093, 12, uuid.UUID(int=13), "rack-b",
                                             in_controlled_shutdown=True)
    metadata.brokers[4] = BrokerRegistration(4, "h4", 1)  # no epoch, no incarnation
    metadata.create_topic("orders", {0: [1, 2], 1: [2, 3], 2: [3, 1]},
                          {"retention.ms": "60000", "unclean.leader.election.enable": "true"})
    metadata.create_topic("solo", {0: [2]}, {})
    metadata.apply([elect_leader(metadata.registration("orders", 1), 3, [3],
                                 leader_recovery_state=LeaderRecoveryState.RECOVERING),
                    elect_leader(metadata.registration("solo", 0), NO_LEADER, [2])])
    return metadata


def replayed(stored: list[dict]) -> tuple[ClusterMetadata, int]:
    metadata = ClusterMetadata()
    epoch = records.replay(json.loads(json.dumps(stored)), metadata)  # records are JSON-ready
    return metadata, epoch


def assert_same(a: ClusterMetadata, b: ClusterMetadata) -> None:
    assert a.brokers == b.brokers
    assert a.topics.keys() == b.topics.keys()
    for name, topic in a.topics.items():
        other = b.topics[name]
        assert (other.topic_id, other.configs, other.partitions) == (topic.topic_id, topic.configs, topic.partitions)
        assert b.topic_by_id(topic.topic_id) is other


def test_a_snapshot_rebuilds_the_state_and_the_controller_epoch():
    original = state()
    snapshot = records.snapshot_records(6, original)
    assert [r["type"] for r in snapshot] == ["controller_epoch"] + ["broker"] * 4 + \
        ["topic"] + ["partition"] * 3 + ["topic", "partition"]
    rebuilt, epoch = replayed(snapshot)
    assert epoch == 6
    assert_same(original, rebuilt)
    recovering = rebuilt.registration("orders", 1)
    assert (recovering.leader, recovering.isr, recovering.leader_recovery_state) == \
        (3, (3,), LeaderRecoveryState.RECOVERING)
    assert (rebuilt.registration("solo", 0).leader, rebuilt.registration("solo", 0).isr) == (NO_LEADER, (2,))
    # A snapshot of the rebuilt state is the same snapshot.
    assert records.snapshot_records(6, rebuilt) == snapshot


async def _open_log(directory) -> tuple[QuorumMetadataLog, list[records.Record]]:
    return await QuorumMetadataLog.open(directory, 3000, QuorumConfig(voters={3000: ("127.0.0.1", 1)}),
                                        "cluster", _no_connections, snapshot_records=list)


async def _no_connections(host: str, port: int):
    raise AssertionError("a quorum of one connects to nobody")


async def test_a_snapshot_survives_the_metadata_log(tmp_path):
    original = state()
    log, _ = await _open_log(tmp_path)
    log.append(records.snapshot_records(2, original)[:3])
    await log.shell.wait_committed(log.next_offset)
    log.compact(records.snapshot_records(2, original))
    await log.close()
    log, logged = await _open_log(tmp_path)
    await log.close()
    rebuilt = ClusterMetadata()
    assert records.replay(logged, rebuilt) == 2
    assert_same(original, rebuilt)


async def test_records_appended_after_the_snapshot_replay_after_it(tmp_path):
    log, _ = await _open_log(tmp_path)
    log.append([records.controller_epoch_record(1)])
    await log.shell.wait_committed(log.next_offset)
    log.compact(records.snapshot_records(2, ClusterMetadata()))
    first = log.append([records.broker_record(BrokerRegistration(1, "h", 1, 3))])
    await log.close()
    log, logged = await _open_log(tmp_path)
    assert log.next_offset > first  # offsets, and so broker epochs, never go back
    await log.close()
    rebuilt = ClusterMetadata()
    records.replay(logged, rebuilt)
    assert rebuilt.brokers == {1: BrokerRegistration(1, "h", 1, 3)}


async def test_records_this_controller_appended_commit_without_being_decoded_again(tmp_path, monkeypatch):
    log, _ = await _open_log(tmp_path)
    committed = []
    log.shell.on_commit = lambda: committed.extend(log.take_committed_records()[1])  # as the controller does
    appended = records.snapshot_records(2, state())
    decoded = []
    original_decode = quorum.decode_record
    monkeypatch.setattr(quorum, "decode_record", lambda data, where: decoded.append(data) or original_decode(data, where))
    log.append(appended)
    await log.shell.wait_committed(log.next_offset)
    await log.close()
    assert committed == appended and decoded == []
    assert all(c is a for c, a in zip(committed, appended, strict=True))
    # What a restart reads is decoded from the log: the same records.
    log, logged = await _open_log(tmp_path)
    await log.close()
    assert logged[-len(appended):] == [original_decode(quorum.encode_record(r), "") for r in appended]


def test_changes_replay_in_order_and_the_last_epoch_wins():
    metadata = ClusterMetadata()
    metadata.brokers[1] = BrokerRegistration(1, "h", 1, 3)
    first = metadata.new_topic("t", {0: [1]}, {})
    leaderless = elect_leader(first.partitions[0], NO_LEADER, [1])
    back = elect_leader(leaderless, 1, [1])
    second = metadata.new_topic("u", {0: [1]}, {})
    again = metadata.new_topic("t", {0: [1]}, {})  # a new topic of an old name: another id
    stored = [records.controller_epoch_record(1), records.broker_record(metadata.brokers[1]),
              *records.new_topic_records(first), records.partition_record(leaderless),
              records.partition_record(back), *records.new_topic_records(second),
              records.controller_epoch_record(2),
              records.broker_record(BrokerRegistration(1, "h", 1, 3, fenced=True)),
              records.remove_topic_record("t"), *records.new_topic_records(again)]
    rebuilt, epoch = replayed(stored)
    assert epoch == 2
    assert rebuilt.brokers[1].fenced
    assert set(rebuilt.topics) == {"t", "u"}
    assert rebuilt.topics["t"].topic_id == again.topic_id != first.topic_id
    assert rebuilt.topic_by_id(first.topic_id) is None
    assert rebuilt.registration("t", 0) == again.partitions[0]


def test_an_empty_log_replays_to_nothing():
    rebuilt, epoch = replayed([])
    assert (epoch, rebuilt.brokers, rebuilt.topics) == (0, {}, {})


def good_records() -> list[dict]:
    metadata = ClusterMetadata()
    metadata.brokers[1] = BrokerRegistration(1, "h", 1, 3)
    topic = metadata.new_topic("t", {0: [1]}, {})
    return [records.broker_record(metadata.brokers[1]), *records.new_topic_records(topic)]


CORRUPT = [
    ("unknown type", lambda rs: rs + [{"type": "quota", "name": "x"}]),
    ("no type", lambda rs: rs + [{"name": "x"}]),
    ("missing field", lambda rs: [{k: v for k, v in rs[0].items() if k != "port"}] + rs[1:]),
    ("bad topic id", lambda rs: rs[:1] + [rs[1] | {"topic_id": "not-a-uuid"}] + rs[2:]),
    ("bad incarnation id", lambda rs: [rs[0] | {"incarnation_id": "nope"}] + rs[1:]),
    ("partition of an unknown topic", lambda rs: rs[:1] + rs[2:]),
    ("topic twice", lambda rs: rs + rs[1:2]),
    ("partition epoch going back", lambda rs: rs + [rs[2] | {"isr": [1]}]),  # same epochs, new state
    ("broken invariant", lambda rs: rs[:2] + [rs[2] | {"leader": 5}]),  # leader outside the ISR
    ("unknown recovery state", lambda rs: rs[:2] + [rs[2] | {"leader_recovery_state": 7}]),
    ("removal of an unknown topic", lambda rs: rs + [records.remove_topic_record("nope")]),
    ("non-integer epoch", lambda rs: [records.controller_epoch_record(1) | {"epoch": "one"}] + rs),
]


@pytest.mark.parametrize("corrupt", [c[1] for c in CORRUPT], ids=[c[0] for c in CORRUPT])
def test_a_record_this_controller_did_not_write_stops_the_replay(corrupt):
    replayed(good_records())  # the records themselves are fine
    with pytest.raises(CorruptMetadataError):
        replayed(corrupt(good_records()))


def test_the_error_names_the_unknown_type():
    with pytest.raises(CorruptMetadataError, match="quota"):
        records.replay([{"type": "quota"}], ClusterMetadata())
