"""SASL re-authentication (KIP-368) on a real broker: connections.max.reauth.ms per listener and mechanism,
witnessed by confluent-kafka (librdkafka), kafka-python and the bundled client producing and consuming across
several session lifetimes on one connection, and by raw connections for the rules: the lifetime each mechanism
is told, a client that does not re-authenticate closed on its first request after expiry, a re-authentication
that changes the principal or the mechanism refused, a handshake where re-authentication is off answered
ILLEGAL_SASL_STATE. The broker keeps serving throughout."""

import asyncio
import json
import time
import urllib.request
import uuid

import pytest
import scramp
from confluent_kafka import Consumer, Producer, TopicPartition
from kio.schema.errors import ErrorCode

from replog.client.connection import Connection
from replog.client.errors import KafkaError as ReplogKafkaError
from replog.client.security import SASL_AUTHENTICATION_FAILED, ClientSecurity, SaslCredentials
from replog.harness.broker_process import BrokerProcess
from replog.protocol.apis import ApiKey
from replog.protocol.headers import decode_response_header
from replog.protocol.messages import encode_request
from tests.conditions import wait_until
from tests.integration.test_bad_input import create_topic
from tests.raw_wire import RawConnection
from tests.sasl_clients import plain_jaas, write_scram_credentials

HOST = "127.0.0.1"
USERS = {"alice": "alice-secret", "bob": "bob-secret"}
SCRAM_LIFETIME_MS = 2000  # above Kafka's one re-authentication a second, so clients can keep up
PLAIN_LIFETIME_MS = 3000
METADATA_V12_ALL = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
EXPIRED_LOG = "no re-authentication within connections.max.reauth.ms"
DEADLINE_S = 20.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    root = tmp_path_factory.mktemp("reauth-broker")
    scram_file = write_scram_credentials(root / "scram-credentials", USERS)
    jaas = plain_jaas(USERS)
    process = BrokerProcess(root / "logs", output=root / "broker.out")
    process.overrides.update({
        "listeners": f"PLAINTEXT://{HOST}:{process.port},SASL_PLAINTEXT://{HOST}:0,FOREVER://{HOST}:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,FOREVER:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.scram.credentials.file": str(scram_file),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "listener.name.forever.plain.sasl.jaas.config": jaas,
        # The SASL_PLAINTEXT listener's sessions end; PLAIN's later than SCRAM's. FOREVER's never do.
        "listener.name.sasl_plaintext.connections.max.reauth.ms": str(SCRAM_LIFETIME_MS),
        "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": str(PLAIN_LIFETIME_MS),
        "auto.create.topics.enable": "true",
        "metrics.port": "0",
    })
    process.start()
    try:
        yield process
    finally:
        process.stop()


def port(broker: BrokerProcess, listener: str = "SASL_PLAINTEXT") -> int:
    return broker.ready.listener_ports[listener]


def assert_still_serving(broker: BrokerProcess) -> None:
    assert broker.running
    conn = RawConnection(broker.port)
    try:
        assert conn.call(ApiKey.METADATA, 12, METADATA_V12_ALL).cluster_id
    finally:
        conn.close()


# ------------------------------------------------------------------ raw connections: the rules


def scram_login(conn: RawConnection, user: str, mechanism: str = "SCRAM-SHA-512", version: int = 2):
    """SaslHandshake v1 and a SCRAM exchange; the last SaslAuthenticate response."""
    handshake = conn.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})
    assert handshake.error_code == ErrorCode.none
    client = scramp.ScramClient([mechanism], user, USERS[user])
    first = conn.call(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": client.get_client_first().encode()})
    client.set_server_first(bytes(first.auth_bytes).decode())
    final = conn.call(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": client.get_client_final().encode()})
    assert final.error_code == ErrorCode.none, final.error_message
    client.set_server_final(bytes(final.auth_bytes).decode())
    return final


def plain_login(conn: RawConnection, user: str, password: str):
    assert conn.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == ErrorCode.none
    return conn.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": f"\0{user}\0{password}".encode()})


@pytest.mark.parametrize(("listener", "mechanism", "lifetime_ms"), [
    ("SASL_PLAINTEXT", "SCRAM-SHA-512", SCRAM_LIFETIME_MS),
    ("SASL_PLAINTEXT", "PLAIN", PLAIN_LIFETIME_MS),  # the listener's per-mechanism key wins
    ("FOREVER", "SCRAM-SHA-512", 0),  # no key for this listener: sessions do not expire
])
def test_session_lifetime_is_the_listeners_setting_for_the_mechanism(broker, listener, mechanism, lifetime_ms):
    conn = RawConnection(port(broker, listener))
    try:
        if mechanism == "PLAIN":
            answer = plain_login(conn, "alice", USERS["alice"])
            assert answer.error_code == ErrorCode.none
        else:
            answer = scram_login(conn, "alice", mechanism)
        assert answer.session_lifetime.total_seconds() * 1000 == lifetime_ms
    finally:
        conn.close()


def test_a_client_that_does_not_reauthenticate_is_closed_on_its_first_request_after_expiry(broker):
    conn = RawConnection(port(broker))
    try:
        authenticated_at = time.monotonic()
        scram_login(conn, "alice", version=0)  # v0 answers carry no lifetime; the session ends all the same
        deadline = authenticated_at + DEADLINE_S
        served_until = authenticated_at
        while True:  # requests are answered until the session ends, then the next one closes the connection
            assert time.monotonic() < deadline, "the expired session was never closed"
            try:
                conn.call(ApiKey.METADATA, 12, METADATA_V12_ALL)
            except (ConnectionError, OSError):
                break
            served_until = time.monotonic()
        assert served_until - authenticated_at < SCRAM_LIFETIME_MS / 1000 + 0.5
        assert time.monotonic() - authenticated_at >= SCRAM_LIFETIME_MS / 1000
    finally:
        conn.close()
    assert EXPIRED_LOG in broker.output.read_text()
    assert_still_serving(broker)


def test_reauthentication_renews_the_session_on_the_same_connection(broker):
    conn = RawConnection(port(broker))
    try:
        scram_login(conn, "alice")
        renewed = scram_login(conn, "alice")  # SaslHandshake on an authenticated connection: re-authentication
        assert renewed.session_lifetime.total_seconds() * 1000 == SCRAM_LIFETIME_MS
        assert conn.call(ApiKey.METADATA, 12, METADATA_V12_ALL).cluster_id
        # A second re-authentication within the second is refused, as Kafka does; the connection stays usable.
        refused = conn.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"})
        assert refused.error_code == ErrorCode.illegal_sasl_state
        assert conn.call(ApiKey.METADATA, 12, METADATA_V12_ALL).cluster_id
    finally:
        conn.close()


def test_reauthentication_while_a_fetch_is_parked_answers_the_fetch_first(broker):
    """Requests in flight when re-authentication begins were authorized at arrival: they are answered, in order,
    before the re-authentication's own answers."""
    topic = f"parked-{uuid.uuid4().hex[:6]}"
    conn = RawConnection(port(broker))
    try:
        scram_login(conn, "alice")
        create_topic(conn, topic)
        fetch = conn.send_request(ApiKey.FETCH, 12, encode_request(ApiKey.FETCH, 12, {
            "replica_id": -1, "max_wait": 1000, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}))  # parked: the partition is empty
        handshake = conn.send_request(ApiKey.SASL_HANDSHAKE, 1, encode_request(
            ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"}))
        first_answer, second_answer = conn.receive_frame(), conn.receive_frame()
        assert decode_response_header(first_answer, 1)[0] == fetch  # Fetch v12 has response header v1
        assert decode_response_header(second_answer, 0)[0] == handshake
        client = scramp.ScramClient(["SCRAM-SHA-512"], "alice", USERS["alice"])
        first = conn.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": client.get_client_first().encode()})
        client.set_server_first(bytes(first.auth_bytes).decode())
        final = conn.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": client.get_client_final().encode()})
        assert final.error_code == ErrorCode.none
        assert conn.call(ApiKey.METADATA, 12, METADATA_V12_ALL).cluster_id
    finally:
        conn.close()


def session_counters(broker: BrokerProcess) -> tuple[float, float]:
    """(successful re-authentications, connections closed for an expired session) from /metrics."""
    with urllib.request.urlopen(f"http://{HOST}:{broker.metrics_port}/metrics", timeout=5) as response:
        lines = response.read().decode().splitlines()
    values = dict(line.rsplit(" ", 1) for line in lines if line.startswith("kafka_server_socketservermetrics_"))
    return (float(values["kafka_server_socketservermetrics_successfulreauthentication_total"]),
            float(values["kafka_server_socketservermetrics_expiredconnectionskilledcount_total"]))


def test_reauthentications_and_expired_sessions_are_counted_in_the_metrics(broker):
    reauthenticated, expired = session_counters(broker)
    conn = RawConnection(port(broker))
    try:
        scram_login(conn, "alice")
        scram_login(conn, "alice")  # a re-authentication
        assert session_counters(broker)[0] == reauthenticated + 1
        deadline = time.monotonic() + DEADLINE_S
        while True:  # the session ends SCRAM_LIFETIME_MS after the re-authentication; the next request closes
            assert time.monotonic() < deadline, "the expired session was never closed"
            try:
                conn.call(ApiKey.METADATA, 12, METADATA_V12_ALL)
            except (ConnectionError, OSError):
                break
    finally:
        conn.close()
    assert session_counters(broker) == (reauthenticated + 1, expired + 1)


def test_a_handshake_where_sessions_do_not_expire_is_an_illegal_sasl_state(broker):
    conn = RawConnection(port(broker, "FOREVER"))
    try:
        scram_login(conn, "alice")
        refused = conn.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"})
        assert refused.error_code == ErrorCode.illegal_sasl_state
        assert conn.call(ApiKey.METADATA, 12, METADATA_V12_ALL).cluster_id  # still authenticated and served
    finally:
        conn.close()


def test_sasl_authenticate_out_of_turn_is_refused_as_kafka_does(broker):
    conn = RawConnection(port(broker, "FOREVER"))
    try:
        scram_login(conn, "alice")
        late = conn.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"n,,n=alice,r=abc"})
        assert late.error_code == ErrorCode.illegal_sasl_state  # KafkaApis' answer; the connection stays
        assert conn.call(ApiKey.METADATA, 12, METADATA_V12_ALL).cluster_id
    finally:
        conn.close()
    early = RawConnection(port(broker, "FOREVER"))
    try:  # before any handshake on a SASL listener: not a request the authenticator expects, closed
        early.send_request(ApiKey.SASL_AUTHENTICATE, 2, encode_request(ApiKey.SASL_AUTHENTICATE, 2,
                                                                      {"auth_bytes": b"x"}))
        assert early.is_closed_by_peer()
    finally:
        early.close()


def test_reauthentication_as_another_principal_fails_and_closes(broker):
    conn = RawConnection(port(broker))
    try:
        scram_login(conn, "alice")
        assert conn.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"}).error_code == ErrorCode.none
        client = scramp.ScramClient(["SCRAM-SHA-512"], "bob", USERS["bob"])
        first = conn.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": client.get_client_first().encode()})
        client.set_server_first(bytes(first.auth_bytes).decode())
        final = conn.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": client.get_client_final().encode()})
        assert final.error_code == ErrorCode.sasl_authentication_failed
        assert "Cannot change principals during re-authentication" in final.error_message
        assert conn.is_closed_by_peer()
    finally:
        conn.close()
    assert_still_serving(broker)


def test_reauthentication_with_another_mechanism_fails_and_closes(broker):
    conn = RawConnection(port(broker))
    try:
        scram_login(conn, "alice", "SCRAM-SHA-512")
        answer = plain_login(conn, "alice", USERS["alice"])
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert "not supported for re-authentication of mechanism 'SCRAM-SHA-512'" in answer.error_message
        assert conn.is_closed_by_peer()
    finally:
        conn.close()
    assert_still_serving(broker)


def test_a_request_in_the_middle_of_reauthentication_closes_the_connection(broker):
    conn = RawConnection(port(broker))
    try:
        scram_login(conn, "alice")
        assert conn.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"}).error_code == ErrorCode.none
        conn.send_request(ApiKey.METADATA, 12, encode_request(ApiKey.METADATA, 12, METADATA_V12_ALL))
        assert conn.is_closed_by_peer()
    finally:
        conn.close()
    assert_still_serving(broker)


# ------------------------------------------------------------------ clients across several session lifetimes

PERIODS = 3  # session lifetimes each client spans


def produce_and_consume_with_confluent(bootstrap: str, mechanism: str) -> dict:
    """Produce a message every 100 ms for PERIODS session lifetimes while a consumer reads them; librdkafka's
    statistics of the last poll. Every message must arrive, on connections that are never dropped."""
    topic = f"reauth-{uuid.uuid4().hex[:8]}"
    stats: list[dict] = []
    config = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
              "sasl.username": "alice", "sasl.password": USERS["alice"], "statistics.interval.ms": 500,
              "stats_cb": lambda raw: stats.append(json.loads(raw))}
    producer = Producer(config)
    consumer = Consumer({**config, "group.id": f"g-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    sent, received = 0, []
    ends = time.monotonic() + PERIODS * SCRAM_LIFETIME_MS / 1000
    try:
        while time.monotonic() < ends or len(received) < sent:
            assert time.monotonic() < ends + DEADLINE_S, f"received {len(received)} of {sent}"
            if time.monotonic() < ends:
                producer.produce(topic, f"m{sent}".encode())
                sent += 1
                producer.poll(0)
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                received.append(message.value())
        assert producer.flush(DEADLINE_S) == 0
        consumer.poll(1.0)  # one more statistics callback after the last message
    finally:
        consumer.close()
    assert received == [f"m{i}".encode() for i in range(sent)]
    return stats[-1]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_confluent_kafka_reauthenticates_across_session_lifetimes(broker, mechanism):
    before = broker.output.read_text().count(EXPIRED_LOG)
    stats = produce_and_consume_with_confluent(f"{HOST}:{port(broker)}", mechanism)
    brokers = [b for b in stats["brokers"].values() if b["nodeid"] >= 0]
    assert brokers and all(b["disconnects"] == 0 for b in brokers), brokers
    assert broker.output.read_text().count(EXPIRED_LOG) == before  # no connection outlived its session
    assert_still_serving(broker)


def test_kafka_python_reauthenticates_across_session_lifetimes(broker):
    from kafka import KafkaConsumer, KafkaProducer

    before = broker.output.read_text().count(EXPIRED_LOG)
    topic = f"kp-reauth-{uuid.uuid4().hex[:8]}"
    config = {"bootstrap_servers": f"{HOST}:{port(broker)}", "security_protocol": "SASL_PLAINTEXT",
              "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": "bob", "sasl_plain_password": USERS["bob"]}
    producer = KafkaProducer(**config)
    ends = time.monotonic() + PERIODS * SCRAM_LIFETIME_MS / 1000
    sent = 0
    try:
        while time.monotonic() < ends:
            producer.send(topic, f"k{sent}".encode()).get(timeout=DEADLINE_S)
            sent += 1
    finally:
        producer.close()
    consumer = KafkaConsumer(topic, **config, auto_offset_reset="earliest", consumer_timeout_ms=10000)
    try:
        got = [m.value for m in consumer][:sent]
    finally:
        consumer.close()
    assert got == [f"k{i}".encode() for i in range(sent)]
    assert broker.output.read_text().count(EXPIRED_LOG) == before


async def test_the_bundled_client_reauthenticates_with_requests_in_flight(broker):
    security = ClientSecurity(sasl=SaslCredentials("SCRAM-SHA-512", "alice", USERS["alice"]))
    connection = Connection(HOST, port(broker), security=security)
    await connection.connect()
    try:
        async def metadata() -> None:
            response = await connection.send(ApiKey.METADATA, METADATA_V12_ALL)
            assert response.cluster_id

        async def keep_busy() -> None:
            while connection.reauthentications < PERIODS:
                await asyncio.gather(*(metadata() for _ in range(8)))  # several in flight at each renewal

        await asyncio.wait_for(keep_busy(), PERIODS * SCRAM_LIFETIME_MS / 1000 + DEADLINE_S)
        assert not connection.closed
    finally:
        connection.close()


async def test_the_bundled_client_reauthenticates_an_idle_connection_on_its_next_request(broker):
    security = ClientSecurity(sasl=SaslCredentials("PLAIN", "bob", USERS["bob"]))
    connection = Connection(HOST, port(broker), security=security)
    await connection.connect()
    try:
        expires = asyncio.get_running_loop().time() + PLAIN_LIFETIME_MS / 1000
        await wait_until(lambda: asyncio.get_running_loop().time() > expires + 0.2, "the session to expire",
                         timeout_s=DEADLINE_S)
        response = await connection.send(ApiKey.METADATA, METADATA_V12_ALL)  # re-authenticates first
        assert response.cluster_id and connection.reauthentications == 1
    finally:
        connection.close()


async def test_aiokafka_which_does_not_reauthenticate_is_disconnected_cleanly_and_reconnects(broker):
    """aiokafka has no KIP-368: the broker closes its connection on the first request after the session ends;
    aiokafka reconnects and logs in again, and every message is delivered."""
    from aiokafka import AIOKafkaProducer

    before = broker.output.read_text().count(EXPIRED_LOG)
    topic = f"aio-reauth-{uuid.uuid4().hex[:8]}"
    producer = AIOKafkaProducer(bootstrap_servers=f"{HOST}:{port(broker)}", security_protocol="SASL_PLAINTEXT",
                                sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="alice",
                                sasl_plain_password=USERS["alice"], request_timeout_ms=10_000)
    await producer.start()
    try:
        ends = asyncio.get_running_loop().time() + PERIODS * SCRAM_LIFETIME_MS / 1000
        sent = 0
        while asyncio.get_running_loop().time() < ends:
            await producer.send_and_wait(topic, f"a{sent}".encode())
            sent += 1
    finally:
        await producer.stop()
    assert broker.output.read_text().count(EXPIRED_LOG) > before  # its sessions did expire
    assert broker.running and "Traceback" not in broker.output.read_text()
    assert_still_serving(broker)


async def test_a_deleted_user_loses_its_open_connection_at_its_next_reauthentication(broker):
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": f"{HOST}:{port(broker)}", "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
                         "sasl.password": USERS["alice"]})
    user = f"carol-{uuid.uuid4().hex[:6]}"
    upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"carol-pw")
    await asyncio.to_thread(admin.alter_user_scram_credentials([upsert])[user].result, DEADLINE_S)
    security = ClientSecurity(sasl=SaslCredentials("SCRAM-SHA-256", user, "carol-pw"))
    connection = Connection(HOST, port(broker), security=security)
    await connection.connect()
    try:
        assert (await connection.send(ApiKey.METADATA, METADATA_V12_ALL)).cluster_id
        deletion = UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)
        await asyncio.to_thread(admin.alter_user_scram_credentials([deletion])[user].result, DEADLINE_S)
        expires = asyncio.get_running_loop().time() + SCRAM_LIFETIME_MS / 1000
        await wait_until(lambda: asyncio.get_running_loop().time() > expires, "the session to end",
                         timeout_s=DEADLINE_S)
        with pytest.raises(ReplogKafkaError) as failure:
            await connection.send(ApiKey.METADATA, METADATA_V12_ALL)  # re-authenticates first, and fails
        assert failure.value.code == SASL_AUTHENTICATION_FAILED and connection.closed
    finally:
        connection.close()
    assert_still_serving(broker)
