"""A controller and one broker with StandardAuthorizer on, for the ACL tests: a PLAINTEXT listener between the
nodes and a SASL_PLAINTEXT listener for clients with PLAIN users; `User:admin` is the super user."""

import asyncio
import contextlib
import dataclasses
import secrets
import time
from pathlib import Path

from replog.client.admin import Admin
from replog.client.connection import Connection
from replog.client.security import ClientSecurity, SaslCredentials
from replog.controller.server import ClusterController, ControllerConfig
from replog.harness.broker_process import BrokerProcess
from replog.harness.local_cluster import FAST_REPLICATION
from replog.protocol.apis import ApiKey
from replog.protocol.records import build_batch
from tests.conditions import wait_until
from tests.sasl_clients import plain_jaas

HOST = "127.0.0.1"
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
DEADLINE_S = 30.0


@dataclasses.dataclass
class AclCluster:
    controller: ClusterController | None
    broker: BrokerProcess

    @property
    def sasl_port(self) -> int:
        return self.broker.ready.listener_ports["SASL_PLAINTEXT"]

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.sasl_port}"

    def security(self, user: str) -> ClientSecurity:
        return ClientSecurity(sasl=SaslCredentials("PLAIN", user, USERS[user]))

    def admin(self, user: str = "admin") -> Admin:
        return Admin(self.bootstrap, security=self.security(user))

    async def connection(self, user: str) -> Connection:
        connection = Connection(HOST, self.sasl_port, security=self.security(user))
        await connection.connect()
        return connection

    def confluent_config(self, user: str, **extra) -> dict:
        return {"bootstrap.servers": self.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USERS[user],
                "socket.timeout.ms": 10_000, **extra}

    async def restart_controller(self) -> None:
        """A new controller on the same port and metadata log: it knows only what it replays."""
        assert self.controller is not None
        config = dataclasses.replace(self.controller.config, port=self.controller.port)
        await self.controller.stop()
        self.controller = ClusterController(config)
        await self.controller.start()
        await wait_until(lambda: set(self.controller.metadata.active_broker_ids()) == {1}, "the broker to register", DEADLINE_S)


PRODUCE_VERSION = 9


def produce_request(topic: str) -> dict:
    """A Produce of one record to partition 0, acks=1."""
    batch = build_batch([(None, b"v", [], 1000)], base_offset=0)
    return {"transactional_id": None, "acks": 1, "timeout": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}


def error_codes(entity) -> set[int]:
    """Every error_code anywhere in a decoded response."""
    found = set()
    if dataclasses.is_dataclass(entity):
        for f in dataclasses.fields(entity):
            value = getattr(entity, f.name)
            if f.name == "error_code":
                found.add(int(value))
            else:
                found |= error_codes(value)
    elif isinstance(entity, tuple | list):
        for item in entity:
            found |= error_codes(item)
    return found


async def _until_the_broker_lists_itself(cluster: AclCluster) -> None:
    """Clients bootstrap from Metadata: wait until it names the broker (the controller's push after unfencing)."""
    connection = await cluster.connection("admin")
    try:
        deadline = time.monotonic() + DEADLINE_S
        request = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
        while not (await connection.send(ApiKey.METADATA, request, version=12)).brokers:
            assert time.monotonic() < deadline, "the broker's Metadata never listed a broker"
            await asyncio.sleep(0.05)
    finally:
        connection.close()


@contextlib.asynccontextmanager
async def acl_cluster(root: Path, *, with_controller: bool = True, **broker_overrides: str):
    """with_controller=False: a single node that runs itself (its own ACLs, in its state file)."""
    secret = secrets.token_hex(8)
    controller = None
    if with_controller:
        controller = ClusterController(ControllerConfig(inter_broker_secret=secret, metadata_log_dir=root / "meta"))
        await controller.start()
    jaas = plain_jaas(USERS)
    broker = BrokerProcess(root / "broker-1", node_id=1, output=root / "broker-1.out")
    if controller is not None:
        broker.overrides["controller.quorum.bootstrap.servers"] = f"{HOST}:{controller.port}"
    broker.overrides.update({
        **FAST_REPLICATION, "inter.broker.secret": secret,
        "listeners": f"PLAINTEXT://{HOST}:{broker.port},SASL_PLAINTEXT://{HOST}:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:admin",
        "offsets.topic.replication.factor": "1",
        **broker_overrides,
    })
    cluster = AclCluster(controller, broker)
    try:
        await asyncio.to_thread(broker.start)
        if controller is not None:
            await wait_until(lambda: set(controller.metadata.active_broker_ids()) == {1}, "the broker to register", DEADLINE_S)
        await _until_the_broker_lists_itself(cluster)
        yield cluster
    finally:
        await asyncio.to_thread(broker.stop)
        if cluster.controller is not None:
            await cluster.controller.stop()
