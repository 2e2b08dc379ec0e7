"""Pure parts of the cluster view, the error table, and the CLI argument handling."""

import pytest

from replog.cli import build_parser
from replog.cli_clients import properties
from replog.client.cluster import metadata_request, parse_bootstrap, snapshot_from_metadata
from replog.client.errors import KafkaError, is_retriable
from replog.protocol import messages
from replog.protocol.apis import ApiKey


def test_parse_bootstrap():
    assert parse_bootstrap("a:1, b:2") == [("a", 1), ("b", 2)]
    assert parse_bootstrap(["[::1]:9092"]) == [("::1", 9092)]
    for bad in ("", "host", "host:port", "host:99999", "host:0"):
        with pytest.raises(ValueError):
            parse_bootstrap(bad)


@pytest.mark.parametrize("version", [1, 4, 7, 9, 10, 12])
def test_metadata_request_and_response_for_every_version(version):
    assert messages.encode_request(ApiKey.METADATA, version, metadata_request(["t"], False))
    assert messages.encode_request(ApiKey.METADATA, version, metadata_request(None, False))
    body = {
        "throttle_time": 0,
        "brokers": [{"node_id": 1, "host": "h", "port": 9092, "rack": None}],
        "cluster_id": "c",
        "controller_id": 1,
        "topics": [
            {
                "error_code": 0,
                "name": "t",
                "topic_id": None,
                "partitions": [
                    {"error_code": 0, "partition_index": 0, "leader_id": 1, "leader_epoch": 4,
                     "replica_nodes": [1, 2], "isr_nodes": [1], "offline_replicas": [2]},
                ],
            }
        ],
    }  # fmt: skip
    encoded = messages.encode_response(ApiKey.METADATA, version, body)
    snapshot = snapshot_from_metadata(messages.decode_response(ApiKey.METADATA, version, encoded, 0))
    assert snapshot.brokers[1].port == 9092
    p = snapshot.topics["t"].partitions[0]
    assert (p.leader, p.replicas, p.isr) == (1, (1, 2), (1,))
    assert p.leader_epoch == (4 if version >= 7 else -1)
    assert p.offline == ((2,) if version >= 5 else ())


def test_error_retriability_follows_kafka():
    for code in (3, 5, 6, 7, 13, 19, 20, 56, 74, 75):
        assert is_retriable(code), code
    for code in (1, 10, 35, 36, 45, 46, 87, 9999):
        assert not is_retriable(code), code
    error = KafkaError(6, "t-0")
    assert error.name == "NOT_LEADER_OR_FOLLOWER"
    assert "t-0" in str(error)


def test_cli_properties_and_flags():
    assert properties(["parse.key=true", "key.separator=:"]) == {"parse.key": "true", "key.separator": ":"}
    with pytest.raises(ValueError):
        properties(["novalue"])
    args = build_parser().parse_args(
        ["consume", "t", "--bootstrap-server", "h:1", "--partition", "0", "--offset", "5"]
    )
    assert (args.topic, args.partition, args.offset) == ("t", 0, 5)
    args = build_parser().parse_args(["produce", "t", "--bootstrap-server", "h:1", "--acks", "1"])
    assert (args.acks, args.compression_type) == ("1", "none")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["consume", "t", "--bootstrap-server", "h:1", "--offset", "-3"])
