"""ssl.principal.mapping.rules (KIP-371) on a broker with an authorizer, witnessed by confluent-kafka over mTLS:
the same client certificate (CN=alice,...,O=Example) is the super user User:alice on the listener whose rule maps
it so, and User:CN=alice,...,O=Example, a nobody, on a listener without rules; a certificate no rule applies to
is refused (the connection closes, the broker logs why and serves on)."""

import pytest
import trustme
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from replog.harness.broker_process import BrokerProcess
from tests.conditions import wait_until
from tests.integration.test_secure_listeners import assert_still_serving, confluent_error

HOST = "127.0.0.1"
DEADLINE_S = 20.0
RULES = "RULE:^CN=([a-z]+),(.*,)?O=Example$/$1/L"  # trustme adds an OU


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    files = {"ca": directory / "ca.pem", "server": directory / "server.pem"}
    files["ca"].write_bytes(ca.cert_pem.bytes())
    files["server"].write_bytes(ca.issue_cert(HOST, "localhost").private_key_and_cert_chain_pem.bytes())
    for name, leaf in {"alice": ca.issue_cert("alice", common_name="alice", organization_name="Example"),
                       "bob": ca.issue_cert("bob", common_name="bob", organization_name="Elsewhere")}.items():
        files[f"{name}.crt"], files[f"{name}.key"] = directory / f"{name}.crt", directory / f"{name}.key"
        files[f"{name}.crt"].write_bytes(leaf.cert_chain_pems[0].bytes())
        files[f"{name}.key"].write_bytes(leaf.private_key_pem.bytes())
    return {name: str(path) for name, path in files.items()}


@pytest.fixture(scope="module")
def broker(tmp_path_factory, certificates):
    root = tmp_path_factory.mktemp("mapping-broker")
    broker = BrokerProcess(root / "logs", output=root / "broker.out")
    broker.overrides.update({
        "listeners": f"PLAINTEXT://{HOST}:{broker.port},MAPPED://{HOST}:0,UNMAPPED://{HOST}:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,MAPPED:SSL,UNMAPPED:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": certificates["server"],
        "ssl.truststore.location": certificates["ca"],
        "ssl.client.auth": "required",
        "listener.name.mapped.ssl.principal.mapping.rules": RULES,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:alice",
    })
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def client_config(broker: BrokerProcess, certificates: dict, listener: str, user: str) -> dict:
    return {"bootstrap.servers": f"{HOST}:{broker.ready.listener_ports[listener]}", "security.protocol": "SSL",
            "ssl.ca.location": certificates["ca"], "ssl.certificate.location": certificates[f"{user}.crt"],
            "ssl.key.location": certificates[f"{user}.key"], "socket.timeout.ms": 5000}


def create_topic(config: dict, topic: str) -> KafkaError | None:
    """CreateTopics as the certificate's principal: None once created, else the error."""
    admin = AdminClient(config)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(DEADLINE_S)
    except KafkaException as e:
        return e.args[0]
    return None


def test_the_mapped_name_is_the_principal(broker, certificates):
    as_super_user = client_config(broker, certificates, "MAPPED", "alice")  # User:alice
    assert create_topic(as_super_user, "created") is None
    refused = create_topic(client_config(broker, certificates, "UNMAPPED", "alice"), "refused")  # User:CN=alice,...
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert set(AdminClient(as_super_user).list_topics(timeout=DEADLINE_S).topics) == {"created"}


async def test_a_certificate_no_rule_applies_to_is_refused(broker, certificates):
    code = confluent_error(client_config(broker, certificates, "MAPPED", "bob"))
    assert code in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN), code
    await wait_until(lambda: "no principal for the certificate" in broker.output.read_text(),
                     "the broker to log the refusal", timeout_s=DEADLINE_S)
    assert "no ssl.principal.mapping.rules rule applies to CN=bob," in broker.output.read_text()
    assert_still_serving(broker)
