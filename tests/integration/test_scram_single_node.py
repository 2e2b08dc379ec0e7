"""SCRAM users on a single node, which has no controller and so no metadata log: it decides
AlterUserScramCredentials with the controller's rules and keeps the credentials (never the passwords) in its
state file, as it keeps topics and ACLs. The admin comes from sasl.scram.credentials.file; confluent-kafka's
AdminClient creates a user, the user logs in and writes where an ACL lets it, cannot alter users itself, and
keeps its login across a restart until the admin deletes it."""

import asyncio

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from replog.broker.local_controller import STATE_FILE
from replog.harness.broker_process import BrokerProcess
from replog.server.credential_store import scram_credential_line
from tests.sasl_clients import DEADLINE_S, HOST, produce_one, sasl_config

ADMIN_PASSWORD = "admin-password-on-a-single-node"
ALICE_PASSWORD = "alice-password-on-a-single-node"
TOPIC = "single-node-scram"


@pytest.fixture
def broker(tmp_path):
    credentials = tmp_path / "scram-credentials"
    credentials.write_text(scram_credential_line("admin", "SCRAM-SHA-512", ADMIN_PASSWORD) + "\n")
    broker = BrokerProcess(tmp_path / "broker", node_id=1, output=tmp_path / "broker.out")
    broker.overrides.update({
        "listeners": f"PLAINTEXT://{HOST}:{broker.port},SASL_PLAINTEXT://{HOST}:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.scram.credentials.file": str(credentials),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
    })
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def sasl_port(broker: BrokerProcess) -> int:
    return broker.ready.listener_ports["SASL_PLAINTEXT"]


def create_alice_with_write_access(port: int) -> None:
    admin = AdminClient(sasl_config(port, "admin", ADMIN_PASSWORD))
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(DEADLINE_S)
    upsert = UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
                                          ALICE_PASSWORD.encode())
    admin.alter_user_scram_credentials([upsert])["alice"].result(DEADLINE_S)
    write = AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:alice", "*",
                       AclOperation.WRITE, AclPermissionType.ALLOW)
    admin.create_acls([write])[write].result(DEADLINE_S)
    described = admin.describe_user_scram_credentials(["alice"])["alice"].result(DEADLINE_S)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 8192)]


def alice_login() -> dict:
    return {"user": "alice", "password": ALICE_PASSWORD, "mechanism": "SCRAM-SHA-256"}


async def test_a_user_created_on_a_single_node_logs_in_and_survives_a_restart(broker):
    await asyncio.to_thread(create_alice_with_write_access, sasl_port(broker))
    assert await asyncio.to_thread(produce_one, sasl_config(sasl_port(broker), **alice_login()), TOPIC) is None

    state = (broker.log_dir / STATE_FILE).read_text()
    assert "alice" in state and ALICE_PASSWORD not in state

    await asyncio.to_thread(broker.stop)
    await asyncio.to_thread(broker.start)
    assert await asyncio.to_thread(produce_one, sasl_config(sasl_port(broker), **alice_login()), TOPIC) is None

    admin = AdminClient(sasl_config(sasl_port(broker), "admin", ADMIN_PASSWORD))
    deletion = UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_256)
    await asyncio.to_thread(admin.alter_user_scram_credentials([deletion])["alice"].result, DEADLINE_S)
    refused = await asyncio.to_thread(produce_one, sasl_config(sasl_port(broker), **alice_login()), TOPIC)
    assert refused is not None and refused.code() == KafkaError._AUTHENTICATION
    assert broker.running


async def test_a_user_without_alter_on_the_cluster_cannot_create_users(broker):
    await asyncio.to_thread(create_alice_with_write_access, sasl_port(broker))
    as_alice = AdminClient(sasl_config(sasl_port(broker), **alice_login()))
    upsert = UserScramCredentialUpsertion("mallory", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                          b"mallory")
    with pytest.raises(KafkaException) as failure:
        await asyncio.to_thread(as_alice.alter_user_scram_credentials([upsert])["mallory"].result, DEADLINE_S)
    assert failure.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    admin = AdminClient(sasl_config(sasl_port(broker), "admin", ADMIN_PASSWORD))
    with pytest.raises(KafkaException) as unknown:
        await asyncio.to_thread(admin.describe_user_scram_credentials(["mallory"])["mallory"].result, DEADLINE_S)
    assert unknown.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND
