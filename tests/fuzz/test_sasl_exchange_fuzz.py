"""Fuzz the SASL exchange in process: random sequences of SaslHandshake and SaslAuthenticate (random, garbled
and oversized tokens, SCRAM messages with a wrong nonce or proof, any order), other requests and bare v0
tokens, through the real Dispatcher and the real SASL handlers, on a SASL listener whose sessions expire
(KIP-368), so re-authentication is fuzzed too.

Each step must end in an answer that decodes with an error code Kafka uses for it, or in CloseConnection (the
connection closes); nothing else may escape. Nobody is authenticated without the password: the session's
principal changes only through a genuine login, and a re-authentication never changes it.
"""

import asyncio
import os
from datetime import timedelta

import pytest
import scramp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey, response_header_version
from replog.protocol.headers import decode_response_header, encode_request_header
from replog.protocol.messages import decode_response, encode_request
from replog.server.auth import ANONYMOUS, SaslState, Session
from replog.server.credential_store import PropertiesCredentialStore, make_scram_credential
from replog.server.dispatch import CloseConnection, Dispatcher
from replog.server.handlers import shared_handlers
from replog.server.sasl import MAX_SASL_TOKEN_BYTES, ListenerSasl, plain_token

EXAMPLES = int(os.environ.get("REPLOG_FUZZ_EXAMPLES", "300"))
FUZZ_SETTINGS = settings(max_examples=EXAMPLES, deadline=timedelta(milliseconds=2000), derandomize=True,
                         suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
PASSWORD = "alice-secret"
STORE = PropertiesCredentialStore(
    {"alice": PASSWORD},
    {(m, "alice"): make_scram_credential(m, PASSWORD, iterations=4096) for m in MECHANISMS[1:]})
LISTENER = ListenerSasl(MECHANISMS, STORE, required=True, max_reauth_ms=tuple((m, 60_000) for m in MECHANISMS))
SERVED = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.METADATA})
HANDLERS = shared_handlers(SERVED, inter_broker_secret=None)
HANDLERS[ApiKey.METADATA] = lambda ctx: []  # stands for any request past authentication
DISPATCHER = Dispatcher(HANDLERS, lambda: [])
# What Kafka answers in each API when the exchange goes wrong (else the connection closes).
ALLOWED_ERRORS = {
    ApiKey.SASL_HANDSHAKE: {ErrorCode.none, ErrorCode.unsupported_sasl_mechanism, ErrorCode.illegal_sasl_state},
    ApiKey.SASL_AUTHENTICATE: {ErrorCode.none, ErrorCode.sasl_authentication_failed, ErrorCode.illegal_sasl_state},
    ApiKey.API_VERSIONS: {ErrorCode.none},
}


class Login:
    """The client side of a SCRAM exchange, honest or not."""

    def __init__(self) -> None:
        self.scram: scramp.ScramClient | None = None
        self.mechanism: str | None = None

    def server_said(self, message: bytes) -> None:
        """Take the server's first or final message, as far as the client's stage allows."""
        assert self.scram is not None
        for take in (self.scram.set_server_first, self.scram.set_server_final):
            try:
                take(message.decode())
                return
            except (scramp.ScramException, UnicodeDecodeError):
                continue


def frame(api_key: int, version: int, body: dict | bytes, correlation_id: int = 1) -> bytearray:
    payload = body if isinstance(body, bytes) else encode_request(api_key, version, body)
    return bytearray(encode_request_header(api_key, version, correlation_id, "fuzz") + payload)


def scram_token(login: Login, mechanism: str, corruption: str, rng_bytes: bytes) -> bytes:
    """The next honest SCRAM message, or one with its nonce or proof damaged."""
    if login.scram is None or login.mechanism != mechanism:
        login.scram, login.mechanism = scramp.ScramClient([mechanism], "alice", PASSWORD), mechanism
        return login.scram.get_client_first().encode()
    try:
        message = login.scram.get_client_final()
    except scramp.ScramException:
        return rng_bytes
    if corruption == "nonce":  # the last character of the combined nonce, which is the server's part
        head, _, rest = message.partition(",r=")
        nonce, _, tail = rest.partition(",")
        message = f"{head},r={nonce[:-1]}{'A' if nonce[-1] != 'A' else 'B'},{tail}"
    elif corruption == "proof":
        head, _, proof = message.rpartition(",p=")
        message = f"{head},p={proof[::-1]}"
    return message.encode()


STEP = st.one_of(
    st.tuples(st.just("handshake"), st.sampled_from([*MECHANISMS, "GSSAPI", "", "plain", "SCRAM-SHA-1"]),
              st.sampled_from([0, 1])),
    st.tuples(st.just("authenticate"), st.sampled_from(["random", "oversized", "plain-good", "plain-bad",
                                                        "scram", "scram-nonce", "scram-proof"]),
              st.binary(max_size=64)),
    st.tuples(st.just("request"), st.sampled_from([ApiKey.METADATA, ApiKey.API_VERSIONS]), st.none()),
    st.tuples(st.just("raw token"), st.none(), st.binary(max_size=64)),
)


def run_step(session: Session, login: Login, step: tuple, closed: list) -> bytes | None:
    """One request through the dispatcher; its response frame, or None when the dispatcher closes the
    connection at once. A handler that closes it after its answer appends to `closed` on the next loop turn."""
    kind, choice, data = step
    if kind == "handshake":
        request = frame(ApiKey.SASL_HANDSHAKE, data, {"mechanism": choice})
    elif kind == "authenticate":
        mechanism = session.mechanism or "PLAIN"
        if choice == "random":
            token = data
        elif choice == "oversized":
            token = data * (MAX_SASL_TOKEN_BYTES // max(1, len(data)) + 1) or b"x" * (MAX_SASL_TOKEN_BYTES + 1)
        elif choice == "plain-good":
            token = plain_token("alice", PASSWORD)
        elif choice == "plain-bad":
            token = plain_token("alice", data.decode(errors="replace") or "x")
        else:
            token = scram_token(login, mechanism if mechanism != "PLAIN" else "SCRAM-SHA-256",
                                choice.removeprefix("scram").lstrip("-"), data)
        request = frame(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
    elif kind == "request":
        body = ({"client_software_name": "f", "client_software_version": "1"} if choice == ApiKey.API_VERSIONS
                else {"topics": None, "allow_auto_topic_creation": False,
                      "include_topic_authorized_operations": False})
        request = frame(choice, 3 if choice == ApiKey.API_VERSIONS else 12, body)
    else:
        request = bytearray(data)
    raw = session.raw_tokens
    try:
        parts = DISPATCHER.dispatch(request, "fuzz", lambda: closed.append(step), session)
    except CloseConnection:
        return None
    if raw or parts is None:
        return b"".join(bytes(p) for p in parts or [])
    response = b"".join(bytes(p) for p in parts)[4:]
    api_key, version = request_ids(request)
    if api_key not in ALLOWED_ERRORS:
        return response  # the stand-in for requests past authentication answers an empty body
    _, offset = decode_response_header(response, response_header_version(api_key, version))
    answer = decode_response(api_key, version, response, offset)
    assert answer.error_code in ALLOWED_ERRORS[api_key], (step, answer)
    if kind == "authenticate" and answer.error_code == ErrorCode.none and login.scram is not None:
        login.server_said(bytes(answer.auth_bytes))
    return response


def request_ids(request: bytearray) -> tuple[int, int]:
    return int.from_bytes(request[:2], "big"), int.from_bytes(request[2:4], "big")


async def run_sequence(steps: list[tuple]) -> None:
    session = Session(listener_name="SASL_PLAINTEXT", sasl=LISTENER)
    login = Login()
    honest = {"plain-good", "scram"}
    closed: list = []
    for step in steps:
        before = session.principal
        response = run_step(session, login, step, closed)
        await asyncio.sleep(0)  # the handlers' call_soon(close) runs here, as after a write
        if session.principal != before:
            assert session.principal == "User:alice" and step[0] in ("authenticate", "raw token"), step
            assert step[0] == "raw token" or step[1] in honest, step
            assert before == ANONYMOUS  # re-authentication keeps the principal
        if response is None or closed:
            return  # closed: nothing more on this connection
        if session.sasl_state is not SaslState.AUTHENTICATED:
            assert session.principal == ANONYMOUS or session.reauthenticating is not None


# Honest logins to start from, so that re-authentication and requests after authentication are reached.
LOGINS = (
    [],
    [("handshake", "PLAIN", 1), ("authenticate", "plain-good", b"")],
    [("handshake", "SCRAM-SHA-512", 1), ("authenticate", "scram", b""), ("authenticate", "scram", b"")],
)


@FUZZ_SETTINGS
@given(login=st.sampled_from(LOGINS), steps=st.lists(STEP, min_size=1, max_size=8))
def test_random_sasl_sequences_answer_kafkas_errors_or_close(login, steps):
    asyncio.run(run_sequence([*login, *steps]))


@pytest.mark.parametrize("mechanism", MECHANISMS[1:])
@pytest.mark.parametrize("corruption", ["nonce", "proof"])
def test_scram_with_a_bad_nonce_or_proof_fails_authentication(mechanism, corruption):
    async def scenario() -> None:
        session, login, closed = Session(listener_name="SASL_PLAINTEXT", sasl=LISTENER), Login(), []
        assert run_step(session, login, ("handshake", mechanism, 1), closed) is not None
        assert run_step(session, login, ("authenticate", "scram", b""), closed) is not None
        response = run_step(session, login, ("authenticate", f"scram-{corruption}", b""), closed)
        assert response is not None and session.principal == ANONYMOUS
        await asyncio.sleep(0)
        assert closed  # and the connection is closed after the answer
        _, offset = decode_response_header(response, response_header_version(ApiKey.SASL_AUTHENTICATE, 2))
        answer = decode_response(ApiKey.SASL_AUTHENTICATE, 2, response, offset)
        assert answer.error_code == ErrorCode.sasl_authentication_failed

    asyncio.run(scenario())
