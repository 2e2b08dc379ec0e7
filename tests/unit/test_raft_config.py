"""The quorum keys, with Kafka's names and defaults."""

import pytest

from replog.raft.config import QuorumConfigError, parse_voters, quorum_config_from_properties


def test_defaults_are_kafkas():
    config = quorum_config_from_properties({"controller.quorum.voters": "1@localhost:9093,2@h2:9093,3@[::1]:9094"})
    assert dict(config.voters) == {1: ("localhost", 9093), 2: ("h2", 9093), 3: ("::1", 9094)}
    assert (config.election_timeout_ms, config.fetch_timeout_ms, config.election_backoff_max_ms,
            config.request_timeout_ms, config.retry_backoff_ms) == (1000, 2000, 1000, 2000, 20)
    assert config.majority == 2


def test_keys_override_and_bootstrap_servers():
    config = quorum_config_from_properties({
        "controller.quorum.bootstrap.servers": "a:1, b:2",
        "controller.quorum.election.timeout.ms": "300",
        "controller.quorum.fetch.timeout.ms": "600",
        "controller.quorum.election.backoff.max.ms": "50",
        "controller.quorum.request.timeout.ms": "700",
    })
    assert config.bootstrap_servers == (("a", 1), ("b", 2)) and not config.voters
    assert (config.election_timeout_ms, config.fetch_timeout_ms, config.election_backoff_max_ms,
            config.request_timeout_ms) == (300, 600, 50, 700)


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({}, "set controller.quorum.voters or controller.quorum.bootstrap.servers"),
        ({"controller.quorum.voters": "1@a:1,1@b:2"}, "repeated"),
        ({"controller.quorum.voters": "x@a:1"}, "is not id@host:port"),
        ({"controller.quorum.voters": "1@a"}, "is not host:port"),
        ({"controller.quorum.voters": "1@a:1", "controller.quorum.fetch.timeout.ms": "soon"}, "not an integer"),
        ({"controller.quorum.voters": "1@a:1", "controller.quorum.election.timeout.ms": "0"}, "must be positive"),
    ],
)
def test_bad_values_are_refused_naming_the_key(properties, message):
    with pytest.raises(QuorumConfigError, match=message):
        quorum_config_from_properties(properties)


def test_parse_voters_skips_blank_items():
    assert parse_voters(" 1@a:1 , ,2@b:2") == {1: ("a", 1), 2: ("b", 2)}
