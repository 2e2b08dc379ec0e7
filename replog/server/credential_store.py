"""SASL credentials read from a server's properties, until they live in the metadata log (KIP-554).

- PLAIN: the users of a listener's `listener.name.<l>.plain.sasl.jaas.config`,
  in Kafka's PlainLoginModule form: `... PlainLoginModule required user_alice="alice-secret" user_bob="...";`
- SCRAM: `sasl.scram.credentials.file`, one credential a line, `<user> <mechanism> <credential>`, the
  credential as Kafka writes it (ScramCredentialUtils): `salt=<b64>,stored_key=<b64>,server_key=<b64>,
  iterations=<n>`. `replog.server.credential_store.scram_credential_line` makes such a line from a password.
"""

import base64
import re
from dataclasses import dataclass, field
from pathlib import Path

from .sasl import SCRAM_MECHANISMS, ScramCredential

SCRAM_CREDENTIALS_FILE_KEY = "sasl.scram.credentials.file"
PLAIN_JAAS_KEY = "plain.sasl.jaas.config"
# Kafka's minimum for SCRAM-SHA-256/512 (ScramMechanism.minIterations), and its kafka-configs default.
MIN_SCRAM_ITERATIONS = 4096
DEFAULT_SCRAM_ITERATIONS = 4096
MAX_SCRAM_ITERATIONS = 16384  # Kafka's maxIterations: bounds the work an attacker's login can cost us

_JAAS_USER = re.compile(r'\buser_([^\s=]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def parse_plain_jaas_users(jaas: str) -> dict[str, str]:
    """user_<name>="<password>" options of a PlainLoginModule configuration."""
    if "PlainLoginModule" not in jaas:
        raise ValueError("a PLAIN listener's sasl.jaas.config must use "
                         "org.apache.kafka.common.security.plain.PlainLoginModule")
    return {name: password.replace('\\"', '"').replace("\\\\", "\\") for name, password in _JAAS_USER.findall(jaas)}


def format_scram_credential(credential: ScramCredential) -> str:
    b64 = base64.b64encode
    return (f"salt={b64(credential.salt).decode()},stored_key={b64(credential.stored_key).decode()},"
            f"server_key={b64(credential.server_key).decode()},iterations={credential.iterations}")


def parse_scram_credential(text: str) -> ScramCredential:
    fields = dict(item.partition("=")[::2] for item in text.strip().split(","))
    missing = {"salt", "stored_key", "server_key", "iterations"} - fields.keys()
    if missing:
        raise ValueError(f"SCRAM credential lacks {', '.join(sorted(missing))}")
    iterations = int(fields["iterations"])
    if not MIN_SCRAM_ITERATIONS <= iterations <= MAX_SCRAM_ITERATIONS:
        raise ValueError(f"SCRAM iterations {iterations} outside {MIN_SCRAM_ITERATIONS}..{MAX_SCRAM_ITERATIONS}")
    try:
        return ScramCredential(base64.b64decode(fields["salt"], validate=True),
                               base64.b64decode(fields["stored_key"], validate=True),
                               base64.b64decode(fields["server_key"], validate=True), iterations)
    except ValueError as e:
        raise ValueError(f"SCRAM credential is not base64: {e}") from e


def make_scram_credential(mechanism: str, password: str,
                          iterations: int = DEFAULT_SCRAM_ITERATIONS) -> ScramCredential:
    import scramp  # here, not at import: only SCRAM listeners need it, and it slows every start

    salt, stored_key, server_key, iterations = scramp.ScramMechanism(mechanism).make_auth_info(
        password, iteration_count=iterations)
    return ScramCredential(salt, stored_key, server_key, iterations)


def scram_credential_line(username: str, mechanism: str, password: str,
                          iterations: int = DEFAULT_SCRAM_ITERATIONS) -> str:
    return f"{username} {mechanism} {format_scram_credential(make_scram_credential(mechanism, password, iterations))}"


def parse_scram_credentials_file(text: str) -> dict[tuple[str, str], ScramCredential]:
    """{(mechanism, user): credential} from a credentials file; # starts a comment line."""
    credentials = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 3:
            raise ValueError(f"line {lineno}: expected <user> <mechanism> <credential>")
        user, mechanism, credential = parts
        if mechanism not in SCRAM_MECHANISMS:
            raise ValueError(f"line {lineno}: unknown mechanism {mechanism} (expected {', '.join(SCRAM_MECHANISMS)})")
        try:
            credentials[(mechanism, user)] = parse_scram_credential(credential)
        except ValueError as e:
            raise ValueError(f"line {lineno}: {e}") from e
    return credentials


@dataclass(frozen=True)
class PropertiesCredentialStore:
    """A CredentialStore (sasl.py) fixed at startup from the listener's properties."""

    plain_users: dict[str, str] = field(default_factory=dict)
    scram: dict[tuple[str, str], ScramCredential] = field(default_factory=dict)

    def plain_password(self, username: str) -> str | None:
        return self.plain_users.get(username)

    def scram_credential(self, mechanism: str, username: str) -> ScramCredential | None:
        return self.scram.get((mechanism, username))

    @classmethod
    def from_listener_props(cls, props: dict[str, str]) -> "PropertiesCredentialStore":
        """props: the keys that apply to one listener (tls.listener_ssl_props)."""
        plain = parse_plain_jaas_users(props[PLAIN_JAAS_KEY]) if props.get(PLAIN_JAAS_KEY) else {}
        path = props.get(SCRAM_CREDENTIALS_FILE_KEY)
        try:
            scram = parse_scram_credentials_file(Path(path).read_text()) if path else {}
        except ValueError as e:
            raise ValueError(f"{SCRAM_CREDENTIALS_FILE_KEY}={path}: {e}") from e
        return cls(plain, scram)
