"""--command-config files: Kafka's Java client keys and librdkafka's map to the same ClientSecurity."""

import ssl

import pytest
import trustme

from replog.client.properties_file import parse_properties
from replog.client.security import (
    SaslCredentials,
    client_security,
    load_command_config,
)


@pytest.fixture(scope="module")
def pem_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("pem")
    ca = trustme.CA()
    leaf = ca.issue_cert("client", common_name="client")
    (root / "ca.pem").write_bytes(ca.cert_pem.bytes())
    (root / "cert.pem").write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    (root / "key.pem").write_bytes(leaf.private_key_pem.bytes())
    (root / "keystore.pem").write_bytes(leaf.private_key_and_cert_chain_pem.bytes())
    return root


def test_properties_lines_comments_and_separators():
    text = "# a comment\n! another\nsecurity.protocol = SASL_SSL\nsasl.password:p=a:ss\n\n"
    assert parse_properties(text) == {"security.protocol": "SASL_SSL", "sasl.password": "p=a:ss"}


def test_a_line_without_a_separator_is_refused_with_its_number():
    with pytest.raises(ValueError, match="line 2"):
        parse_properties("a=b\nnonsense\n")


def test_plaintext_means_no_security():
    assert client_security({}) is None
    assert client_security({"security.protocol": "plaintext"}) is None


def test_librdkafka_sasl_keys():
    security = client_security({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-256",
                                "sasl.username": "alice", "sasl.password": "s3cret"})
    assert security.ssl_context is None
    assert security.sasl == SaslCredentials("SCRAM-SHA-256", "alice", "s3cret")


def test_java_jaas_config_gives_the_user_and_password():
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" '
            'password="pa\\"ss";')
    security = client_security({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                                "sasl.jaas.config": jaas})
    assert security.sasl == SaslCredentials("SCRAM-SHA-512", "admin", 'pa"ss')


@pytest.mark.parametrize("props, message", [
    ({"security.protocol": "KERBEROS"}, "security.protocol"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.username": "a"}, "user name and password"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI", "sasl.username": "a",
      "sasl.password": "b"}, "GSSAPI not supported"),
    ({"security.protocol": "SSL", "ssl.truststore.type": "JKS"}, "PEM stores only"),
    ({"security.protocol": "SSL", "ssl.certificate.location": "/nowhere.pem"}, "go together"),
    ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "ldap"}, "https or none"),
])
def test_bad_settings_are_named(props, message):
    with pytest.raises(ValueError, match=message):
        client_security(props)


def test_librdkafka_tls_keys_make_an_mtls_context(pem_files):
    security = client_security({"security.protocol": "SSL", "ssl.ca.location": str(pem_files / "ca.pem"),
                                "ssl.certificate.location": str(pem_files / "cert.pem"),
                                "ssl.key.location": str(pem_files / "key.pem")})
    assert security.sasl is None
    assert security.ssl_context.verify_mode == ssl.CERT_REQUIRED and security.ssl_context.check_hostname
    assert len(security.ssl_context.get_ca_certs()) == 1


def test_java_pem_stores_and_no_host_name_check(pem_files):
    security = client_security({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                                "sasl.username": "u", "sasl.password": "p",
                                "ssl.truststore.type": "PEM",
                                "ssl.truststore.certificates": (pem_files / "ca.pem").read_text(),
                                "ssl.keystore.type": "PEM",
                                "ssl.keystore.location": str(pem_files / "keystore.pem"),
                                "ssl.endpoint.identification.algorithm": ""})
    assert not security.ssl_context.check_hostname
    assert len(security.ssl_context.get_ca_certs()) == 1


def test_a_missing_ca_file_is_an_error_not_a_silent_fallback(tmp_path):
    with pytest.raises(OSError):
        client_security({"security.protocol": "SSL", "ssl.ca.location": str(tmp_path / "absent.pem")})


def test_load_command_config_names_the_file(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n")
    with pytest.raises(ValueError, match="client.properties: SASL needs"):
        load_command_config(path)
    assert load_command_config(None) is None
