"""SASL sans-IO: the PLAIN and SCRAM exchanges against scramp's client, the credential formats, and the
dispatcher's rule that a SASL listener answers nothing but ApiVersions and the SASL exchange before
authentication."""

import base64
import hashlib
import hmac

import pytest
import scramp
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.protocol.apis import ApiKey
from replog.protocol.headers import encode_request_header
from replog.protocol.messages import encode_request
from replog.server.auth import SaslState, Session
from replog.server.credential_store import (
    PropertiesCredentialStore,
    format_scram_credential,
    make_scram_credential,
    parse_plain_jaas_users,
    parse_scram_credential,
    parse_scram_credentials_file,
    scram_credential_line,
)
from replog.server.dispatch import CloseConnection, Dispatcher
from replog.server.sasl import (
    ListenerSasl,
    PlainExchange,
    SaslAuthenticationFailed,
    ScramExchange,
    parse_enabled_mechanisms,
    plain_token,
)

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
STORE = PropertiesCredentialStore(
    {"alice": "alice-secret"},
    {(m, "alice"): make_scram_credential(m, "alice-secret") for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")})


def scram_login(mechanism: str, username: str, password: str, store=STORE):
    """Run a whole SCRAM exchange; the server's verdict, after the client checked the server's signature."""
    client = scramp.ScramClient([mechanism], username, password)
    server = ScramExchange(mechanism, store)
    server_first, done = server.step(client.get_client_first().encode())
    assert done is None
    client.set_server_first(server_first.decode())
    server_final, authenticated = server.step(client.get_client_final().encode())
    client.set_server_final(server_final.decode())  # raises if the server does not know the password
    return authenticated


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_authenticates_a_known_user(mechanism):
    assert scram_login(mechanism, "alice", "alice-secret").principal == "User:alice"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("username, password", [("alice", "wrong"), ("nobody", "alice-secret")])
def test_scram_fails_a_wrong_password_or_unknown_user_alike(mechanism, username, password):
    with pytest.raises(SaslAuthenticationFailed, match=f"invalid credentials with SASL mechanism {mechanism}"):
        scram_login(mechanism, username, password)


def test_scram_credentials_of_one_mechanism_do_not_serve_the_other():
    store = PropertiesCredentialStore({}, {("SCRAM-SHA-256", "bob"): make_scram_credential("SCRAM-SHA-256", "pw")})
    with pytest.raises(SaslAuthenticationFailed):
        scram_login("SCRAM-SHA-512", "bob", "pw", store)


@pytest.mark.parametrize("token", [b"\xff\xfe", b"n,,n=alice,r=" + b"x" * 5000, b"not scram"])
def test_malformed_scram_messages_fail_authentication(token):
    with pytest.raises(SaslAuthenticationFailed):
        ScramExchange("SCRAM-SHA-256", STORE).step(token)


def test_plain_checks_the_users_password_and_grants_no_cluster_action():
    exchange = PlainExchange(STORE, inter_broker_secret="cluster-secret")
    answer, done = exchange.step(plain_token("alice", "alice-secret"))
    assert answer == b"" and done.principal == "User:alice" and not done.cluster_action
    with pytest.raises(SaslAuthenticationFailed):
        exchange.step(plain_token("alice", "cluster-secret"))  # a known user's own password only


def test_plain_with_the_inter_broker_secret_is_the_inter_broker_principal():
    _, done = PlainExchange(STORE, inter_broker_secret="cluster-secret").step(plain_token("broker-2", "cluster-secret"))
    assert done.principal == "User:broker-2" and done.cluster_action
    with pytest.raises(SaslAuthenticationFailed):
        PlainExchange(STORE, inter_broker_secret=None).step(plain_token("broker-2", "cluster-secret"))


@pytest.mark.parametrize("token", [b"alice\0pw", b"\0\0pw", b"other\0alice\0alice-secret", b"\0alice\0\xff"])
def test_malformed_plain_tokens_fail(token):
    with pytest.raises(SaslAuthenticationFailed):
        PlainExchange(STORE, None).step(token)


def test_scram_credential_round_trips_in_kafkas_format():
    credential = make_scram_credential("SCRAM-SHA-512", "pw", iterations=8192)
    text = format_scram_credential(credential)
    assert text.startswith("salt=") and ",stored_key=" in text and text.endswith(",iterations=8192")
    assert parse_scram_credential(text) == credential


@pytest.mark.parametrize("text, message", [
    ("salt=AA==,stored_key=AA==,server_key=AA==", "lacks iterations"),
    ("salt=AA==,stored_key=AA==,server_key=AA==,iterations=10", "outside 4096..16384"),
    ("salt=!!,stored_key=AA==,server_key=AA==,iterations=4096", "not base64"),
])
def test_bad_scram_credentials_are_refused(text, message):
    with pytest.raises(ValueError, match=message):
        parse_scram_credential(text)


def test_credentials_file_lines_name_user_and_mechanism():
    text = f"# users\n{scram_credential_line('alice', 'SCRAM-SHA-256', 'pw')}\n\n"
    assert set(parse_scram_credentials_file(text)) == {("SCRAM-SHA-256", "alice")}
    with pytest.raises(ValueError, match="line 1: unknown mechanism SCRAM-SHA-1"):
        parse_scram_credentials_file("alice SCRAM-SHA-1 salt=AA==")


def test_plain_jaas_users_are_read_from_the_login_module_options():
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-pw" user_admin="admin-pw" user_alice="a \\"quoted\\" pw";')
    assert parse_plain_jaas_users(jaas) == {"admin": "admin-pw", "alice": 'a "quoted" pw'}
    with pytest.raises(ValueError, match="PlainLoginModule"):
        parse_plain_jaas_users('org.apache.kafka.common.security.scram.ScramLoginModule required;')


def test_enabled_mechanisms_refuse_kafkas_gssapi_default_by_name():
    assert parse_enabled_mechanisms("plain, SCRAM-SHA-512") == ("PLAIN", "SCRAM-SHA-512")
    with pytest.raises(ValueError, match="GSSAPI not supported"):
        parse_enabled_mechanisms("GSSAPI")


def frame(api_key: int, version: int, body: dict) -> bytearray:
    return bytearray(encode_request_header(api_key, version, 7, "t") + encode_request(api_key, version, body))


def test_a_sasl_listener_closes_a_connection_that_asks_anything_before_authenticating():
    dispatcher = Dispatcher({ApiKey.METADATA: lambda ctx: [b""], ApiKey.API_VERSIONS: lambda ctx: [b""]},
                            lambda: [])
    session = Session(listener_name="SASL_SSL", sasl=ListenerSasl(MECHANISMS, STORE, required=True))
    metadata = frame(ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                           "include_topic_authorized_operations": False})
    assert dispatcher.dispatch(frame(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                                              "client_software_version": "1"}),
                               "peer", lambda: None, session) is not None
    with pytest.raises(CloseConnection, match="before SASL authentication"):
        dispatcher.dispatch(metadata, "peer", lambda: None, session)
    session.sasl_state = SaslState.AUTHENTICATED
    assert dispatcher.dispatch(metadata, "peer", lambda: None, session) is not None


def test_scram_salt_is_random_per_credential():
    first, second = (make_scram_credential("SCRAM-SHA-256", "pw") for _ in range(2))
    assert base64.b64encode(first.salt) != base64.b64encode(second.salt)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=3), st.sampled_from(MECHANISMS))
def test_any_client_tokens_either_authenticate_or_fail_cleanly(tokens, mechanism):
    """Fuzzing the server side of every mechanism: arbitrary tokens never raise anything but
    SaslAuthenticationFailed, and never authenticate without the password."""
    exchange = ListenerSasl(MECHANISMS, STORE).exchange(mechanism, inter_broker_secret="cluster-secret")
    try:
        for token in tokens:
            _, authenticated = exchange.step(token)
            assert authenticated is None
    except SaslAuthenticationFailed:
        pass


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.sampled_from(("SCRAM-SHA-256", "SCRAM-SHA-512")))
def test_any_scram_client_final_after_a_valid_first_fails_cleanly(final, mechanism):
    exchange = ScramExchange(mechanism, STORE)
    exchange.step(scramp.ScramClient([mechanism], "alice", "alice-secret").get_client_first().encode())
    with pytest.raises(SaslAuthenticationFailed):
        exchange.step(final)


def test_after_a_v0_handshake_frames_are_bare_tokens_answered_bare():
    dispatcher = Dispatcher({}, lambda: [])
    session = Session(sasl_state=SaslState.HANDSHAKE_DONE, exchange=PlainExchange(STORE, None), raw_tokens=True)
    assert dispatcher.dispatch(bytearray(plain_token("alice", "alice-secret")), "peer", lambda: None,
                               session) == [b"\0\0\0\0"]
    assert session.principal == "User:alice" and session.sasl_state is SaslState.AUTHENTICATED
    assert not session.raw_tokens  # later frames are requests again
    failing = Session(sasl_state=SaslState.HANDSHAKE_DONE, exchange=PlainExchange(STORE, None), raw_tokens=True)
    with pytest.raises(CloseConnection, match="SASL authentication failed"):
        dispatcher.dispatch(bytearray(plain_token("alice", "wrong")), "peer", lambda: None, failing)


def old_librdkafka_login(mechanism: str, password: str, repeat: str) -> object:
    """A SCRAM login as librdkafka before 2.6.1 makes it: `repeat` written again before the combined nonce in
    the final message (librdkafka#4895 puts its own nonce there), the proof over the message as sent."""
    digest = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    server = ScramExchange(mechanism, STORE)
    client_nonce = "rdkafkaclientnonce"
    client_first_bare = f"n=alice,r={client_nonce}"
    server_first = server.step(f"n,,{client_first_bare}".encode())[0].decode()
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.digest(salted, b"Client Key", digest)
    stored_key = hashlib.new(digest, client_key).digest()
    without_proof = f"c=biws,r={repeat}{fields['r']}"
    signature = hmac.digest(stored_key, f"{client_first_bare},{server_first},{without_proof}".encode(), digest)
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    return server.step(f"{without_proof},p={proof}".encode())[1]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_old_librdkafka_clients_log_in_as_to_kafka_3(mechanism):
    assert old_librdkafka_login(mechanism, "alice-secret", "rdkafkaclientnonce").principal == "User:alice"
    assert old_librdkafka_login(mechanism, "alice-secret", "").principal == "User:alice"  # RFC 5802's own form
    with pytest.raises(SaslAuthenticationFailed):
        old_librdkafka_login(mechanism, "wrong", "rdkafkaclientnonce")


def test_a_final_nonce_without_the_servers_nonce_at_its_end_fails():
    server = ScramExchange("SCRAM-SHA-256", STORE)
    server.step(b"n,,n=alice,r=clientnonce")
    with pytest.raises(SaslAuthenticationFailed):
        server.step(b"c=biws,r=clientnonce-forged,p=" + base64.b64encode(b"x" * 32))
