"""TLS contexts from Kafka's ssl.* keys: the stores replog reads, the settings it applies, the errors that
refuse a listener, and the principal a client certificate gives."""

import ssl

import pytest
import trustme

from replog.server.listener_config import ListenerSpec, SecurityProtocol
from replog.server.listener_security import build_listener_security
from replog.server.tls import (
    certificate_principal,
    client_context,
    listener_ssl_props,
    openssl_cipher_name,
    server_context,
)

CA = trustme.CA()
SERVER = CA.issue_cert("127.0.0.1")


@pytest.fixture
def keystore(tmp_path):
    path = tmp_path / "server.pem"
    SERVER.private_key_and_cert_chain_pem.write_to_path(str(path))
    return str(path)


def test_keystore_from_one_pem_file(keystore):
    context = server_context({"ssl.keystore.location": keystore})
    assert context.verify_mode == ssl.CERT_NONE
    assert (context.minimum_version, context.maximum_version) == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)


def test_keystore_as_pem_text_in_the_properties_kip_651():
    context = server_context({"ssl.keystore.type": "PEM",
                              "ssl.keystore.certificate.chain": SERVER.cert_chain_pems[0].bytes().decode(),
                              "ssl.keystore.key": SERVER.private_key_pem.bytes().decode(),
                              "ssl.truststore.certificates": CA.cert_pem.bytes().decode(),
                              "ssl.client.auth": "required"})
    assert context.verify_mode == ssl.CERT_REQUIRED


@pytest.mark.parametrize("mode, verify", [("none", ssl.CERT_NONE), ("requested", ssl.CERT_OPTIONAL),
                                          ("required", ssl.CERT_REQUIRED)])
def test_client_auth_modes(keystore, tmp_path, mode, verify):
    truststore = tmp_path / "ca.pem"
    CA.cert_pem.write_to_path(str(truststore))
    props = {"ssl.keystore.location": keystore, "ssl.truststore.location": str(truststore), "ssl.client.auth": mode}
    assert server_context(props).verify_mode == verify


@pytest.mark.parametrize("props, message", [
    ({}, "a TLS listener needs a key"),
    ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type=JKS is not supported"),
    ({"ssl.client.auth": "required"}, "needs a truststore"),
    ({"ssl.client.auth": "always"}, "expected none, requested or required"),
    ({"ssl.enabled.protocols": "TLSv1.2,SSLv3"}, "ssl.enabled.protocols: unknown"),
    ({"ssl.cipher.suites": "NOT-A-CIPHER"}, "no usable cipher"),
])
def test_bad_ssl_settings_are_refused(keystore, props, message):
    if props.get("ssl.keystore.type") != "JKS" and props:
        props = {"ssl.keystore.location": keystore, **props}
    with pytest.raises(ValueError, match=message):
        server_context(props)


def test_enabled_protocols_bound_the_versions(keystore):
    context = server_context({"ssl.keystore.location": keystore, "ssl.enabled.protocols": "TLSv1.3"})
    assert context.minimum_version == context.maximum_version == ssl.TLSVersion.TLSv1_3


@pytest.mark.parametrize("name, openssl", [
    ("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384"),
    ("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305"),
    ("TLS_AES_128_GCM_SHA256", None),  # a TLS 1.3 suite: always on in Python's ssl
    ("ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256"),
])
def test_kafka_cipher_suite_names_translate_to_openssls(name, openssl):
    assert openssl_cipher_name(name) == openssl


def test_cipher_suites_restrict_tls12(keystore):
    context = server_context({"ssl.keystore.location": keystore,
                              "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"})
    tls12 = {c["name"] for c in context.get_ciphers() if c["protocol"] == "TLSv1.2"}
    assert tls12 == {"ECDHE-ECDSA-AES128-GCM-SHA256"}


def test_per_listener_keys_override_the_general_ones():
    props = {"ssl.client.auth": "none", "listener.name.mtls.ssl.client.auth": "required", "num.partitions": "3"}
    assert listener_ssl_props(props, "MTLS") == {"ssl.client.auth": "required"}
    assert listener_ssl_props(props, "SSL") == {"ssl.client.auth": "none"}


def test_client_context_checks_host_names_unless_identification_is_off():
    assert client_context({"ssl.truststore.certificates": CA.cert_pem.bytes().decode()}).check_hostname
    assert not client_context({"ssl.endpoint.identification.algorithm": ""}).check_hostname


def test_certificate_principal_is_the_subject_as_kafka_writes_it():
    leaf = CA.issue_cert("alice", common_name="alice", organization_name="Example Corp",
                         organization_unit_name="Eng")
    der = ssl.PEM_cert_to_DER_cert(leaf.cert_chain_pems[0].bytes().decode())
    assert certificate_principal(der) == "User:CN=alice,OU=Eng,O=Example Corp"
    assert certificate_principal(None) is None


def test_a_listener_whose_tls_cannot_load_names_the_listener(tmp_path):
    spec = ListenerSpec("EXTERNAL", "h", 0, SecurityProtocol.SASL_SSL, "h", 0)
    with pytest.raises(ValueError, match=r"listener EXTERNAL \(SASL_SSL\): .*No such file"):
        build_listener_security(spec, {"ssl.keystore.location": str(tmp_path / "missing.pem")})


def test_a_sasl_listener_with_kafkas_default_mechanism_is_refused(keystore):
    spec = ListenerSpec("SASL_SSL", "h", 0, SecurityProtocol.SASL_SSL, "h", 0)
    with pytest.raises(ValueError, match="listener SASL_SSL .*GSSAPI not supported"):
        build_listener_security(spec, {"ssl.keystore.location": keystore})
    security = build_listener_security(spec, {"ssl.keystore.location": keystore,
                                              "sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    assert security.tls is not None and security.sasl.required and security.sasl.mechanisms == ("SCRAM-SHA-512",)
