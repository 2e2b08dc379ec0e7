"""`replog controller start`'s quorum keys (controller/process.py): Kafka's names and defaults, and the
quorums a controller refuses to run."""

import pytest

from replog.controller.process import controller_config

BASE = {"metadata.log.dir": "/tmp/m", "inter.broker.secret": "s", "node.id": "3000",
        "listeners": "CONTROLLER://127.0.0.1:9093"}


def test_without_quorum_keys_the_controller_is_a_quorum_of_itself():
    assert controller_config(BASE).quorum is None


def test_the_quorum_keys_take_kafkas_names_and_defaults():
    config = controller_config(BASE | {"controller.quorum.voters": "3000@127.0.0.1:9093",
                                       "controller.quorum.election.timeout.ms": "500"})
    assert config.quorum.voters == {3000: ("127.0.0.1", 9093)}
    assert (config.quorum.election_timeout_ms, config.quorum.fetch_timeout_ms,
            config.quorum.election_backoff_max_ms, config.quorum.request_timeout_ms) == (500, 2000, 1000, 2000)


@pytest.mark.parametrize(("overrides", "message"), [
    ({"controller.quorum.voters": "3001@127.0.0.1:9093"}, "node.id 3000 is not among the voters"),
    ({"controller.quorum.voters": "3000@h:1,3001@h:2,3002@h:3"}, "voter 3000 at port 1, but its listener is on 9093"),
    ({"controller.quorum.voters": "3000@h"}, "controller.quorum.voters: 'h' is not host:port"),
    ({"controller.quorum.voters": "3000@h:1", "controller.quorum.fetch.timeout.ms": "soon"},
     "controller.quorum.fetch.timeout.ms: 'soon' is not an integer"),
    ({"controller.quorum.voters": "3000@h:1", "controller.quorum.election.timeout.ms": "0"},
     "controller.quorum.election.timeout.ms must be positive"),
])
def test_a_quorum_this_controller_cannot_run_is_refused_naming_the_key(overrides, message):
    with pytest.raises(ValueError, match=message):
        controller_config(BASE | overrides)


def test_several_voters_make_this_controller_one_of_a_quorum():
    config = controller_config(BASE | {"controller.quorum.voters": "3000@127.0.0.1:9093,3001@h:2,3002@h:3"})
    assert config.quorum.voters == {3000: ("127.0.0.1", 9093), 3001: ("h", 2), 3002: ("h", 3)}


def test_an_unknown_quorum_key_is_reported(capsys):
    controller_config(BASE | {"controller.quorum.voterz": "3000@h:1"})
    assert "unknown controller config key 'controller.quorum.voterz' ignored" in capsys.readouterr().err


def test_quorum_timeouts_without_voters_configure_the_quorum_of_this_controller_alone():
    config = controller_config(BASE | {"controller.quorum.election.timeout.ms": "700"})
    assert (config.quorum.voters, config.quorum.election_timeout_ms) == ({3000: ("127.0.0.1", 9093)}, 700)
