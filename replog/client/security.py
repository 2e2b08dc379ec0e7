"""How the bundled client gets in: TLS (a client SSLContext) and SASL (PLAIN, or SCRAM-SHA-256/512 through
scramp's client), as Kafka clients' security.protocol, sasl.mechanism, sasl.username and sasl.password.

Kafka's tools take these from a client properties file (`--command-config FILE`); `load_command_config` reads
one with the keys of Kafka's Java clients (sasl.jaas.config, ssl.truststore.*, ssl.keystore.*, PEM stores only,
KIP-651) or of librdkafka (sasl.username / sasl.password, ssl.ca.location, ssl.certificate.location,
ssl.key.location), so one file serves `replog`, kcat and Kafka's scripts alike.
"""

import argparse
import datetime
import os
import re
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..protocol.apis import ApiKey
from .errors import KafkaError
from .properties_file import parse_properties

SASL_HANDSHAKE_VERSION = 1
SASL_AUTHENTICATE_VERSION = 2
SASL_AUTHENTICATION_FAILED = 58
UNSUPPORTED_SASL_MECHANISM = 33
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True)
class SaslCredentials:
    mechanism: str
    username: str
    password: str

    def __post_init__(self) -> None:
        if self.mechanism not in MECHANISMS:
            raise ValueError(f"sasl.mechanism {self.mechanism} not supported (expected one of {', '.join(MECHANISMS)})")


@dataclass(frozen=True)
class ClientSecurity:
    """ssl_context: TLS to the brokers (SSL, SASL_SSL); sasl: authenticate after connecting (SASL_*)."""

    ssl_context: ssl.SSLContext | None = None
    sasl: SaslCredentials | None = None


async def authenticate(connection, credentials: SaslCredentials) -> int:
    """SaslHandshake v1 then SaslAuthenticate until the mechanism completes; raises KafkaError on refusal.
    A SCRAM server whose final message does not prove it knows the password is refused too (RFC 5802).
    Returns the session lifetime the broker gave in its last answer (KIP-368; 0: the session does not expire)."""
    handshake = await connection.send(ApiKey.SASL_HANDSHAKE, {"mechanism": credentials.mechanism},
                                      version=SASL_HANDSHAKE_VERSION)
    if handshake.error_code != 0:
        raise KafkaError(int(handshake.error_code), f"broker offers SASL mechanisms {list(handshake.mechanisms)}, "
                                                    f"not {credentials.mechanism}")
    if credentials.mechanism == "PLAIN":
        token = b"\0" + credentials.username.encode() + b"\0" + credentials.password.encode()
        return _lifetime_ms(await _step(connection, token))
    import scramp  # here, not at import: only SCRAM logins need it, and it slows every broker start

    client = scramp.ScramClient([credentials.mechanism], credentials.username, credentials.password)
    server_first = await _step(connection, client.get_client_first().encode())
    try:
        client.set_server_first(bytes(server_first.auth_bytes).decode())
        server_final = await _step(connection, client.get_client_final().encode())
        client.set_server_final(bytes(server_final.auth_bytes).decode())
    except (scramp.ScramException, UnicodeDecodeError) as e:
        raise KafkaError(SASL_AUTHENTICATION_FAILED, f"SCRAM exchange with the broker failed: {e}") from e
    return _lifetime_ms(server_final)


async def _step(connection, token: bytes):
    answer = await connection.send(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token}, version=SASL_AUTHENTICATE_VERSION)
    if answer.error_code != 0:
        raise KafkaError(int(answer.error_code), answer.error_message or "SASL authentication failed")
    return answer


def _lifetime_ms(answer) -> int:
    return max(0, answer.session_lifetime // datetime.timedelta(milliseconds=1))


# command-config files

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MAX_COMMAND_CONFIG_BYTES = 1024 * 1024  # a properties file of a few keys; refuse to slurp anything huge
_JAAS_OPTION = re.compile(r'\b(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


def client_security(props: dict[str, str]) -> ClientSecurity | None:
    """The ClientSecurity a client properties mapping asks for; None for PLAINTEXT. ValueError names a bad key."""
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise ValueError(f"security.protocol={protocol}: expected one of {', '.join(SECURITY_PROTOCOLS)}")
    if protocol == "PLAINTEXT":
        return None
    context = _client_ssl_context(props) if protocol.endswith("SSL") else None
    sasl = _sasl_credentials(props) if protocol.startswith("SASL_") else None
    return ClientSecurity(context, sasl)


def load_command_config(path: str | Path | None) -> ClientSecurity | None:
    """`--command-config FILE` as Kafka's tools take it; None (PLAINTEXT) without a file."""
    if path is None:
        return None
    with open(path, "rb") as f:
        data = f.read(MAX_COMMAND_CONFIG_BYTES + 1)
    if len(data) > MAX_COMMAND_CONFIG_BYTES:
        raise ValueError(f"{path}: larger than {MAX_COMMAND_CONFIG_BYTES} bytes, not a client properties file")
    try:
        return client_security(parse_properties(data.decode()))
    except (ValueError, ssl.SSLError) as e:
        raise ValueError(f"{path}: {e}") from e


def add_command_config_argument(parser: argparse.ArgumentParser) -> None:
    """The `--command-config FILE` option every client command shares; load it with load_command_config."""
    parser.add_argument("--command-config", metavar="FILE",
                        help="client properties (security.protocol, sasl.*, ssl.*) as Kafka's tools and "
                             "librdkafka read them (default: none, PLAINTEXT)")


def _sasl_credentials(props: dict[str, str]) -> SaslCredentials:
    # Java clients name the mechanism sasl.mechanism (default GSSAPI, which replog lacks); librdkafka also
    # accepts sasl.mechanisms.
    mechanism = (props.get("sasl.mechanism") or props.get("sasl.mechanisms") or "GSSAPI").strip().upper()
    username, password = props.get("sasl.username"), props.get("sasl.password")
    if jaas := props.get("sasl.jaas.config"):
        options = {k: v.replace('\\"', '"').replace("\\\\", "\\") for k, v in _JAAS_OPTION.findall(jaas)}
        username, password = options.get("username", username), options.get("password", password)
    if username is None or password is None:
        raise ValueError("SASL needs a user name and password: sasl.username and sasl.password, or "
                         "sasl.jaas.config with username=\"...\" password=\"...\"")
    return SaslCredentials(mechanism, username, password)


def _client_ssl_context(props: dict[str, str]) -> ssl.SSLContext:
    """TLS as Kafka's clients: trust the configured CAs (or the system's), present a certificate for mTLS,
    and check the broker's host name unless ssl.endpoint.identification.algorithm is empty or none."""
    for key in ("ssl.truststore.type", "ssl.keystore.type"):
        if props.get(key, "PEM").upper() != "PEM":
            raise ValueError(f"{key}={props[key]} is not supported: replog reads PEM stores only (KIP-651)")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    cafile = props.get("ssl.ca.location") or props.get("ssl.truststore.location")
    if cafile:
        context.load_verify_locations(cafile=cafile)
    elif certificates := props.get("ssl.truststore.certificates"):
        context.load_verify_locations(cadata=certificates)
    else:
        context.load_default_certs()
    _load_client_certificate(context, props)
    algorithm = props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if algorithm not in ("", "none", "https"):
        raise ValueError(f"ssl.endpoint.identification.algorithm={algorithm!r}: expected https or none")
    context.check_hostname = algorithm == "https"
    if props.get("enable.ssl.certificate.verification", "true").strip().lower() == "false":
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _load_client_certificate(context: ssl.SSLContext, props: dict[str, str]) -> None:
    password = props.get("ssl.key.password") or None
    certificate, key = props.get("ssl.certificate.location"), props.get("ssl.key.location")
    keystore = props.get("ssl.keystore.location")
    chain_text, key_text = props.get("ssl.keystore.certificate.chain"), props.get("ssl.keystore.key")
    if certificate or key:
        if not (certificate and key):
            raise ValueError("ssl.certificate.location and ssl.key.location go together")
        context.load_cert_chain(certificate, key, password=password)
    elif keystore:
        context.load_cert_chain(keystore, password=password)  # key and chain in one PEM file
    elif chain_text or key_text:
        if not (chain_text and key_text):
            raise ValueError("ssl.keystore.certificate.chain and ssl.keystore.key go together")
        # ssl reads certificates from files only: the PEM text goes through a private file, removed at once.
        fd, path = tempfile.mkstemp(prefix="replog-client-keystore-", suffix=".pem")  # mode 0600
        try:
            with os.fdopen(fd, "w") as f:
                f.write(key_text.strip() + "\n" + chain_text.strip() + "\n")
            context.load_cert_chain(path, password=password)
        finally:
            os.unlink(path)
