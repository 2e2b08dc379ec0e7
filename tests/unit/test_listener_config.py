"""Listeners as Kafka configures them: parsing, the security protocol map, advertised addresses, the
inter-broker listener, and the messages that refuse a misconfigured listener."""

import pytest

from replog.broker.config import config_from_properties
from replog.controller.process import controller_config
from replog.server.listener_config import (
    ListenerSpec,
    SecurityProtocol,
    choose_inter_broker_listener,
    effective_protocol_map,
    parse_protocol_map,
    resolve_listeners,
    resolve_server_listeners,
)
from replog.server.properties import Listener, parse_listeners

P = SecurityProtocol


@pytest.mark.parametrize("value, expected", [
    ("PLAINTEXT://127.0.0.1:9092", [Listener("PLAINTEXT", "127.0.0.1", 9092)]),
    ("SASL_SSL://broker.example:9094", [Listener("SASL_SSL", "broker.example", 9094)]),  # no URL scheme
    ("internal://:9093", [Listener("INTERNAL", "0.0.0.0", 9093)]),  # empty host: every address
    ("SSL://[::1]:0", [Listener("SSL", "::1", 0)]),
    ("A://h:1, B://h:2", [Listener("A", "h", 1), Listener("B", "h", 2)]),
])
def test_listeners_parse(value, expected):
    assert parse_listeners(value) == expected


@pytest.mark.parametrize("value", ["127.0.0.1:9092", "PLAINTEXT://host", "PLAINTEXT://host:99999",
                                   "PLAINTEXT://host:x", ""])
def test_malformed_listeners_are_refused(value):
    with pytest.raises(ValueError):
        parse_listeners(value)


def test_protocol_map_parses_names_case_insensitively():
    assert parse_protocol_map("internal:sasl_ssl, EXTERNAL:SSL") == {"INTERNAL": P.SASL_SSL, "EXTERNAL": P.SSL}


@pytest.mark.parametrize("value, message", [
    ("INTERNAL:TLS", "unknown security protocol 'TLS'"),
    ("INTERNAL", "LISTENER_NAME:SECURITY_PROTOCOL"),
    ("A:SSL,a:PLAINTEXT", "mapped twice"),
])
def test_bad_protocol_maps_are_refused(value, message):
    with pytest.raises(ValueError, match=message):
        parse_protocol_map(value)


def test_default_map_is_kafkas_and_maps_controller_names_to_plaintext():
    default = effective_protocol_map(None, ("CONTROLLER",))
    assert default == {"PLAINTEXT": P.PLAINTEXT, "SSL": P.SSL, "SASL_PLAINTEXT": P.SASL_PLAINTEXT,
                       "SASL_SSL": P.SASL_SSL, "CONTROLLER": P.PLAINTEXT}
    # An explicit map is taken as it is, as Kafka does.
    assert effective_protocol_map({"X": P.SSL}, ("CONTROLLER",)) == {"X": P.SSL}


def test_listeners_resolve_with_protocols_and_advertised_addresses():
    specs = resolve_listeners(parse_listeners("INTERNAL://10.0.0.1:9092,EXTERNAL://0.0.0.0:9093"),
                              parse_listeners("EXTERNAL://kafka.example:443"),
                              {"INTERNAL": P.PLAINTEXT, "EXTERNAL": P.SASL_SSL})
    assert specs == [ListenerSpec("INTERNAL", "10.0.0.1", 9092, P.PLAINTEXT, "10.0.0.1", 9092),
                     ListenerSpec("EXTERNAL", "0.0.0.0", 9093, P.SASL_SSL, "kafka.example", 443)]


@pytest.mark.parametrize("listeners, advertised, message", [
    ("FOO://h:1", None, "listener FOO://h:1 has no security protocol: add FOO:"),
    ("SSL://h:1,SSL://h:2", None, "each listener name may appear once"),
    ("SSL://h:1", "PLAINTEXT://h:2", "advertised.listeners names PLAINTEXT, which is not in listeners"),
])
def test_misconfigured_listeners_are_refused_with_a_clear_message(listeners, advertised, message):
    with pytest.raises(ValueError, match=message):
        resolve_listeners(parse_listeners(listeners), advertised and parse_listeners(advertised),
                          effective_protocol_map(None, ()))


def test_inter_broker_listener_is_the_configured_one_else_plaintext_else_the_first():
    specs = resolve_listeners(parse_listeners("SSL://h:1,PLAINTEXT://h:2"), None, effective_protocol_map(None, ()))
    assert choose_inter_broker_listener(specs, "ssl").name == "SSL"
    assert choose_inter_broker_listener(specs, None).name == "PLAINTEXT"
    assert choose_inter_broker_listener(specs[:1], None).name == "SSL"
    with pytest.raises(ValueError, match="inter.broker.listener.name=OTHER is not one of the listeners"):
        choose_inter_broker_listener(specs, "OTHER")


def test_server_listeners_from_properties():
    specs = resolve_server_listeners({"listeners": "CONTROLLER://h:9", "controller.listener.names": "CONTROLLER"},
                                     "PLAINTEXT://127.0.0.1:9092")
    assert [(s.name, s.protocol) for s in specs] == [("CONTROLLER", P.PLAINTEXT)]


def test_broker_config_refuses_an_ssl_listener_it_cannot_map():
    with pytest.raises(ValueError, match="listener SECURE://127.0.0.1:0 has no security protocol"):
        config_from_properties({"listeners": "SECURE://127.0.0.1:0",
                                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT"})


def test_broker_config_refuses_to_listen_on_the_controllers_listener_name():
    with pytest.raises(ValueError, match="must not contain controller.listener.names"):
        config_from_properties({"listeners": "PLAINTEXT://h:1,CONTROLLER://h:2",
                                "controller.listener.names": "CONTROLLER"})


def test_broker_config_keeps_security_keys_for_the_listeners_and_reports_no_unknown_key():
    config = config_from_properties({"listeners": "SASL_SSL://h:1", "ssl.keystore.location": "/k.pem",
                                     "listener.name.sasl_ssl.plain.sasl.jaas.config": "x",
                                     "sasl.enabled.mechanisms": "PLAIN"})
    assert config.security_props == {"ssl.keystore.location": "/k.pem", "sasl.enabled.mechanisms": "PLAIN",
                                     "listener.name.sasl_ssl.plain.sasl.jaas.config": "x"}
    assert config.unknown_keys == ()
    assert config.advertised == Listener("SASL_SSL", "h", 1)


CLUSTER_MEMBER = {"controller.quorum.bootstrap.servers": "h:2", "inter.broker.secret": "s"}


@pytest.mark.parametrize("listener, mechanisms", [("SASL_PLAINTEXT", "SCRAM-SHA-512"), ("SASL_SSL", "SCRAM-SHA-256")])
def test_a_broker_in_a_cluster_needs_plain_on_a_sasl_inter_broker_listener(listener, mechanisms):
    """The other nodes log in to the inter-broker listener with PLAIN and inter.broker.secret."""
    with pytest.raises(ValueError, match="links between nodes log in with PLAIN"):
        config_from_properties({"listeners": f"{listener}://h:1", "sasl.enabled.mechanisms": mechanisms,
                                "ssl.keystore.location": "/k.pem", **CLUSTER_MEMBER})


@pytest.mark.parametrize("listener, extra", [("SSL", {}), ("SASL_SSL", {"sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN"}),
                                             ("SASL_PLAINTEXT", {"sasl.enabled.mechanisms": "PLAIN"})])
def test_a_broker_in_a_cluster_may_link_to_other_nodes_over_tls_or_sasl(listener, extra):
    config = config_from_properties({"listeners": f"{listener}://h:1", **extra, **CLUSTER_MEMBER})
    assert config.inter_broker_listener.name == listener


CONTROLLER_REQUIRED = {"metadata.log.dir": "/tmp/replog-meta", "inter.broker.secret": "s"}


@pytest.mark.parametrize("names", [{"controller.listener.names": "CONTROLLER"}, {}])
def test_the_controller_serves_its_controller_listener_as_plaintext(names):
    config = controller_config({**CONTROLLER_REQUIRED, "listeners": "CONTROLLER://127.0.0.1:9093", **names})
    assert (config.host, config.port) == ("127.0.0.1", 9093)


@pytest.mark.parametrize("props, message", [
    ({"listeners": "SSL://127.0.0.1:9093"}, "listener SSL \\(SSL\\): a TLS listener needs a key"),
    ({"listeners": "CONTROLLER://127.0.0.1:9093", "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT",
      "sasl.enabled.mechanisms": "SCRAM-SHA-512"}, "a controller cannot offer SCRAM-SHA-512"),
    ({"listeners": "CONTROLLER://127.0.0.1:9093", "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT"},
     "listener CONTROLLER://127.0.0.1:9093 has no security protocol"),
])
def test_the_controller_refuses_a_listener_it_would_serve_wrongly(props, message):
    with pytest.raises(ValueError, match=message):
        controller_config({**CONTROLLER_REQUIRED, **props})


def test_misspelled_security_keys_are_reported_as_unknown():
    config = config_from_properties({"ssl.keystore.locaton": "/k.pem", "listener.name.ssl.ssl.client.auht": "x",
                                     "listener.name.ssl.ssl.client.auth": "required",
                                     "plain.sasl.jaas.config": "x"})  # Kafka reads it per listener only
    assert config.unknown_keys == ("listener.name.ssl.ssl.client.auht", "plain.sasl.jaas.config",
                                   "ssl.keystore.locaton")
    assert config.security_props == {"listener.name.ssl.ssl.client.auth": "required"}
