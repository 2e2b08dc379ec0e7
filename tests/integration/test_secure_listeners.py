"""One broker with a listener per security protocol, witnessed by third-party clients: confluent-kafka
(librdkafka), kafka-python and aiokafka over SSL, mTLS and SASL_SSL with SCRAM-SHA-256, SCRAM-SHA-512 and
PLAIN, plus SASL_PLAINTEXT; and the failures (wrong password, unknown user, untrusted or expired certificate,
plain text to a TLS port, TLS to a plain port, a request before authentication), each a clean client error and
a closed connection, after which the broker still serves.

Certificates are minted per run with trustme.
"""

import datetime
import os
import socket
import ssl
import time
import uuid

import pytest
import scramp
import trustme
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from replog.client.admin import Admin
from replog.client.admin import NewTopic as ReplogNewTopic
from replog.client.connection import Connection
from replog.client.errors import KafkaError as ReplogKafkaError
from replog.client.security import SASL_AUTHENTICATION_FAILED, ClientSecurity, SaslCredentials
from replog.harness.broker_process import BrokerProcess
from replog.protocol.apis import ApiKey
from tests.raw_wire import RawConnection
from tests.sasl_clients import plain_jaas, write_scram_credentials

HOST = "127.0.0.1"
USERS = {"alice": "alice-secret", "bob": "bob-secret"}
METADATA_V12_ALL = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
DEADLINE_S = 20.0


class Material:
    """A CA, the broker's certificate, a client certificate, and the files clients read."""

    def __init__(self, directory) -> None:
        self.ca = trustme.CA()
        server = self.ca.issue_cert(HOST, "localhost")
        client = self.ca.issue_cert("alice", common_name="alice", organization_name="Example")
        past = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
        expired = self.ca.issue_cert("carol", common_name="carol", not_before=past,
                                     not_after=past + datetime.timedelta(days=1))
        stranger = trustme.CA().issue_cert("mallory", common_name="mallory")
        self.dir = directory
        self.server_pem = self._write("server.pem", server.private_key_and_cert_chain_pem.bytes())
        self.ca_pem = self._write("ca.pem", self.ca.cert_pem.bytes())
        self.other_ca_pem = self._write("other-ca.pem", trustme.CA().cert_pem.bytes())
        self.client_cert, self.client_key = self._leaf("client", client)
        self.expired_cert, self.expired_key = self._leaf("expired", expired)
        self.stranger_cert, self.stranger_key = self._leaf("stranger", stranger)

    def _leaf(self, name, leaf) -> tuple[str, str]:
        return (self._write(f"{name}.crt", leaf.cert_chain_pems[0].bytes()),
                self._write(f"{name}.key", leaf.private_key_pem.bytes()))

    def _write(self, name: str, data: bytes) -> str:
        path = self.dir / name
        path.write_bytes(data)
        return str(path)


@pytest.fixture(scope="module")
def material(tmp_path_factory):
    return Material(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory, material):
    root = tmp_path_factory.mktemp("secure-broker")
    scram_file = write_scram_credentials(root / "scram-credentials", USERS)
    jaas = plain_jaas(USERS)
    broker = BrokerProcess(root / "logs", output=root / "broker.out")
    broker.overrides.update({
        "listeners": (f"PLAINTEXT://{HOST}:{broker.port},SSL://{HOST}:0,MTLS://{HOST}:0,OPTIONAL://{HOST}:0,"
                      f"SASL_SSL://{HOST}:0,SASL_PLAINTEXT://{HOST}:0"),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,OPTIONAL:SSL,SASL_SSL:SASL_SSL,"
                                          "SASL_PLAINTEXT:SASL_PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": material.server_pem,
        "ssl.truststore.location": material.ca_pem,
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.optional.ssl.client.auth": "requested",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "sasl.scram.credentials.file": str(scram_file),
    })
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def listener_port(broker: BrokerProcess, name: str) -> int:
    return broker.ready.listener_ports[name]


def confluent_config(broker, material, listener: str, **extra) -> dict:
    config = {"bootstrap.servers": f"{HOST}:{listener_port(broker, listener)}", "ssl.ca.location": material.ca_pem,
              "socket.timeout.ms": 5000}
    config.update(extra)
    return config


def round_trip_with_confluent(config: dict) -> None:
    """Create a topic, produce a message, read it back: every request kind a client needs."""
    topic = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(config)  # held: a collected client fails its futures with _DESTROY
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(DEADLINE_S)
    producer = Producer(config)
    producer.produce(topic, b"secret payload")
    assert producer.flush(DEADLINE_S) == 0
    consumer = Consumer({**config, "group.id": f"g-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        deadline = time.monotonic() + DEADLINE_S
        message = None
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
        assert message is not None and message.error() is None, message and message.error()
        assert message.value() == b"secret payload"
    finally:
        consumer.close()


def confluent_error(config: dict) -> int:
    """The error librdkafka reports for a client that cannot get in (its error_cb), within the deadline."""
    errors = []
    admin = AdminClient({**config, "error_cb": errors.append})
    deadline = time.monotonic() + DEADLINE_S
    while not errors and time.monotonic() < deadline:
        admin.poll(0.2)
        try:
            admin.list_topics(timeout=0.5)
        except Exception:  # noqa: BLE001 - the failure we expect; error_cb says which
            pass
    assert errors, "the client reported no error"
    return errors[0].code()


def assert_still_serving(broker: BrokerProcess) -> None:
    assert broker.running
    conn = RawConnection(broker.port)
    try:
        assert conn.call(ApiKey.METADATA, 12, METADATA_V12_ALL).cluster_id
    finally:
        conn.close()


@pytest.mark.parametrize("listener, extra", [
    ("SSL", {"security.protocol": "SSL"}),
    ("SASL_SSL", {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256"}),
    ("SASL_SSL", {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"}),
    ("SASL_SSL", {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}),
    ("SASL_PLAINTEXT", {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512"}),
], ids=["ssl", "sasl_ssl-scram256", "sasl_ssl-scram512", "sasl_ssl-plain", "sasl_plaintext-scram512"])
def test_confluent_kafka_round_trip(secure_broker, material, listener, extra):
    if "sasl.mechanism" in extra:
        extra = {**extra, "sasl.username": "alice", "sasl.password": USERS["alice"]}
    round_trip_with_confluent(confluent_config(secure_broker, material, listener, **extra))


def test_confluent_kafka_mtls_round_trip(secure_broker, material):
    round_trip_with_confluent(confluent_config(
        secure_broker, material, "MTLS", **{"security.protocol": "SSL", "ssl.certificate.location":
                                            material.client_cert, "ssl.key.location": material.client_key}))


def test_metadata_answers_with_the_listener_the_client_came_in_on(secure_broker, material):
    for listener, extra in [("SSL", {"security.protocol": "SSL"}), ("PLAINTEXT", {})]:
        brokers = AdminClient(confluent_config(secure_broker, material, listener, **extra)).list_topics(
            timeout=DEADLINE_S).brokers
        assert [(b.host, b.port) for b in brokers.values()] == [(HOST, listener_port(secure_broker, listener))]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
@pytest.mark.parametrize("username, password", [("alice", "wrong"), ("nobody", "whatever")],
                         ids=["wrong-password", "unknown-user"])
def test_bad_credentials_are_an_authentication_error(secure_broker, material, mechanism, username, password):
    config = confluent_config(secure_broker, material, "SASL_SSL", **{
        "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism, "sasl.username": username,
        "sasl.password": password})
    assert confluent_error(config) == KafkaError._AUTHENTICATION
    assert_still_serving(secure_broker)


@pytest.mark.parametrize("which", ["stranger", "expired", "none"])
def test_mtls_refuses_untrusted_expired_or_missing_client_certificates(secure_broker, material, which):
    extra = {"security.protocol": "SSL"}
    if which != "none":
        extra |= {"ssl.certificate.location": getattr(material, f"{which}_cert"),
                  "ssl.key.location": getattr(material, f"{which}_key")}
    assert confluent_error(confluent_config(secure_broker, material, "MTLS", **extra)) in (
        KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)
    assert_still_serving(secure_broker)


def test_a_client_that_does_not_trust_the_broker_fails_its_handshake(secure_broker, material):
    config = confluent_config(secure_broker, material, "SSL", **{"security.protocol": "SSL",
                                                                 "ssl.ca.location": material.other_ca_pem})
    assert confluent_error(config) in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)
    assert_still_serving(secure_broker)


def test_plain_text_to_a_tls_port_is_closed_and_logged(secure_broker):
    conn = RawConnection(listener_port(secure_broker, "SSL"))
    try:
        conn.send_request(ApiKey.API_VERSIONS, 0, b"")
        assert conn.is_closed_by_peer()
    finally:
        conn.close()
    assert_still_serving(secure_broker)
    assert_logged(secure_broker, "TLS handshake on listener SSL failed")


def test_tls_to_a_plain_port_is_closed_and_logged(secure_broker):
    context = ssl.create_default_context()
    with socket.create_connection((HOST, secure_broker.port), timeout=DEADLINE_S) as sock:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            context.wrap_socket(sock, server_hostname=HOST)
    assert_still_serving(secure_broker)
    assert_logged(secure_broker, "a TLS handshake on PLAINTEXT, a listener without TLS")


def test_a_request_before_sasl_authentication_closes_the_connection(secure_broker):
    conn = RawConnection(listener_port(secure_broker, "SASL_PLAINTEXT"))
    try:
        versions = conn.call(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert versions.error_code == 0  # ApiVersions is answered before authentication, as Kafka does
        conn.send_request(ApiKey.METADATA, 12, b"\x01\x00\x00")
        assert conn.is_closed_by_peer()
    finally:
        conn.close()
    assert_still_serving(secure_broker)


def assert_logged(broker: BrokerProcess, text: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while text not in broker.output.read_text():
        assert time.monotonic() < deadline, f"{text!r} not in the broker's log:\n{broker.output_tail()}"
        time.sleep(0.05)


def test_kafka_python_over_sasl_ssl_scram_and_mtls(secure_broker, material):
    from kafka import KafkaConsumer, KafkaProducer

    topic = f"kp-{uuid.uuid4().hex[:8]}"
    common = {"ssl_cafile": material.ca_pem, "ssl_check_hostname": True, "request_timeout_ms": 20000}
    sasl = {**common, "bootstrap_servers": f"{HOST}:{listener_port(secure_broker, 'SASL_SSL')}",
            "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "bob",
            "sasl_plain_password": USERS["bob"]}
    producer = KafkaProducer(**sasl)
    producer.send(topic, b"via kafka-python").get(timeout=DEADLINE_S)
    producer.close()
    mtls = {**common, "bootstrap_servers": f"{HOST}:{listener_port(secure_broker, 'MTLS')}",
            "security_protocol": "SSL", "ssl_certfile": material.client_cert, "ssl_keyfile": material.client_key}
    consumer = KafkaConsumer(topic, **mtls, auto_offset_reset="earliest", consumer_timeout_ms=10000)
    try:
        assert [m.value for m in consumer][:1] == [b"via kafka-python"]
    finally:
        consumer.close()


async def test_aiokafka_over_sasl_ssl_scram256_and_plain(secure_broker, material):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    topic = f"aio-{uuid.uuid4().hex[:8]}"
    bootstrap = f"{HOST}:{listener_port(secure_broker, 'SASL_SSL')}"

    def sasl(mechanism: str) -> dict:
        return {"bootstrap_servers": bootstrap, "security_protocol": "SASL_SSL", "sasl_mechanism": mechanism,
                "sasl_plain_username": "alice", "sasl_plain_password": USERS["alice"],
                "ssl_context": create_ssl_context(cafile=material.ca_pem)}

    producer = AIOKafkaProducer(**sasl("SCRAM-SHA-256"))
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"via aiokafka")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(topic, **sasl("PLAIN"), auto_offset_reset="earliest")
    await consumer.start()
    try:
        message = await consumer.getone()
        assert message.value == b"via aiokafka"
    finally:
        await consumer.stop()


def tls_context(material) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=material.ca_pem)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
async def test_the_bundled_client_over_sasl_ssl(secure_broker, material, mechanism):
    topic = f"own-{uuid.uuid4().hex[:8]}"
    security = ClientSecurity(tls_context(material), SaslCredentials(mechanism, "bob", USERS["bob"]))
    async with Admin(f"{HOST}:{listener_port(secure_broker, 'SASL_SSL')}", security=security) as admin:
        await admin.create_topics([ReplogNewTopic(topic, 1, 1)])
        assert topic in await admin.list_topics()


async def test_the_bundled_client_over_mtls(secure_broker, material):
    context = tls_context(material)
    context.load_cert_chain(material.client_cert, material.client_key)
    async with Admin(f"{HOST}:{listener_port(secure_broker, 'MTLS')}", security=ClientSecurity(context)) as admin:
        assert isinstance(await admin.list_topics(), list)


async def test_the_bundled_client_reports_a_wrong_password(secure_broker, material):
    security = ClientSecurity(tls_context(material), SaslCredentials("SCRAM-SHA-512", "bob", "wrong"))
    connection = Connection(HOST, listener_port(secure_broker, "SASL_SSL"), security=security)
    with pytest.raises(ReplogKafkaError) as failure:
        await connection.connect()
    assert failure.value.code == SASL_AUTHENTICATION_FAILED
    connection.close()
    assert_still_serving(secure_broker)


def raw_token_exchange(conn: RawConnection, token: bytes) -> bytes:
    """After SaslHandshake v0 (KIP-43): a bare size-prefixed token each way."""
    conn.send_frame(token)
    return conn.receive_frame()


def sasl_handshake_v0(conn: RawConnection, mechanism: str) -> None:
    response = conn.call(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": mechanism})
    assert response.error_code == 0 and mechanism in response.mechanisms


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_sasl_handshake_v0_then_bare_tokens(secure_broker, mechanism):
    conn = RawConnection(listener_port(secure_broker, "SASL_PLAINTEXT"))
    try:
        sasl_handshake_v0(conn, mechanism)
        if mechanism == "PLAIN":
            assert raw_token_exchange(conn, b"\0alice\0" + USERS["alice"].encode()) == b""
        else:
            client = scramp.ScramClient([mechanism], "alice", USERS["alice"])
            client.set_server_first(raw_token_exchange(conn, client.get_client_first().encode()).decode())
            client.set_server_final(raw_token_exchange(conn, client.get_client_final().encode()).decode())
        assert conn.call(ApiKey.METADATA, 12, METADATA_V12_ALL).cluster_id  # authenticated: requests answered
    finally:
        conn.close()


def test_sasl_handshake_v0_with_a_wrong_password_closes_the_connection(secure_broker):
    conn = RawConnection(listener_port(secure_broker, "SASL_PLAINTEXT"))
    try:
        sasl_handshake_v0(conn, "PLAIN")
        conn.send_frame(b"\0alice\0wrong")
        assert conn.is_closed_by_peer()
    finally:
        conn.close()
    assert_still_serving(secure_broker)


@pytest.mark.parametrize("overrides, message", [
    ({"listeners": "SSL://127.0.0.1:0"}, "listener SSL (SSL): a TLS listener needs a key"),
    ({"listeners": "SECURE://127.0.0.1:0"}, "listener SECURE://127.0.0.1:0 has no security protocol"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0"}, "sasl.enabled.mechanisms: GSSAPI not supported"),
])
def test_a_listener_that_cannot_serve_its_protocol_stops_the_broker_with_a_message(tmp_path, overrides, message):
    broker = BrokerProcess(tmp_path / "logs", output=tmp_path / "broker.out", overrides=overrides)
    with pytest.raises(RuntimeError, match="exited with 2") as failure:
        broker.start()
    assert "bad broker configuration: listener " in str(failure.value) and message in str(failure.value)


def test_a_sasl_listener_reads_no_large_frame_before_authentication(secure_broker):
    """Kafka's sasl.server.max.receive.size (512 KiB): an anonymous peer cannot make the broker buffer more."""
    conn = RawConnection(listener_port(secure_broker, "SASL_PLAINTEXT"))
    try:
        conn.sock.sendall((1024 * 1024).to_bytes(4, "big") + b"\0" * 16)
        assert conn.is_closed_by_peer()
    finally:
        conn.close()
    assert_still_serving(secure_broker)


def test_once_authenticated_a_sasl_client_sends_frames_up_to_the_listeners_limit(secure_broker, material):
    config = confluent_config(secure_broker, material, "SASL_SSL", **{
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice",
        "sasl.password": USERS["alice"]})
    producer = Producer(config)
    producer.produce(f"big-{uuid.uuid4().hex[:8]}", os.urandom(900 * 1024))  # incompressible: a 900 KiB frame
    assert producer.flush(DEADLINE_S) == 0


def test_requested_client_auth_takes_clients_without_a_certificate_but_not_with_an_untrusted_one(secure_broker,
                                                                                                 material):
    round_trip_with_confluent(confluent_config(secure_broker, material, "OPTIONAL", **{"security.protocol": "SSL"}))
    untrusted = confluent_config(secure_broker, material, "OPTIONAL", **{
        "security.protocol": "SSL", "ssl.certificate.location": material.stranger_cert,
        "ssl.key.location": material.stranger_key})
    assert confluent_error(untrusted) in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)
