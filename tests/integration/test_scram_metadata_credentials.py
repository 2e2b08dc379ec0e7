"""SCRAM users kept in the controller's metadata log (KIP-554), end to end: a controller seeded with an admin
credential (bootstrap.scram.credentials), a broker whose client listener is SASL_PLAINTEXT with SCRAM. The admin
creates a user with confluent-kafka's AdminClient, a confluent-kafka producer logs in as that user, the user is
deleted and refused; the bundled client and `replog configs --command-config` see Kafka's errors."""

import asyncio
import secrets
import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from replog.cli import main as replog_main
from replog.client.admin import Admin
from replog.client.errors import KafkaError as ReplogKafkaError
from replog.client.scram_admin import ScramUpsertion, alter_user_scram_credentials
from replog.client.security import ClientSecurity, SaslCredentials
from replog.controller.scram import change_records
from replog.controller.server import ClusterController, ControllerConfig
from replog.harness.broker_process import BrokerProcess
from replog.harness.local_cluster import FAST_REPLICATION
from replog.server.scram_credentials import Deletion, parse_bootstrap_credentials
from tests.sasl_clients import produce_one, sasl_config

HOST = "127.0.0.1"
ADMIN_PASSWORD = "admin-" + secrets.token_hex(8)
DEADLINE_S = 30.0
UNACCEPTABLE_CREDENTIAL, RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE = 93, 91, 92


@pytest.fixture
async def cluster(tmp_path):
    secret = secrets.token_hex(8)
    credentials = parse_bootstrap_credentials(f"SCRAM-SHA-512=[name=admin,password={ADMIN_PASSWORD},"
                                              f"iterations=8192]")
    controller = ClusterController(ControllerConfig(inter_broker_secret=secret, metadata_log_dir=tmp_path / "meta",
                                                    bootstrap_scram_credentials=tuple(credentials)))
    await controller.start()
    broker = BrokerProcess(tmp_path / "broker", node_id=1, output=tmp_path / "broker.out")
    broker.overrides.update({
        **FAST_REPLICATION, "inter.broker.secret": secret,
        "controller.quorum.bootstrap.servers": f"{HOST}:{controller.port}",
        "listeners": f"PLAINTEXT://{HOST}:{broker.port},SASL_PLAINTEXT://{HOST}:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
    })
    try:
        await asyncio.to_thread(broker.start)
        deadline = time.monotonic() + DEADLINE_S
        # Registered, and holding the admin's credential (the first UpdateMetadata has arrived).
        while controller.metadata.active_broker_ids() != [1] or not broker.ready:
            assert time.monotonic() < deadline, "the broker did not register"
            await asyncio.sleep(0.05)
        yield broker, broker.ready.listener_ports["SASL_PLAINTEXT"]
    finally:
        await asyncio.to_thread(broker.stop)
        await controller.stop()


async def test_a_user_created_through_the_admin_api_logs_in_and_is_refused_once_deleted(cluster):
    broker, port = cluster
    await asyncio.to_thread(user_round_trip, broker, port)


def user_round_trip(broker, port):
    admin = AdminClient(sasl_config(port, "admin", ADMIN_PASSWORD))
    admin.create_topics([NewTopic("scram-events", 1, 1)])["scram-events"].result(DEADLINE_S)
    upsert = UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
                                          b"alice-secret")
    admin.alter_user_scram_credentials([upsert])["alice"].result(DEADLINE_S)

    described = admin.describe_user_scram_credentials(["alice"])["alice"].result(DEADLINE_S)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 8192)]
    everyone = admin.describe_user_scram_credentials().result(DEADLINE_S)
    assert set(everyone) == {"admin", "alice"}

    alice = sasl_config(port, "alice", "alice-secret", "SCRAM-SHA-256")
    assert produce_one(alice, "scram-events") is None

    deletion = UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_256)
    admin.alter_user_scram_credentials([deletion])["alice"].result(DEADLINE_S)
    refused = produce_one(alice, "scram-events")
    assert refused is not None and refused.code() == KafkaError._AUTHENTICATION
    assert broker.running


async def test_describing_an_unknown_user_is_resource_not_found(cluster):
    _, port = cluster
    admin = AdminClient(sasl_config(port, "admin", ADMIN_PASSWORD))
    with pytest.raises(KafkaException) as failure:
        await asyncio.to_thread(admin.describe_user_scram_credentials(["nobody"])["nobody"].result, DEADLINE_S)
    assert failure.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND


async def test_a_wrong_password_or_unknown_user_is_a_clean_authentication_error(cluster):
    broker, port = cluster
    for user, password in (("admin", "wrong"), ("nobody", "whatever")):
        refused = await asyncio.to_thread(produce_one, sasl_config(port, user, password), "scram-events")
        assert refused is not None and refused.code() == KafkaError._AUTHENTICATION
    assert broker.running


@pytest.mark.parametrize("iterations", [4095, 16385])
async def test_iterations_outside_kafkas_bounds_are_unacceptable(cluster, iterations):
    _, port = cluster
    security = ClientSecurity(sasl=SaslCredentials("SCRAM-SHA-512", "admin", ADMIN_PASSWORD))
    async with Admin(f"{HOST}:{port}", security=security) as admin:
        with pytest.raises(ReplogKafkaError) as failure:
            await alter_user_scram_credentials(admin, [ScramUpsertion("bob", "SCRAM-SHA-512", "pw", iterations)])
    assert failure.value.code == UNACCEPTABLE_CREDENTIAL


async def test_replog_configs_manages_users_with_a_command_config_file(cluster, tmp_path, capsys):
    _, port = cluster
    await asyncio.to_thread(configs_round_trip, port, tmp_path, capsys)


def configs_round_trip(port, tmp_path, capsys):
    config = tmp_path / "admin.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                      "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                      f'username="admin" password="{ADMIN_PASSWORD}";\n')
    common = ["--bootstrap-server", f"{HOST}:{port}", "--command-config", str(config), "--entity-type", "users"]
    assert replog_main(["configs", *common, "--alter", "--entity-name", "carol",
                        "--add-config", "SCRAM-SHA-512=[iterations=8192,password=carol-secret]"]) == 0
    assert replog_main(["configs", *common, "--describe", "--entity-name", "carol"]) == 0
    assert ("SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-512=iterations=8192"
            in capsys.readouterr().out)
    admin = AdminClient(sasl_config(port, "admin", ADMIN_PASSWORD))
    admin.create_topics([NewTopic("carol-events", 1, 1)])["carol-events"].result(DEADLINE_S)
    assert produce_one(sasl_config(port, "carol", "carol-secret"), "carol-events") is None
    assert replog_main(["configs", *common, "--alter", "--entity-name", "carol",
                        "--delete-config", "SCRAM-SHA-512"]) == 0
    assert replog_main(["configs", *common, "--describe", "--entity-name", "carol"]) == 1
    assert "RESOURCE_NOT_FOUND" in capsys.readouterr().err


async def test_client_commands_without_the_command_config_cannot_get_in(cluster):
    _, port = cluster
    assert await asyncio.to_thread(replog_main, ["topics", "list", "--bootstrap-server", f"{HOST}:{port}"]) == 1


async def test_bootstrap_credentials_are_written_once_and_survive_restarts(tmp_path):
    """As `kafka-storage format --add-scram`: the first start writes them; a restart replays them from the log,
    and a changed bootstrap.scram.credentials changes nothing, nor brings back a user deleted since."""
    first = tuple(parse_bootstrap_credentials("SCRAM-SHA-512=[name=admin,password=first]"))
    second = tuple(parse_bootstrap_credentials("SCRAM-SHA-512=[name=admin,password=second],"
                                               "SCRAM-SHA-256=[name=other,password=x]"))

    async def started(credentials) -> ClusterController:
        controller = ClusterController(ControllerConfig(inter_broker_secret="s", metadata_log_dir=tmp_path / "meta",
                                                        bootstrap_scram_credentials=credentials))
        await controller.start()
        return controller

    controller = await started(first)
    written = controller.metadata.scram.scram_credential("SCRAM-SHA-512", "admin")
    assert written == first[0][2]
    await controller.stop()
    controller = await started(second)
    try:
        assert controller.metadata.scram.items() == [("SCRAM-SHA-512", "admin", written)]
        controller.commit_records(change_records([Deletion("admin", 2)]))  # as AlterUserScramCredentials does
    finally:
        await controller.stop()
    controller = await started(first)
    try:
        assert controller.metadata.scram.items() == []
    finally:
        await controller.stop()
