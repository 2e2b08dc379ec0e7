import resource
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
                                      "listeners=nonsense", "socket.request.max.bytes=0", "novalue",
                                      "fetch.max.bytes=1023"])
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


def test_log_cleaner_keys_reach_the_cleaner_and_the_topic_defaults():
    config = load_config(None, ["log.cleaner.threads=2", "log.cleaner.backoff.ms=500", "log.cleaner.enable=false",
                                "log.cleaner.dedupe.buffer.size=4194304", "log.cleaner.min.cleanable.ratio=0.25",
                                "log.cleaner.delete.retention.ms=1000", "log.cleanup.policy=compact"])
    cleaner = config.cleaner_config()
    assert (cleaner.threads, cleaner.backoff_ms, cleaner.enable, cleaner.dedupe_buffer_size) == (2, 500, False, 4 << 20)
    log_config = config.log_config()
    assert (log_config.min_cleanable_dirty_ratio, log_config.delete_retention_ms) == (0.25, 1000)
    assert log_config.compact and not log_config.delete
    defaults = load_config(None, [])
    assert (defaults.cleaner_config().threads, defaults.cleaner_config().backoff_ms) == (1, 15_000)
    assert defaults.log_config().cleanup_policy == "delete"


@pytest.mark.parametrize("override", ["log.cleaner.threads=0", "log.cleaner.min.cleanable.ratio=2",
                                      "log.cleanup.policy=shred", "log.cleaner.dedupe.buffer.size=10"])
def test_bad_log_cleaner_values_are_errors(override):
    with pytest.raises(ValueError):
        load_config(None, [override])


def test_log_open_files_max_defaults_to_half_the_open_file_limit_and_refuses_a_tiny_budget():
    soft_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert config_from_properties({}).file_budget().max_open_files == max(64, soft_limit // 2)
    assert config_from_properties({"log.open.files.max": "500"}).file_budget().max_open_files == 500
    with pytest.raises(ValueError, match="log.open.files.max"):
        load_config(None, ["log.open.files.max=10"])
