"""`replog cluster up --security sasl_ssl|ssl`: what makes a new local cluster a secured one.

- DIR/tls/: a CA of the cluster's own (ca.pem), each node's key and certificate for 127.0.0.1 and localhost
  (broker-N.pem, controller.pem: key then chain, as ssl.keystore.location takes it; good for TLS servers and
  clients, since nodes present them to each other under mTLS), and with `ssl` an admin client certificate
  (admin.crt, admin.key: principal User:CN=admin).
- With `sasl_ssl`, an admin SCRAM-SHA-512 user with a random password, written into the new metadata log by
  the controllers (bootstrap.scram.credentials, as `kafka-storage format --add-scram`); the controllers get
  the salted password, never the password.
- Each broker has one listener on its port, for clients and the other nodes alike: SASL_SSL (SCRAM-SHA-512/256
  for users; PLAIN, which only the cluster's inter.broker.secret passes, for the nodes) or SSL with
  ssl.client.auth=required. The controllers reach the brokers over TLS too (security.inter.broker.protocol);
  the brokers reach the controllers on their PLAINTEXT listener for now. super.users=User:admin
  (User:CN=admin with mTLS) is set for the authorizer.
- DIR/client.properties (mode 0600): the keys librdkafka (kcat -F), Kafka's tools (--command-config) and
  `replog ... --command-config` read to connect as the admin.

Every private key and secret file is written mode 0600.
"""

import base64
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..client.security import ClientSecurity, load_command_config
from ..harness.processes import HOST
from ..harness.tls_material import cert_pem, issue, key_pem, make_ca
from ..log.checkpoint import write_atomically
from ..server.scram_credentials import salted_password
from .manifest import ClusterManifest

SECURITY_MODES = ("plaintext", "sasl_ssl", "ssl")
TLS_DIR = "tls"
CLIENT_PROPERTIES = "client.properties"
ADMIN_USER = "admin"
ADMIN_MECHANISM = "SCRAM-SHA-512"
ADMIN_ITERATIONS = 8192
_KEY_MODE, _PUBLIC_MODE = 0o600, 0o644


@dataclass(frozen=True)
class SecuredCluster:
    """The properties to add to each node (by node name) and the admin's client.properties."""

    node_properties: dict[str, dict[str, str]]
    client_properties: dict[str, str]


def secure_cluster(manifest: ClusterManifest, mode: str) -> SecuredCluster:
    """Write DIR/tls/ and return the properties that secure the planned cluster; nothing for plaintext."""
    if mode not in SECURITY_MODES:
        raise ValueError(f"--security {mode}: expected one of {', '.join(SECURITY_MODES)}")
    if mode == "plaintext":
        return SecuredCluster({}, {})
    tls = manifest.root / TLS_DIR
    tls.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = make_ca()
    ca_pem = _write(tls / "ca.pem", cert_pem(ca_cert), _PUBLIC_MODE)
    node_properties: dict[str, dict[str, str]] = {}
    for node in manifest.nodes:
        key, cert = issue(ca_key, ca_cert, node.name, hosts=(HOST, "localhost"))
        keystore = _write(tls / f"{node.name}.pem", key_pem(key) + cert_pem(cert) + cert_pem(ca_cert), _KEY_MODE)
        node_properties[node.name] = _tls_properties(keystore, ca_pem)
    for broker in manifest.brokers:
        node_properties[broker.name] |= _broker_properties(mode, broker.port)
    for controller in manifest.controllers:
        node_properties[controller.name]["security.inter.broker.protocol"] = mode.upper()
    if mode == "ssl":
        key, cert = issue(ca_key, ca_cert, ADMIN_USER)
        client = {"security.protocol": "SSL", "ssl.ca.location": str(ca_pem),
                  "ssl.certificate.location": str(_write(tls / "admin.crt", cert_pem(cert), _PUBLIC_MODE)),
                  "ssl.key.location": str(_write(tls / "admin.key", key_pem(key), _KEY_MODE))}
        return SecuredCluster(node_properties, client)
    password = secrets.token_urlsafe(24)
    salt = secrets.token_bytes(32)
    salted = salted_password(ADMIN_MECHANISM, password, salt, ADMIN_ITERATIONS)
    bootstrap = (f"{ADMIN_MECHANISM}=[name={ADMIN_USER},salt={base64.b64encode(salt).decode()},"
                 f"saltedpassword={base64.b64encode(salted).decode()},iterations={ADMIN_ITERATIONS}]")
    for controller in manifest.controllers:
        node_properties[controller.name]["bootstrap.scram.credentials"] = bootstrap
    client = {"security.protocol": "SASL_SSL", "sasl.mechanism": ADMIN_MECHANISM, "sasl.username": ADMIN_USER,
              "sasl.password": password, "ssl.ca.location": str(ca_pem)}
    return SecuredCluster(node_properties, client)


def apply_security(properties: Mapping[str, dict[str, str]], secured: SecuredCluster) -> dict[str, dict[str, str]]:
    """Each node's properties with the security keys laid over them."""
    return {name: {**props, **secured.node_properties.get(name, {})} for name, props in properties.items()}


def cluster_client_security(root: Path) -> ClientSecurity | None:
    """How the cluster commands reach the brokers of a secured cluster: as its admin (None: PLAINTEXT)."""
    path = root / CLIENT_PROPERTIES
    return load_command_config(path) if path.exists() else None


def write_client_properties(root: Path, secured: SecuredCluster) -> Path | None:
    if not secured.client_properties:
        return None
    text = "# written by `replog cluster up --security`: the admin's client keys (kcat -F, --command-config)\n"
    text += "".join(f"{key}={value}\n" for key, value in secured.client_properties.items())
    return _write(root / CLIENT_PROPERTIES, text.encode(), _KEY_MODE)


def _tls_properties(keystore: Path, ca_pem: Path) -> dict[str, str]:
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore), "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(ca_pem)}


def _broker_properties(mode: str, port: int) -> dict[str, str]:
    listener = mode.upper()
    props = {
        "listeners": f"{listener}://{HOST}:{port}",
        "inter.broker.listener.name": listener,
        "super.users": f"User:{ADMIN_USER}" if mode == "sasl_ssl" else f"User:CN={ADMIN_USER}",
    }
    if mode == "sasl_ssl":
        props["sasl.enabled.mechanisms"] = "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN"
    else:
        props["ssl.client.auth"] = "required"
    return props


def _write(path: Path, data: bytes, mode: int) -> Path:
    write_atomically(path, data, mode)
    return path
