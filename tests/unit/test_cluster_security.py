"""`cluster up --security`: the files and the properties that secure a planned cluster."""

import stat

import pytest
from cryptography import x509

from replog.client.security import load_command_config
from replog.cluster_nodes.manifest import Node, Role
from replog.cluster_nodes.plan import plan_cluster
from replog.cluster_nodes.security import (
    apply_security,
    secure_added_broker,
    secure_cluster,
    write_client_properties,
)
from replog.server.scram_credentials import parse_bootstrap_credentials


def planned(tmp_path):
    return plan_cluster(tmp_path, 2, [9000, 9001, 9002])


def test_sasl_ssl_gives_every_broker_one_tls_listener_and_the_controller_the_admin(tmp_path):
    manifest, properties = planned(tmp_path)
    secured = secure_cluster(manifest, "sasl_ssl")
    merged = apply_security(properties, secured)
    broker = merged["broker-1"]
    assert broker["listeners"] == "SASL_SSL://127.0.0.1:9001"
    assert broker["inter.broker.listener.name"] == "SASL_SSL"
    assert "PLAIN" in broker["sasl.enabled.mechanisms"] and "SCRAM-SHA-512" in broker["sasl.enabled.mechanisms"]
    assert broker["super.users"] == "User:admin;User:broker;User:controller"
    assert broker["authorizer.class.name"].endswith("StandardAuthorizer")
    controller = merged["controller"]
    assert controller["security.inter.broker.protocol"] == "SASL_SSL"
    assert controller["listener.security.protocol.map"] == "CONTROLLER:SASL_SSL"
    assert controller["sasl.enabled.mechanisms"] == "PLAIN"  # KAFKA-15513: no SCRAM on the controller listener
    credentials = parse_bootstrap_credentials(controller["bootstrap.scram.credentials"])
    assert [(mechanism, user) for mechanism, user, _ in credentials] == [("SCRAM-SHA-512", "admin"),
                                                                       ("SCRAM-SHA-512", "broker")]
    assert broker["sasl.mechanism.inter.broker.protocol"] == "SCRAM-SHA-512"
    assert broker["inter.broker.sasl.username"] == "broker"
    assert all("inter.broker.secret" not in props for props in merged.values())  # no shared PLAIN secret
    password = secured.client_properties["sasl.password"]
    assert all(password not in value for props in merged.values() for value in props.values())


def test_keys_and_client_properties_are_private_and_load(tmp_path):
    manifest, _ = planned(tmp_path)
    secured = secure_cluster(manifest, "sasl_ssl")
    path = write_client_properties(tmp_path, secured)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for name in ("broker-1.pem", "broker-2.pem", "controller.pem"):
        assert stat.S_IMODE((tmp_path / "tls" / name).stat().st_mode) == 0o600
    security = load_command_config(path)
    assert security.sasl.username == "admin" and security.ssl_context is not None


def test_node_certificates_name_the_loopback_address(tmp_path):
    manifest, _ = planned(tmp_path)
    secure_cluster(manifest, "ssl")
    pem = (tmp_path / "tls" / "broker-1.pem").read_bytes()
    cert = x509.load_pem_x509_certificates(pem[pem.index(b"-----BEGIN CERTIFICATE"):])[0]
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]


def test_ssl_gives_mtls_and_an_admin_certificate(tmp_path):
    manifest, properties = planned(tmp_path)
    secured = secure_cluster(manifest, "ssl")
    merged = apply_security(properties, secured)
    assert merged["broker-2"]["listeners"] == "SSL://127.0.0.1:9002"
    assert merged["broker-2"]["ssl.client.auth"] == "required"
    assert merged["broker-2"]["super.users"] == "User:CN=admin;User:CN=broker;User:CN=controller"
    assert merged["controller"]["listener.security.protocol.map"] == "CONTROLLER:SSL"
    assert merged["controller"]["ssl.client.auth"] == "required"
    assert all("inter.broker.secret" not in props for props in merged.values())
    assert "bootstrap.scram.credentials" not in merged["controller"]
    assert load_command_config(write_client_properties(tmp_path, secured)).sasl is None


def test_plaintext_changes_nothing_and_unknown_modes_are_refused(tmp_path):
    manifest, properties = planned(tmp_path)
    secured = secure_cluster(manifest, "plaintext")
    assert apply_security(properties, secured) == properties
    assert write_client_properties(tmp_path, secured) is None
    with pytest.raises(ValueError, match="--security"):
        secure_cluster(manifest, "kerberos")


@pytest.mark.parametrize("mode", ["ssl", "sasl_ssl"])
def test_add_broker_issues_the_new_broker_a_certificate_from_the_kept_ca_key(tmp_path, mode):
    manifest, _ = planned(tmp_path)
    secure_cluster(manifest, mode)
    assert stat.S_IMODE((tmp_path / "tls" / "ca.key").stat().st_mode) == 0o600
    added = Node(3, Role.BROKER, 9003, tmp_path / "broker-3", [])
    props = secure_added_broker(tmp_path, added)
    pem = (tmp_path / "tls" / "broker-3.pem").read_bytes()
    cert = x509.load_pem_x509_certificates(pem[pem.index(b"-----BEGIN CERTIFICATE"):])[0]
    ca = x509.load_pem_x509_certificate((tmp_path / "tls" / "ca.pem").read_bytes())
    cert.verify_directly_issued_by(ca)
    assert props == {"ssl.keystore.location": str(tmp_path / "tls" / "broker-3.pem")}
    # Under mTLS every broker is User:CN=broker, which the other nodes already list in super.users.
    assert cert.subject.rfc4514_string() == "CN=broker"
