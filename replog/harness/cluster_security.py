"""A LocalCluster over SASL_SSL (the chaos run's `--security sasl_ssl`): a CA and a certificate per broker for
every address it is reached at, one SASL_SSL listener per broker for clients and the other nodes alike, the
controller reaching the brokers over TLS, and an admin SCRAM-SHA-512 user seeded into the metadata log, with
the confluent-kafka settings that log in as it.

The brokers' listener keeps the name PLAINTEXT, mapped to the SASL_SSL protocol
(listener.security.protocol.map, as Kafka allows any name), so LocalCluster's listeners, proxies and
advertised addresses stay as they are; what goes over them is TLS.
"""

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from replog.log.checkpoint import write_atomically
from replog.server.scram_credentials import derive_credential, salted_password
from replog.server.tls import client_context

from .tls_material import cert_pem, issue, key_pem, make_ca

ADMIN_USER = "admin"
ADMIN_MECHANISM = "SCRAM-SHA-512"
ADMIN_ITERATIONS = 4096


@dataclass(frozen=True)
class LocalClusterSecurity:
    broker_overrides: dict[str, str]  # for every broker
    controller_options: dict  # ControllerConfig fields
    client_config: dict[str, str]  # librdkafka (confluent-kafka) keys


def sasl_ssl_cluster(directory: Path, hosts: Sequence[str]) -> LocalClusterSecurity:
    """Write directory/ca.pem and directory/node.pem (one certificate for every broker: the cluster's hosts
    as its names) and return the settings that secure a LocalCluster with them."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = make_ca()
    key, cert = issue(ca_key, ca_cert, "replog-node", hosts=(*hosts, "localhost"))
    ca = directory / "ca.pem"
    keystore = directory / "node.pem"
    write_atomically(ca, cert_pem(ca_cert), 0o644)
    write_atomically(keystore, key_pem(key) + cert_pem(cert) + cert_pem(ca_cert), 0o600)
    tls = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore), "ssl.truststore.type": "PEM",
           "ssl.truststore.location": str(ca)}
    password = secrets.token_urlsafe(18)
    salt = secrets.token_bytes(32)
    credential = derive_credential(ADMIN_MECHANISM, salt,
                                   salted_password(ADMIN_MECHANISM, password, salt, ADMIN_ITERATIONS), ADMIN_ITERATIONS)
    return LocalClusterSecurity(
        broker_overrides={"listener.security.protocol.map": "PLAINTEXT:SASL_SSL",
                          "sasl.enabled.mechanisms": f"{ADMIN_MECHANISM},PLAIN", **tls},
        controller_options={"broker_ssl_context": client_context(tls),
                            "bootstrap_scram_credentials": ((ADMIN_MECHANISM, ADMIN_USER, credential),)},
        client_config={"security.protocol": "SASL_SSL", "sasl.mechanism": ADMIN_MECHANISM,
                       "sasl.username": ADMIN_USER, "sasl.password": password, "ssl.ca.location": str(ca)})
