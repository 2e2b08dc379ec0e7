"""A LocalCluster over SASL_SSL (the chaos run's `--security sasl_ssl`): a CA and one node certificate for every
address a node is reached at, TLS on every link (the controllers' too), an authorizer whose super users are
the admin and the node principals, and no shared secret: as `replog cluster up --security sasl_ssl`
(cluster_nodes/security.py), brokers log in to brokers with SCRAM-SHA-512 as `broker`, and to the controllers
with PLAIN as `broker`; controllers log in with PLAIN as `controller` (a controller's listener cannot take
SCRAM: KAFKA-15513). The admin and `broker` SCRAM credentials are seeded into the metadata log.

The brokers' listener keeps the name PLAINTEXT, mapped to the SASL_SSL protocol (listener.security.protocol.map,
as Kafka allows any name), so LocalCluster's listeners, proxies and advertised addresses stay as they are;
what goes over them is TLS.
"""

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from replog.client.security import ClientSecurity, SaslCredentials
from replog.controller.process import controller_security_fields
from replog.log.checkpoint import write_atomically
from replog.server.scram_credentials import derive_credential, salted_password
from replog.server.tls import client_context

from .tls_material import cert_pem, issue, key_pem, make_ca

ADMIN_USER, BROKER_USER, CONTROLLER_USER = "admin", "broker", "controller"
ADMIN_MECHANISM = "SCRAM-SHA-512"
ADMIN_ITERATIONS = 4096
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule required"


@dataclass(frozen=True)
class LocalClusterSecurity:
    broker_overrides: dict[str, str]  # for every broker
    controller_overrides: dict[str, str]  # for every controller process (its listener is named CONTROLLER)
    controller_options: dict  # ControllerConfig fields, for in-process controllers
    client_config: dict[str, str]  # librdkafka (confluent-kafka) keys
    broker_client: ClientSecurity  # the admin, for the bundled client (SCRAM-SHA-512)
    controller_client: ClientSecurity  # the admin at the controllers (PLAIN, its own password there)


def sasl_ssl_cluster(directory: Path, hosts: Sequence[str]) -> LocalClusterSecurity:
    """Write directory/ca.pem and directory/node.pem (one certificate for every node: hosts, where the nodes
    are reached, as its names) and return the settings that secure a LocalCluster with them."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = make_ca()
    key, cert = issue(ca_key, ca_cert, "replog-node", hosts=(*hosts, "localhost"))
    ca = directory / "ca.pem"
    keystore = directory / "node.pem"
    write_atomically(ca, cert_pem(ca_cert), 0o644)
    write_atomically(keystore, key_pem(key) + cert_pem(cert) + cert_pem(ca_cert), 0o600)
    tls = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore), "ssl.truststore.type": "PEM",
           "ssl.truststore.location": str(ca)}
    admin, broker, controller, controller_admin = (secrets.token_urlsafe(18) for _ in range(4))
    members = {"authorizer.class.name": STANDARD_AUTHORIZER,
               "super.users": f"User:{ADMIN_USER};User:{BROKER_USER};User:{CONTROLLER_USER}"}
    controllers = {
        **tls, **members,
        "listener.security.protocol.map": "CONTROLLER:SASL_SSL", "controller.listener.names": "CONTROLLER",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": _plain_users({BROKER_USER: broker, CONTROLLER_USER: controller,
                                                                         ADMIN_USER: controller_admin}),
        "security.inter.broker.protocol": "SASL_SSL", "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "inter.broker.sasl.username": CONTROLLER_USER, "inter.broker.sasl.password": controller,
    }
    seeded = ",".join(f"{ADMIN_MECHANISM}=[name={user},password={password},iterations={ADMIN_ITERATIONS}]"
                      for user, password in ((ADMIN_USER, admin), (BROKER_USER, broker)))
    in_process = controller_security_fields({**controllers, "listeners": "CONTROLLER://127.0.0.1:0"})
    return LocalClusterSecurity(
        broker_overrides={
            **tls, **members,
            "listener.security.protocol.map": "PLAINTEXT:SASL_SSL,CONTROLLER:SASL_SSL",
            "controller.listener.names": "CONTROLLER",
            "sasl.enabled.mechanisms": f"{ADMIN_MECHANISM},PLAIN",
            "listener.name.plaintext.plain.sasl.jaas.config": _plain_users({CONTROLLER_USER: controller}),
            "sasl.mechanism.inter.broker.protocol": ADMIN_MECHANISM, "sasl.mechanism.controller.protocol": "PLAIN",
            "inter.broker.sasl.username": BROKER_USER, "inter.broker.sasl.password": broker},
        controller_overrides={**controllers, "bootstrap.scram.credentials": seeded},
        controller_options={**in_process, "bootstrap_scram_credentials": (
            (ADMIN_MECHANISM, ADMIN_USER, _credential(admin)), (ADMIN_MECHANISM, BROKER_USER, _credential(broker)))},
        client_config={"security.protocol": "SASL_SSL", "sasl.mechanism": ADMIN_MECHANISM,
                       "sasl.username": ADMIN_USER, "sasl.password": admin, "ssl.ca.location": str(ca)},
        broker_client=ClientSecurity(client_context(tls), SaslCredentials(ADMIN_MECHANISM, ADMIN_USER, admin)),
        controller_client=ClientSecurity(client_context(tls), SaslCredentials("PLAIN", ADMIN_USER, controller_admin)))


def _credential(password: str):
    salt = secrets.token_bytes(32)
    salted = salted_password(ADMIN_MECHANISM, password, salt, ADMIN_ITERATIONS)
    return derive_credential(ADMIN_MECHANISM, salt, salted, ADMIN_ITERATIONS)


def _plain_users(users: dict[str, str]) -> str:
    return _PLAIN_MODULE + "".join(f' user_{name}="{password}"' for name, password in users.items()) + ";"
