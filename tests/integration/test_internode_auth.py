"""Authentication between nodes on a `replog cluster up --security` cluster (issue 17, item 3): no shared secret.

A SASL_SSL cluster of 3 controllers and 3 brokers (brokers log in to brokers with SCRAM-SHA-512 as `broker`, to
the controllers with PLAIN over TLS; the node principals are super users) replicates and fails over, broker and
controller alike; a broker started with a wrong inter-broker password is refused with a clean error in its log
and keeps running while the others serve; PLAIN with any "shared secret" gets nobody in, and a SCRAM user who
is not a node may not perform cluster actions. An mTLS cluster refuses a broker whose certificate its CA did not
sign. `cluster add-broker` grows the secured cluster. Every cluster is brought down whatever fails."""

import asyncio
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from replog.client.connection import Connection
from replog.client.errors import KafkaError
from replog.client.security import ClientSecurity, SaslCredentials, load_command_config
from replog.cluster_control import add_broker, cluster_status, cluster_up, kill_node, start_node
from replog.cluster_nodes.manifest import load_manifest
from replog.harness.processes import HOST
from replog.harness.tls_material import cert_pem, issue, key_pem, make_ca
from replog.protocol.apis import ApiKey, response_header_version
from replog.protocol.control import (
    LEADER_AND_ISR_VERSION,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
    decode_leader_and_isr_response,
    encode_leader_and_isr_request,
)
from replog.protocol.headers import decode_response_header
from replog.server.inter_broker import open_inter_broker_connection, open_node_connection
from replog.server.properties import read_properties
from tests.integration.test_cluster_cli import bring_down

TIMEOUT_S = 60.0
SASL_AUTHENTICATION_FAILED, CLUSTER_AUTHORIZATION_FAILED, STALE_BROKER_EPOCH = 58, 31, 77


def replog(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "replog", *args], input=stdin, capture_output=True, text=True,
                          timeout=TIMEOUT_S)


def wait_for(condition, what: str, timeout_s: float = TIMEOUT_S):
    """Poll `condition` (returning a truthy value when met) until the deadline; the value it returned."""
    deadline = time.monotonic() + timeout_s
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.2)
    return result


def describe(bootstrap: str, client: Path, topic: str) -> dict[str, str]:
    """Partition 0's Leader and Isr as `replog topics describe` prints them (empty if it fails)."""
    out = replog("topics", "describe", "--topic", topic, "--bootstrap-server", bootstrap, "--command-config",
                 str(client)).stdout
    row = next((line for line in out.splitlines() if "Partition: 0" in line), "")
    fields = dict(zip(row.split()[::2], row.split()[1::2], strict=False))
    return {"leader": fields.get("Leader:", ""), "isr": fields.get("Isr:", "")}


def produce(bootstrap: str, client: Path, topic: str, values: list[str]) -> None:
    done = replog("produce", topic, "--acks", "all", "--bootstrap-server", bootstrap, "--command-config",
                  str(client), stdin="".join(f"{v}\n" for v in values))
    assert done.returncode == 0, done.stderr


def leader_and_isr(topic: str, broker_epoch: int) -> bytes:
    state = LeaderAndIsrPartitionState(topic, 0, 1000, 1, 1000, [1], 1000, [1, 2, 3])
    return encode_leader_and_isr_request(LeaderAndIsrRequest(3000, 1000, broker_epoch,
                                                             [LeaderAndIsrTopicState(topic, uuid.uuid4(), [state])],
                                                             []))


async def send_leader_and_isr(connection: Connection, topic: str, broker_epoch: int = -1) -> int:
    frame = await connection.request(ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION,
                                     [leader_and_isr(topic, broker_epoch)])
    _, offset = decode_response_header(frame, response_header_version(ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION))
    return decode_leader_and_isr_response(frame, offset).error_code


async def outsiders_get_no_cluster_action(port: int, tls, alice: str) -> None:
    """A node's PLAIN secret gets nobody in; alice, a SCRAM user but no node, may not send LeaderAndIsr."""
    with pytest.raises(KafkaError) as refused:  # what a node of an unsecured cluster would send
        await open_inter_broker_connection(HOST, port, client_id="impostor", username="broker-9", secret="guess",
                                           request_timeout_ms=5000, ssl_context=tls)
    assert refused.value.code == SASL_AUTHENTICATION_FAILED
    security = ClientSecurity(tls, SaslCredentials("SCRAM-SHA-512", "alice", alice))
    connection = await open_node_connection(HOST, port, client_id="alice", security=security,
                                            request_timeout_ms=5000)
    try:
        assert await send_leader_and_isr(connection, "replicated") == CLUSTER_AUTHORIZATION_FAILED
    finally:
        connection.close()


async def granted_cluster_action(port: int, tls, alice: str) -> int:
    """What a LeaderAndIsr of alice's for an earlier registration of the broker gets: STALE_BROKER_EPOCH once
    she may perform cluster actions (and nothing is applied), CLUSTER_AUTHORIZATION_FAILED until then."""
    security = ClientSecurity(tls, SaslCredentials("SCRAM-SHA-512", "alice", alice))
    connection = await open_node_connection(HOST, port, client_id="alice", security=security,
                                            request_timeout_ms=5000)
    try:
        return await send_leader_and_isr(connection, "replicated", broker_epoch=0)
    finally:
        connection.close()


def start_broker_with_wrong_password(root: Path) -> subprocess.Popen:
    """A fourth broker configured as broker 1, but logging in with a wrong inter-broker password."""
    props = read_properties(root / "broker-1.properties", [])
    props |= {"node.id": "4", "listeners": f"SASL_SSL://{HOST}:0", "log.dirs": str(root / "intruder"),
              "metrics.port": "0", "metrics.dump.dir": str(root / "intruder-metrics"),
              "inter.broker.sasl.password": "not-the-password"}
    path = root / "intruder.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    with open(root / "intruder.log", "wb") as log:
        return subprocess.Popen([sys.executable, "-m", "replog", "broker", "start", "--config", str(path)],
                                stdout=log, stderr=subprocess.STDOUT)


def test_a_sasl_ssl_cluster_replicates_fails_over_and_refuses_outsiders(tmp_path):
    intruder = None
    try:
        manifest = cluster_up(tmp_path, 3, controllers=3, security="sasl_ssl")
        client = tmp_path / "client.properties"
        bootstrap = ",".join(f"{HOST}:{b.port}" for b in manifest.brokers)
        for node in manifest.nodes:
            assert "inter.broker.secret" not in manifest.config_path(node).read_text()
        created = replog("topics", "create", "--topic", "replicated", "--replication-factor", "3",
                         "--bootstrap-server", bootstrap, "--command-config", str(client))
        assert created.returncode == 0, created.stderr
        produce(bootstrap, client, "replicated", [f"a{i}" for i in range(50)])
        wait_for(lambda: len(describe(bootstrap, client, "replicated")["isr"].split(",")) == 3, "a whole ISR")

        added = replog("configs", "--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config",
                       "SCRAM-SHA-512=[password=alice-secret]", "--bootstrap-server", bootstrap,
                       "--command-config", str(client))
        assert added.returncode == 0, added.stderr
        tls = load_command_config(client).ssl_context
        asyncio.run(outsiders_get_no_cluster_action(manifest.brokers[0].port, tls, "alice-secret"))
        # Kafka authorizes CLUSTER_ACTION like any operation: an ACL allowing it lets alice act as a node does.
        granted = replog("acls", "--add", "--allow-principal", "User:alice", "--operation", "ClusterAction",
                         "--cluster", "--bootstrap-server", bootstrap, "--command-config", str(client))
        assert granted.returncode == 0, granted.stderr
        wait_for(lambda: asyncio.run(granted_cluster_action(manifest.brokers[0].port, tls, "alice-secret"))
                 == STALE_BROKER_EPOCH, "the ACL to grant alice CLUSTER_ACTION")

        intruder = start_broker_with_wrong_password(tmp_path)
        wait_for(lambda: "SASL_AUTHENTICATION_FAILED" in (tmp_path / "intruder.log").read_text()
                 or "invalid credentials" in (tmp_path / "intruder.log").read_text(), "the intruder's refusal")
        assert intruder.poll() is None, "the refused broker crashed"
        assert "Traceback" not in (tmp_path / "intruder.log").read_text()

        leader = int(describe(bootstrap, client, "replicated")["leader"])
        kill_node(tmp_path, leader)
        wait_for(lambda: describe(bootstrap, client, "replicated")["leader"] not in ("", str(leader)),
                 "a new partition leader")
        produce(bootstrap, client, "replicated", [f"b{i}" for i in range(50)])
        start_node(tmp_path, leader)
        wait_for(lambda: len(describe(bootstrap, client, "replicated")["isr"].split(",")) == 3,
                 "the restarted broker back in the ISR")

        active = cluster_status(tmp_path).quorum.leader_id
        kill_node(tmp_path, active)
        wait_for(lambda: (q := cluster_status(tmp_path).quorum) is not None and q.leader_id not in (-1, active),
                 "a new active controller")
        created = replog("topics", "create", "--topic", "after-failover", "--replication-factor", "3",
                         "--bootstrap-server", bootstrap, "--command-config", str(client))
        assert created.returncode == 0, created.stderr

        consumed = replog("consume", "replicated", "--from-beginning", "--max-messages", "100",
                          "--bootstrap-server", bootstrap, "--command-config", str(client))
        assert consumed.stdout.split() == [f"a{i}" for i in range(50)] + [f"b{i}" for i in range(50)], consumed.stderr
        assert intruder.poll() is None
        assert 4 not in (cluster_status(tmp_path).metadata_brokers or {})
        intruder.kill()
        intruder.wait()
        # A broker added now gets a certificate from the kept CA key and logs in as `broker`: every broker lists it.
        assert add_broker(tmp_path).id == 4
    finally:
        if intruder is not None:
            intruder.kill()
            intruder.wait()
        bring_down(tmp_path)


def test_an_mtls_cluster_refuses_a_broker_with_an_untrusted_certificate(tmp_path):
    intruder = None
    try:
        manifest = cluster_up(tmp_path, 1, controllers=1, security="ssl")
        other_key, other_ca = make_ca("some other CA")
        key, cert = issue(other_key, other_ca, "broker", hosts=(HOST, "localhost"))
        keystore = tmp_path / "untrusted.pem"
        keystore.write_bytes(key_pem(key) + cert_pem(cert) + cert_pem(other_ca))
        props = read_properties(tmp_path / "broker-1.properties", [])
        props |= {"node.id": "2", "listeners": f"SSL://{HOST}:0", "log.dirs": str(tmp_path / "intruder"),
                  "metrics.port": "0", "metrics.dump.dir": str(tmp_path / "intruder-metrics"),
                  "ssl.keystore.location": str(keystore)}
        path = tmp_path / "intruder.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        with open(tmp_path / "intruder.log", "wb") as log:
            intruder = subprocess.Popen([sys.executable, "-m", "replog", "broker", "start", "--config", str(path)],
                                        stdout=log, stderr=subprocess.STDOUT)
        controller_log = load_manifest(tmp_path).log_path(manifest.controllers[0])
        wait_for(lambda: "TLS handshake on listener CONTROLLER failed" in controller_log.read_text(),
                 "the controller to refuse the untrusted certificate")
        assert intruder.poll() is None, "the refused broker crashed"
        client = tmp_path / "client.properties"
        bootstrap = f"{HOST}:{manifest.brokers[0].port}"
        listed = replog("topics", "list", "--bootstrap-server", bootstrap, "--command-config", str(client))
        assert listed.returncode == 0, listed.stderr
        status = cluster_status(tmp_path)
        assert status.metadata_brokers is not None and sorted(status.metadata_brokers) == [1]
    finally:
        if intruder is not None:
            intruder.kill()
            intruder.wait()
        bring_down(tmp_path)
