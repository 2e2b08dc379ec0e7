"""Table tests of KIP-368's server-side rules (replog.server.reauth): when a request on an authenticated
connection is served, begins re-authentication, is refused or closes the connection; the session lifetime;
what re-authentication must keep; where connections.max.reauth.ms is read from, on brokers and controllers."""

import pytest

from replog.broker.config import config_from_properties
from replog.controller.process import controller_security_fields
from replog.server.listener_security import build_listener_security
from replog.server.reauth import (
    Identity,
    Verdict,
    max_reauth_ms_by_mechanism,
    on_authenticated_request,
    reauth_refusal,
    session_expiry,
)

SERVE, REAUTH, REFUSE, CLOSE = Verdict.SERVE, Verdict.REAUTHENTICATE, Verdict.REFUSE_HANDSHAKE, Verdict.CLOSE_EXPIRED


@pytest.mark.parametrize(("is_handshake", "expires_at", "last_reauth_start", "now", "expected"), [
    # No session lifetime: requests are served forever; a handshake has nothing to re-authenticate.
    (False, None, None, 1e9, SERVE),
    (True, None, None, 100.0, REFUSE),
    # A live session serves requests; at the expiry instant it is still live (Kafka: now - expiry > 0).
    (False, 110.0, None, 105.0, SERVE),
    (False, 110.0, None, 110.0, SERVE),
    (False, 110.0, None, 110.001, CLOSE),
    # A handshake begins re-authentication before or after expiry ...
    (True, 110.0, None, 105.0, REAUTH),
    (True, 110.0, None, 200.0, REAUTH),
    (True, 110.0, 100.0, 101.0, REAUTH),  # one second after the last one began: allowed again
    # ... but not twice within a second: refused while live, the connection closed once expired.
    (True, 110.0, 100.0, 100.5, REFUSE),
    (True, 100.2, 100.0, 100.5, CLOSE),
])
def test_request_on_an_authenticated_connection(is_handshake, expires_at, last_reauth_start, now, expected):
    assert on_authenticated_request(is_handshake=is_handshake, expires_at=expires_at,
                                    last_reauth_start=last_reauth_start, now=now) is expected


@pytest.mark.parametrize(("max_reauth_ms", "now", "expected"), [
    (0, 50.0, (0, None)),  # off: the client is told 0, the session never expires
    (-5, 50.0, (0, None)),
    (3000, 50.0, (3000, 53.0)),
    (1, 0.0, (1, 0.001)),
])
def test_session_expiry(max_reauth_ms, now, expected):
    assert session_expiry(max_reauth_ms, now) == expected


ALICE_SCRAM = Identity("User:alice", "SCRAM-SHA-512")


@pytest.mark.parametrize(("mechanism", "principal", "refused_because"), [
    ("SCRAM-SHA-512", None, None),  # the handshake so far: same mechanism, principal not known yet
    ("SCRAM-SHA-512", "User:alice", None),
    ("SCRAM-SHA-256", None, "SASL mechanism 'SCRAM-SHA-256' requested by client is not supported for "
                            "re-authentication of mechanism 'SCRAM-SHA-512'"),
    ("SCRAM-SHA-512", "User:bob", "Cannot change principals during re-authentication from User:alice: User:bob"),
])
def test_reauthentication_keeps_mechanism_and_principal(mechanism, principal, refused_because):
    assert reauth_refusal(ALICE_SCRAM, mechanism, principal) == refused_because


MECHANISMS = ("PLAIN", "SCRAM-SHA-512")


@pytest.mark.parametrize(("props", "expected"), [
    ({}, {"PLAIN": 0, "SCRAM-SHA-512": 0}),
    ({"connections.max.reauth.ms": "5000"}, {"PLAIN": 5000, "SCRAM-SHA-512": 5000}),
    ({"connections.max.reauth.ms": "5000", "listener.name.sasl_ssl.connections.max.reauth.ms": "4000"},
     {"PLAIN": 4000, "SCRAM-SHA-512": 4000}),
    ({"connections.max.reauth.ms": "5000", "listener.name.sasl_ssl.scram-sha-512.connections.max.reauth.ms": "3000"},
     {"PLAIN": 5000, "SCRAM-SHA-512": 3000}),
    # Another listener's keys do not apply.
    ({"listener.name.other.connections.max.reauth.ms": "4000"}, {"PLAIN": 0, "SCRAM-SHA-512": 0}),
])
def test_max_reauth_ms_most_specific_key_wins(props, expected):
    assert max_reauth_ms_by_mechanism(props, "SASL_SSL", MECHANISMS) == expected


@pytest.mark.parametrize("value", ["-1", "soon", "1.5"])
def test_max_reauth_ms_refuses_a_bad_value_naming_the_key(value):
    with pytest.raises(ValueError, match="listener.name.sasl_ssl.connections.max.reauth.ms"):
        max_reauth_ms_by_mechanism({"listener.name.sasl_ssl.connections.max.reauth.ms": value}, "SASL_SSL",
                                   MECHANISMS)


PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_broker="pw";'


def test_a_brokers_sasl_listener_takes_its_lifetimes_from_the_broker_properties():
    config = config_from_properties({
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256", "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "connections.max.reauth.ms": "9000", "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "7000"})
    assert config.unknown_keys == ()  # every form of the key is known
    sasl_listener = next(s for s in config.listener_specs if s.name == "SASL_PLAINTEXT")
    sasl = build_listener_security(sasl_listener, config.security_props).sasl
    assert (sasl.reauth_ms("PLAIN"), sasl.reauth_ms("SCRAM-SHA-256")) == (7000, 9000)


def test_a_controllers_sasl_listener_takes_its_lifetime_too():
    fields = controller_security_fields({
        "listeners": "CONTROLLER://127.0.0.1:0", "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT",
        "controller.listener.names": "CONTROLLER", "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": PLAIN_JAAS,
        "inter.broker.sasl.username": "broker", "inter.broker.sasl.password": "pw",
        "listener.name.controller.connections.max.reauth.ms": "5000"})
    assert fields["listener_security"].sasl.reauth_ms("PLAIN") == 5000
