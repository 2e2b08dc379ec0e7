from pathlib import Path

import pytest

from replog.broker.config import config_from_properties, load_config
from replog.server.properties import parse_properties


def test_properties_file_and_overrides(tmp_path: Path):
    path = tmp_path / "server.properties"
    path.write_text("# comment\nnode.id=3\nlisteners=PLAINTEXT://127.0.0.1:9999\nlog.dirs=/a,/b\nbogus.key=1\n")
    config = load_config(path, ["node.id=4", "log.retention.hours=1", "socket.request.max.bytes=1000"])
    assert config.node_id == 4
    assert config.listeners[0].port == 9999
    assert config.log_dirs == [Path("/a"), Path("/b")]
    assert config.log_retention_ms == 3600 * 1000
    assert config.socket_request_max_bytes == 1000
    assert config.unknown_keys == ("bogus.key",)


@pytest.mark.parametrize("override", ["num.partitions=abc", "auto.create.topics.enable=maybe",
                                      "listeners=nonsense", "socket.request.max.bytes=0", "novalue"])
def test_bad_values_are_errors(override):
    with pytest.raises(ValueError):
        load_config(None, [override])


def test_properties_parser_accepts_colon_and_rejects_garbage():
    assert parse_properties("a: 1\nb=2=3") == {"a": "1", "b": "2=3"}
    with pytest.raises(ValueError):
        parse_properties("just words")


def test_cluster_membership_keys():
    config = config_from_properties({"controller.quorum.bootstrap.servers": "127.0.0.1:9093",
                                     "inter.broker.secret": "s3cret", "num.replica.fetchers": "2",
                                     "replica.fetch.wait.max.ms": "250"})
    assert config.controller_address == ("127.0.0.1", 9093)
    assert (config.num_replica_fetchers, config.replica_fetch_wait_max_ms) == (2, 250)
    assert config_from_properties({}).controller_address is None
    with pytest.raises(ValueError, match="inter.broker.secret"):
        config_from_properties({"controller.quorum.bootstrap.servers": "127.0.0.1:9093"})
    with pytest.raises(ValueError, match="host:port"):
        config_from_properties({"controller.quorum.bootstrap.servers": "nohost", "inter.broker.secret": "s"})
