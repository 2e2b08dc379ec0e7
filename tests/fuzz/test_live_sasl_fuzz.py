"""The SASL exchange fuzzed against a real broker process on a SASL_PLAINTEXT listener whose sessions expire
(KIP-368): per connection a random script of SaslHandshake and SaslAuthenticate requests (random, garbled and
oversized tokens, SCRAM messages with a bad nonce or proof, Authenticate before Handshake, a request before
authentication, bare v0 tokens, mutated SASL frames, re-authentication after a login).

Each request must be answered within RESPONSE_BOUND_S with a response carrying an error Kafka uses there
(ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM) or the connection closed. An
authenticated bystander connection is served throughout; afterwards the process is alive, wrote no
traceback, and a fresh client logs in and is answered.

REPLOG_LIVE_SASL_FUZZ_SCRIPTS sets the number of scripts (CI: 200), REPLOG_LIVE_FUZZ_SEED the seed.
"""

import os
import random
import socket

import pytest
import scramp
from kio.schema.errors import ErrorCode

from replog.harness.broker_process import BrokerProcess
from replog.protocol.apis import ApiKey, response_header_version
from replog.protocol.frames import size_prefix
from replog.protocol.headers import decode_response_header, encode_request_header
from replog.protocol.messages import decode_response, encode_request
from replog.server.credential_store import scram_credential_line
from tests.fuzz.corpus import apply_mutations, random_mutations

SCRIPTS = int(os.environ.get("REPLOG_LIVE_SASL_FUZZ_SCRIPTS", "200"))
SEED = int(os.environ.get("REPLOG_LIVE_FUZZ_SEED", "20261124"))
RESPONSE_BOUND_S = 5.0
HOST = "127.0.0.1"
USERS = {"alice": "alice-secret"}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SASL_MAX_RECEIVE_BYTES = 524_288  # the broker's limit before authentication
ANSWERS = {
    ApiKey.SASL_HANDSHAKE: {ErrorCode.none, ErrorCode.unsupported_sasl_mechanism, ErrorCode.illegal_sasl_state},
    ApiKey.SASL_AUTHENTICATE: {ErrorCode.none, ErrorCode.sasl_authentication_failed, ErrorCode.illegal_sasl_state},
    ApiKey.API_VERSIONS: {ErrorCode.none},
    ApiKey.METADATA: {ErrorCode.none},
}
METADATA = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    root = tmp_path_factory.mktemp("sasl-fuzz")
    scram_file = root / "scram-credentials"
    scram_file.write_text("".join(f"{scram_credential_line(user, m, password)}\n"
                                  for user, password in USERS.items() for m in MECHANISMS[1:]))
    jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            + " ".join(f'user_{user}="{password}"' for user, password in USERS.items()) + ";")
    process = BrokerProcess(root / "logs", output=root / "broker.out", overrides={
        "socket.request.max.bytes": str(1 << 20), "auto.create.topics.enable": "false"})
    process.overrides.update({
        "listeners": f"PLAINTEXT://{HOST}:{process.port},SASL_PLAINTEXT://{HOST}:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "sasl.scram.credentials.file": str(scram_file),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "listener.name.sasl_plaintext.connections.max.reauth.ms": "60000",
    })
    process.start()
    try:
        yield process
    finally:
        process.stop()


class FuzzConnection:
    """A raw connection that sends one request at a time and says how it ended."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection((HOST, port), timeout=RESPONSE_BOUND_S)
        self.correlation_id = 0
        self.closed = False

    def close(self) -> None:
        self.sock.close()

    def send_frame(self, payload: bytes) -> bytes | None:
        """The answer frame, or None once the broker has closed the connection."""
        try:
            self.sock.sendall(size_prefix(len(payload)) + payload)
            head = self._exactly(4)
            return None if head is None else self._exactly(int.from_bytes(head, "big"))
        except (BrokenPipeError, ConnectionResetError):
            return None
        except TimeoutError:
            pytest.fail(f"no answer and no close within {RESPONSE_BOUND_S}s after {payload[:64].hex()}")

    def _exactly(self, n: int) -> bytes | None:
        chunks = []
        while n:
            chunk = self.sock.recv(min(n, 1 << 16))
            if not chunk:
                return None
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def call(self, api_key: int, version: int, body: bytes):
        """The decoded answer (its error code checked against Kafka's for the API), or None once closed."""
        self.correlation_id += 1
        answer = self.send_frame(encode_request_header(api_key, version, self.correlation_id, "fuzz") + body)
        if answer is None:
            self.closed = True
            return None
        got, offset = decode_response_header(answer, response_header_version(api_key, version))
        assert got == self.correlation_id
        response = decode_response(api_key, version, answer, offset)
        if hasattr(response, "error_code"):
            assert response.error_code in ANSWERS[api_key], (ApiKey(api_key).name, response)
        return response


def authenticate_body(token: bytes) -> bytes:
    return encode_request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})


def handshake_body(mechanism: str) -> bytes:
    return encode_request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})


def honest_login(conn: FuzzConnection, mechanism: str) -> bool:
    handshake = conn.call(ApiKey.SASL_HANDSHAKE, 1, handshake_body(mechanism))
    if handshake is None or handshake.error_code != ErrorCode.none:
        return False
    if mechanism == "PLAIN":
        answer = conn.call(ApiKey.SASL_AUTHENTICATE, 2, authenticate_body(b"\0alice\0" + USERS["alice"].encode()))
        return answer is not None and answer.error_code == ErrorCode.none
    client = scramp.ScramClient([mechanism], "alice", USERS["alice"])
    first = conn.call(ApiKey.SASL_AUTHENTICATE, 2, authenticate_body(client.get_client_first().encode()))
    if first is None or first.error_code != ErrorCode.none:
        return False
    client.set_server_first(bytes(first.auth_bytes).decode())
    final = conn.call(ApiKey.SASL_AUTHENTICATE, 2, authenticate_body(client.get_client_final().encode()))
    return final is not None and final.error_code == ErrorCode.none


def damaged_scram_login(conn: FuzzConnection, mechanism: str, rng: random.Random) -> None:
    """A SCRAM exchange whose final message has a wrong nonce, a wrong proof, or random bit flips."""
    handshake = conn.call(ApiKey.SASL_HANDSHAKE, 1, handshake_body(mechanism))
    if handshake is None or handshake.error_code != ErrorCode.none:
        return
    client = scramp.ScramClient([mechanism], "alice", USERS["alice"])
    first = conn.call(ApiKey.SASL_AUTHENTICATE, 2, authenticate_body(client.get_client_first().encode()))
    if first is None or first.error_code != ErrorCode.none:
        return  # e.g. a re-authentication with another mechanism than the login's
    client.set_server_first(bytes(first.auth_bytes).decode())
    final = bytearray(client.get_client_final().encode())
    final[rng.randrange(len(final))] ^= 1 << rng.randrange(8)
    answer = conn.call(ApiKey.SASL_AUTHENTICATE, 2, authenticate_body(bytes(final)))
    if answer is not None:
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert conn.call(ApiKey.METADATA, 12, encode_request(ApiKey.METADATA, 12, METADATA)) is None


def random_step(conn: FuzzConnection, rng: random.Random) -> None:
    roll = rng.randrange(9)
    if roll == 0:
        conn.call(ApiKey.SASL_HANDSHAKE, rng.choice([0, 1]),
                  handshake_body(rng.choice([*MECHANISMS, "GSSAPI", "", rng.randbytes(8).hex()])))
    elif roll == 1:
        conn.call(ApiKey.SASL_AUTHENTICATE, rng.choice([0, 1, 2]), authenticate_body(rng.randbytes(rng.randint(0, 64))))
    elif roll == 2:  # a token far beyond any mechanism's, in a frame still under the pre-authentication limit
        conn.call(ApiKey.SASL_AUTHENTICATE, 2, authenticate_body(rng.randbytes(rng.randint(5000, 100_000))))
    elif roll == 3:  # a frame over the pre-authentication limit
        conn.closed = conn.send_frame(rng.randbytes(SASL_MAX_RECEIVE_BYTES + 1)) is None or conn.closed
    elif roll == 4:
        conn.call(ApiKey.METADATA, 12, encode_request(ApiKey.METADATA, 12, METADATA))
    elif roll == 5:
        damaged_scram_login(conn, rng.choice(MECHANISMS[1:]), rng)
    elif roll == 6:  # a mutated SASL request frame
        api_key = rng.choice([ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE])
        body = handshake_body("PLAIN") if api_key == ApiKey.SASL_HANDSHAKE else authenticate_body(b"\0a\0b")
        version = 1 if api_key == ApiKey.SASL_HANDSHAKE else 2
        frame = encode_request_header(api_key, version, 99, "fuzz") + body
        mutated = bytes(apply_mutations(frame, random_mutations(rng, len(frame))))
        conn.closed = conn.send_frame(mutated) is None or conn.closed
    elif roll == 7:
        honest_login(conn, rng.choice(MECHANISMS))  # also a re-authentication when already logged in
    else:
        conn.closed = conn.send_frame(rng.randbytes(rng.randint(0, 64))) is None or conn.closed


def run_script(port: int, rng: random.Random) -> str:
    conn = FuzzConnection(port)
    try:
        if rng.random() < 0.4:
            honest_login(conn, rng.choice(MECHANISMS))
        for _ in range(rng.randint(1, 6)):
            if conn.closed:
                break
            random_step(conn, rng)
        return "closed" if conn.closed else "open"
    finally:
        conn.close()


def test_broker_survives_fuzzed_sasl_exchanges_and_keeps_serving(sasl_broker):
    port = sasl_broker.ready.listener_ports["SASL_PLAINTEXT"]
    bystander = FuzzConnection(port)
    assert honest_login(bystander, "SCRAM-SHA-512")
    rng = random.Random(SEED)
    outcomes = {"closed": 0, "open": 0}
    try:
        for _ in range(SCRIPTS):
            outcomes[run_script(port, rng)] += 1
            assert sasl_broker.proc.poll() is None, sasl_broker.output_tail()
            assert bystander.call(ApiKey.METADATA, 12, encode_request(ApiKey.METADATA, 12, METADATA)).cluster_id
    finally:
        bystander.close()
    print(f"\nlive SASL fuzz: seed {SEED}, {SCRIPTS} scripts: {outcomes}")
    assert outcomes["closed"] and outcomes["open"]  # both the refusals and the answered paths were reached
    fresh = FuzzConnection(port)
    try:
        assert honest_login(fresh, "SCRAM-SHA-256")
        assert fresh.call(ApiKey.METADATA, 12, encode_request(ApiKey.METADATA, 12, METADATA)).cluster_id
    finally:
        fresh.close()
    assert "Traceback" not in sasl_broker.output.read_text(errors="replace"), sasl_broker.output_tail(60)
