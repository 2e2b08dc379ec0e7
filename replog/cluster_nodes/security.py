"""`replog cluster up --security sasl_ssl|ssl`: what makes a new local cluster a secured one.

- DIR/tls/: a CA of the cluster's own (ca.pem; its key ca.key, mode 0600, so `cluster add-broker` can issue a
  new broker's certificate), each node's key and certificate for 127.0.0.1 and localhost (broker-N.pem,
  controller.pem: key then chain, as ssl.keystore.location takes it; good for TLS servers and clients), and
  with `ssl` an admin client certificate (admin.crt, admin.key: principal User:CN=admin).
- Every listener is TLS, the controllers' too (controller.listener.names=CONTROLLER), and an authorizer is on
  (StandardAuthorizer) with super.users: the admin and the node principals, which thereby may perform cluster
  actions (KIP-801). No shared inter.broker.secret: each node logs in as itself (server/inter_broker.py).
- `sasl_ssl`: brokers listen SASL_SSL. Users and brokers log in to brokers with SCRAM-SHA-512; the admin's
  and the `broker` user's credentials are written into the new metadata log by the controllers
  (bootstrap.scram.credentials, as `kafka-storage format --add-scram`), which get the salted password only.
  The controllers' listener takes PLAIN over TLS with configured users (a controller cannot take SCRAM, whose
  credentials live in the log it serves: KAFKA-15513): `broker` and `controller`; the controllers log in to
  the brokers as `controller`, with PLAIN too, since a broker learns SCRAM credentials from the controller.
- `ssl`: mTLS everywhere (ssl.client.auth=required); the principals are the certificates' subjects:
  User:CN=broker for every broker, User:CN=controller for every controller, User:CN=admin.
- DIR/client.properties (mode 0600): the keys librdkafka (kcat -F), Kafka's tools (--command-config) and
  `replog ... --command-config` read to connect as the admin; DIR/controller-client.properties the same for
  the controllers (`replog metadata-quorum --bootstrap-controller ... --command-config`): with `sasl_ssl`, PLAIN
  as the controllers' own `admin` user, whose password differs from the admin's SCRAM one.

Every private key and secret file (and the nodes' properties, which hold their passwords) is written mode 0600.
"""

import base64
import dataclasses
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..client.security import ClientSecurity, load_command_config
from ..harness.processes import HOST
from ..harness.tls_material import cert_pem, issue, key_pem, load_ca, make_ca
from ..log.checkpoint import write_atomically
from ..server.scram_credentials import salted_password
from .manifest import ClusterManifest, Node, Role

SECURITY_MODES = ("plaintext", "sasl_ssl", "ssl")
TLS_DIR = "tls"
CLIENT_PROPERTIES = "client.properties"
CONTROLLER_CLIENT_PROPERTIES = "controller-client.properties"
ADMIN_USER = "admin"
BROKER_USER, CONTROLLER_USER = "broker", "controller"  # the node principals' names
ADMIN_MECHANISM = "SCRAM-SHA-512"
ADMIN_ITERATIONS = 8192
CONTROLLER_LISTENER = "CONTROLLER"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
_KEY_MODE, _PUBLIC_MODE = 0o600, 0o644
_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule required"


@dataclass(frozen=True)
class SecuredCluster:
    """The properties to add to each node (by node name), the admin's client.properties, and its
    controller-client.properties."""

    node_properties: dict[str, dict[str, str]]
    client_properties: dict[str, str]
    controller_client_properties: dict[str, str] = dataclasses.field(default_factory=dict)


def secure_cluster(manifest: ClusterManifest, mode: str) -> SecuredCluster:
    """Write DIR/tls/ and return the properties that secure the planned cluster; nothing for plaintext."""
    if mode not in SECURITY_MODES:
        raise ValueError(f"--security {mode}: expected one of {', '.join(SECURITY_MODES)}")
    if mode == "plaintext":
        return SecuredCluster({}, {})
    tls = manifest.root / TLS_DIR
    tls.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = make_ca()
    _write(tls / "ca.key", key_pem(ca_key), _KEY_MODE)
    ca_pem = _write(tls / "ca.pem", cert_pem(ca_cert), _PUBLIC_MODE)
    node_properties = {node.name: _node_tls(manifest, node, ca_key, ca_cert) for node in manifest.nodes}
    if mode == "ssl":
        super_users = f"User:CN={ADMIN_USER};User:CN={BROKER_USER};User:CN={CONTROLLER_USER}"
        for node in manifest.nodes:
            node_properties[node.name] |= _mtls_properties(node, super_users)
        key, cert = issue(ca_key, ca_cert, ADMIN_USER)
        client = {"security.protocol": "SSL", "ssl.ca.location": str(ca_pem),
                  "ssl.certificate.location": str(_write(tls / "admin.crt", cert_pem(cert), _PUBLIC_MODE)),
                  "ssl.key.location": str(_write(tls / "admin.key", key_pem(key), _KEY_MODE))}
        return SecuredCluster(node_properties, client, client)
    admin_password, broker_password, controller_password, controller_admin_password = (
        secrets.token_urlsafe(24) for _ in range(4))
    bootstrap = ",".join(_bootstrap_credential(user, password) for user, password in
                         ((ADMIN_USER, admin_password), (BROKER_USER, broker_password)))
    super_users = f"User:{ADMIN_USER};User:{BROKER_USER};User:{CONTROLLER_USER}"
    for broker in manifest.brokers:
        node_properties[broker.name] |= _sasl_broker_properties(broker.port, super_users, broker_password,
                                                                controller_password)
    controllers = _sasl_controller_properties(super_users, bootstrap, {
        BROKER_USER: broker_password, CONTROLLER_USER: controller_password, ADMIN_USER: controller_admin_password})
    for controller in manifest.controllers:
        node_properties[controller.name] |= {"listeners": f"{CONTROLLER_LISTENER}://{HOST}:{controller.port}",
                                             **controllers}
    client = {"security.protocol": "SASL_SSL", "sasl.mechanism": ADMIN_MECHANISM, "sasl.username": ADMIN_USER,
              "sasl.password": admin_password, "ssl.ca.location": str(ca_pem)}
    controller_client = {**client, "sasl.mechanism": "PLAIN", "sasl.password": controller_admin_password}
    return SecuredCluster(node_properties, client, controller_client)


def secure_added_broker(root: Path, node: Node) -> dict[str, str]:
    """`cluster add-broker` on a secured cluster: a certificate for the new broker, issued with DIR/tls/ca.key;
    the keys that point the broker's properties (copied from another broker's) at it."""
    tls = root / TLS_DIR
    ca_key, ca_cert = load_ca(tls / "ca.key", tls / "ca.pem")
    return _node_tls_files(tls, node, BROKER_USER, ca_key, ca_cert)


def _node_tls(manifest: ClusterManifest, node: Node, ca_key, ca_cert) -> dict[str, str]:
    # Under mTLS the certificate's subject is the node's principal: one per role, so a new broker is a member.
    subject = BROKER_USER if node.role is Role.BROKER else CONTROLLER_USER
    return {**_node_tls_files(manifest.root / TLS_DIR, node, subject, ca_key, ca_cert),
            "ssl.keystore.type": "PEM", "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(manifest.root / TLS_DIR / "ca.pem"),
            "authorizer.class.name": STANDARD_AUTHORIZER}


def _node_tls_files(tls: Path, node: Node, subject: str, ca_key, ca_cert) -> dict[str, str]:
    key, cert = issue(ca_key, ca_cert, subject, hosts=(HOST, "localhost"))
    keystore = _write(tls / f"{node.name}.pem", key_pem(key) + cert_pem(cert) + cert_pem(ca_cert), _KEY_MODE)
    return {"ssl.keystore.location": str(keystore)}


def _mtls_properties(node: Node, super_users: str) -> dict[str, str]:
    props = {"ssl.client.auth": "required", "super.users": super_users,
             "controller.listener.names": CONTROLLER_LISTENER}
    if node.role is Role.CONTROLLER:
        return props | {"listeners": f"{CONTROLLER_LISTENER}://{HOST}:{node.port}",
                        "listener.security.protocol.map": f"{CONTROLLER_LISTENER}:SSL",
                        "security.inter.broker.protocol": "SSL"}
    return props | {"listeners": f"SSL://{HOST}:{node.port}", "inter.broker.listener.name": "SSL",
                    "listener.security.protocol.map": f"SSL:SSL,{CONTROLLER_LISTENER}:SSL"}


def _sasl_broker_properties(port: int, super_users: str, broker_password: str,
                            controller_password: str) -> dict[str, str]:
    return {
        "listeners": f"SASL_SSL://{HOST}:{port}",
        "inter.broker.listener.name": "SASL_SSL",
        "listener.security.protocol.map": f"SASL_SSL:SASL_SSL,{CONTROLLER_LISTENER}:SASL_SSL",
        "controller.listener.names": CONTROLLER_LISTENER,
        "super.users": super_users,
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
        # PLAIN on the brokers' listener knows one user: the controllers, which cannot use SCRAM towards a
        # broker that has not yet heard the credentials from them.
        "listener.name.sasl_ssl.plain.sasl.jaas.config": _plain_users({CONTROLLER_USER: controller_password}),
        "sasl.mechanism.inter.broker.protocol": ADMIN_MECHANISM,
        "sasl.mechanism.controller.protocol": "PLAIN",
        "inter.broker.sasl.username": BROKER_USER,
        "inter.broker.sasl.password": broker_password,
    }


def _sasl_controller_properties(super_users: str, bootstrap: str, plain_users: Mapping[str, str]) -> dict[str, str]:
    return {
        "listener.security.protocol.map": f"{CONTROLLER_LISTENER}:SASL_SSL",
        "controller.listener.names": CONTROLLER_LISTENER,
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": _plain_users(plain_users),
        "security.inter.broker.protocol": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "inter.broker.sasl.username": CONTROLLER_USER,
        "inter.broker.sasl.password": plain_users[CONTROLLER_USER],
        "super.users": super_users,
        "bootstrap.scram.credentials": bootstrap,
    }


def _plain_users(users: Mapping[str, str]) -> str:
    return _PLAIN_MODULE + "".join(f' user_{name}="{password}"' for name, password in users.items()) + ";"


def _bootstrap_credential(user: str, password: str) -> str:
    salt = secrets.token_bytes(32)
    salted = salted_password(ADMIN_MECHANISM, password, salt, ADMIN_ITERATIONS)
    return (f"{ADMIN_MECHANISM}=[name={user},salt={base64.b64encode(salt).decode()},"
            f"saltedpassword={base64.b64encode(salted).decode()},iterations={ADMIN_ITERATIONS}]")


def apply_security(properties: Mapping[str, dict[str, str]], secured: SecuredCluster) -> dict[str, dict[str, str]]:
    """Each node's properties with the security keys laid over them; a secured cluster's nodes share no
    inter.broker.secret (each logs in as itself)."""
    if not secured.node_properties:
        return {name: dict(props) for name, props in properties.items()}
    return {name: {**{k: v for k, v in props.items() if k != "inter.broker.secret"},
                   **secured.node_properties.get(name, {})} for name, props in properties.items()}


def cluster_client_security(root: Path) -> ClientSecurity | None:
    """How the cluster commands reach the brokers of a secured cluster: as its admin (None: PLAINTEXT)."""
    path = root / CLIENT_PROPERTIES
    return load_command_config(path) if path.exists() else None


def cluster_controller_security(root: Path) -> ClientSecurity | None:
    """How the cluster commands reach the controllers of a secured cluster: as its admin (None: PLAINTEXT)."""
    path = root / CONTROLLER_CLIENT_PROPERTIES
    return load_command_config(path) if path.exists() else None


def write_client_properties(root: Path, secured: SecuredCluster) -> Path | None:
    """DIR/client.properties (returned) and DIR/controller-client.properties, mode 0600; None for plaintext."""
    if not secured.client_properties:
        return None
    for name, props, what in ((CONTROLLER_CLIENT_PROPERTIES, secured.controller_client_properties, "controllers"),
                              (CLIENT_PROPERTIES, secured.client_properties, "brokers")):
        text = (f"# written by `replog cluster up --security`: the admin's client keys for the {what} "
                f"(kcat -F, --command-config)\n")
        text += "".join(f"{key}={value}\n" for key, value in props.items())
        path = _write(root / name, text.encode(), _KEY_MODE)
    return path


def _write(path: Path, data: bytes, mode: int) -> Path:
    write_atomically(path, data, mode)
    return path
