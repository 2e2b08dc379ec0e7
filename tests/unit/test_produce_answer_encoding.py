"""The Produce handler's answer: the usual one (no leader hints) is hand-encoded, without kio, and is the
same bytes kio writes; a v10 NOT_LEADER_OR_FOLLOWER answer carries KIP-951's hints through kio."""

from kio.schema.errors import ErrorCode

from replog.broker.handlers import produce
from replog.broker.replica_manager import PartitionAppendResult
from replog.log.append_info import AppendInfo
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_response


def appended(first_offset: int, log_start_offset: int) -> PartitionAppendResult:
    return PartitionAppendResult(ErrorCode.none, AppendInfo(first_offset, first_offset + 9, 1000, -1,
                                                            log_start_offset, False, 1, 4096))


class FakeHints:
    """What _LeaderHints gives: partition 1's leader is broker 3 at epoch 8."""

    def __init__(self) -> None:
        self.leaders: set[int] = set()

    def current_leader(self, topic, index):
        self.leaders.add(3)
        return {"leader_id": 3, "leader_epoch": 8}

    def node_endpoints(self):
        return [{"node_id": 3, "host": "127.0.0.1", "port": 9093, "rack": None}]


def count_kio_encodes(monkeypatch) -> list:
    calls = []
    real = produce.encode_response

    def counting(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(produce, "encode_response", counting)
    return calls


def test_the_usual_answer_is_encoded_without_kio_and_reads_back_in_kio(monkeypatch):
    kio_calls = count_kio_encodes(monkeypatch)
    results = {("t", 0): appended(500, 7),
               ("t", 1): PartitionAppendResult(ErrorCode.not_enough_replicas, error_message="ISR of 1 below 2"),
               ("u", 4): appended(0, 0)}
    for version in range(3, 11):
        body = produce._encode(version, results, FakeHints() if version >= 10 else None)
        answer = decode_response(ApiKey.PRODUCE, version, body, 0)
        by_partition = {(t.name, p.index): p for t in answer.responses for p in t.partition_responses}
        assert by_partition.keys() == results.keys()
        assert (by_partition[("t", 0)].base_offset, by_partition[("t", 0)].error_code) == (500, ErrorCode.none)
        assert by_partition[("t", 1)].error_code == ErrorCode.not_enough_replicas
        if version >= 5:
            assert by_partition[("t", 0)].log_start_offset == 7
        if version >= 8:
            assert by_partition[("t", 1)].error_message == "ISR of 1 below 2"
    assert kio_calls == []


def test_a_not_leader_answer_from_v10_names_the_current_leader_and_its_endpoint(monkeypatch):
    kio_calls = count_kio_encodes(monkeypatch)
    results = {("t", 0): appended(500, 7), ("t", 1): PartitionAppendResult(ErrorCode.not_leader_or_follower)}
    answer = decode_response(ApiKey.PRODUCE, 10, produce._encode(10, results, FakeHints()), 0)
    partitions = {p.index: p for p in answer.responses[0].partition_responses}
    assert (partitions[1].current_leader.leader_id, partitions[1].current_leader.leader_epoch) == (3, 8)
    assert partitions[0].current_leader.leader_id == -1  # only the refused partition carries a hint
    assert [(n.node_id, n.port) for n in answer.node_endpoints] == [(3, 9093)]
    assert len(kio_calls) == 1
