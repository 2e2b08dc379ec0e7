"""The quorum-state file: Kafka's JSON, atomic writes, and clear refusals of a corrupt file or changed voters."""

import json

import pytest

from replog.raft.quorum_state_file import (
    CorruptQuorumStateError,
    ElectionState,
    QuorumStateFile,
    VoterSetMismatchError,
    check_voters,
)

VOTERS = frozenset({1, 2, 3})


def test_round_trip_in_kafkas_format(tmp_path):
    store = QuorumStateFile(tmp_path / "quorum-state")
    assert store.read() is None  # a new node
    store.write(ElectionState(7, None, 2, VOTERS))
    assert store.read() == ElectionState(7, None, 2, VOTERS)
    document = json.loads((tmp_path / "quorum-state").read_text())
    assert document == {"clusterId": "", "leaderId": -1, "leaderEpoch": 7, "votedId": 2, "appliedOffset": 0,
                        "currentVoters": [{"voterId": 1}, {"voterId": 2}, {"voterId": 3}], "data_version": 0}
    store.write(ElectionState(8, 3, None, VOTERS))
    assert store.read() == ElectionState(8, 3, None, VOTERS)
    assert not (tmp_path / "quorum-state.tmp").exists()


def test_a_failed_write_leaves_the_previous_state(tmp_path):
    def crash_before_rename(path, data):
        (path.with_name(path.name + ".tmp")).write_bytes(data[:5])
        raise OSError("power loss")

    QuorumStateFile(tmp_path / "quorum-state").write(ElectionState(3, None, 1, VOTERS))
    failing = QuorumStateFile(tmp_path / "quorum-state", write=crash_before_rename)
    with pytest.raises(OSError):
        failing.write(ElectionState(4, None, 2, VOTERS))
    assert failing.read() == ElectionState(3, None, 1, VOTERS)


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{not json",
        b'{"leaderEpoch": 1}',
        b'{"leaderId": -1, "leaderEpoch": -2, "votedId": -1, "currentVoters": [], "data_version": 0}',
        b'{"leaderId": 1, "leaderEpoch": 2, "votedId": 3, "currentVoters": [], "data_version": 0}',
        b'{"leaderId": "1", "leaderEpoch": 2, "votedId": -1, "currentVoters": [], "data_version": 0}',
        b'{"leaderId": -1, "leaderEpoch": 2, "votedId": -1, "currentVoters": [], "data_version": 9}',
        b"\x00" * 100,  # a torn write that left zeros
    ],
)
def test_a_corrupt_file_is_refused_naming_it(tmp_path, content):
    path = tmp_path / "quorum-state"
    path.write_bytes(content)
    with pytest.raises(CorruptQuorumStateError, match=str(path)):
        QuorumStateFile(path).read()


def test_changed_voters_are_refused():
    check_voters(None, VOTERS, "f")
    check_voters(ElectionState(1, None, None, frozenset()), VOTERS, "f")  # no voters saved: nothing to compare
    check_voters(ElectionState(1, None, None, VOTERS), VOTERS, "f")
    with pytest.raises(VoterSetMismatchError, match=r"f: configured controller.quorum.voters \[1, 2, 4\]"):
        check_voters(ElectionState(1, None, None, VOTERS), frozenset({1, 2, 4}), "f")
