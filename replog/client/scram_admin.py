"""SCRAM users, as Kafka's Admin.describeUserScramCredentials / alterUserScramCredentials (KIP-554): the calls
behind `replog configs --entity-type users`. The password never leaves the client: it sends a random salt and
the salted password (Hi of RFC 5802), as Kafka's clients do."""

import hashlib
import secrets
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from ..protocol.apis import ApiKey
from .admin import Admin
from .errors import KafkaError

MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}  # org.apache.kafka.clients.admin.ScramMechanism
MECHANISM_NAMES = {code: name for name, code in MECHANISM_CODES.items()}
DEFAULT_ITERATIONS = 4096  # kafka-configs' default
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


@dataclass(frozen=True, slots=True)
class ScramUpsertion:
    user: str
    mechanism: str
    password: str
    iterations: int = DEFAULT_ITERATIONS


@dataclass(frozen=True, slots=True)
class ScramDeletion:
    user: str
    mechanism: str


def mechanism_code(name: str) -> int:
    code = MECHANISM_CODES.get(name.upper())
    if code is None:
        raise ValueError(f"unknown SCRAM mechanism {name!r} (expected {', '.join(MECHANISM_CODES)})")
    return code


async def describe_user_scram_credentials(admin: Admin, users: list[str] | None = None
                                          ) -> dict[str, list[tuple[str, int]]]:
    """{user: [(mechanism, iterations)]} of the named users (every user if None); KafkaError for a user without
    credentials (RESOURCE_NOT_FOUND), as Kafka's Admin raises it."""
    request = {"users": None if users is None else [{"name": u} for u in users]}
    response = await admin._controller_send(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, request,
                                            admin.request_timeout_ms)
    if response.error_code != ErrorCode.none:
        raise KafkaError(int(response.error_code), response.error_message or "DescribeUserScramCredentials failed")
    described = {}
    for result in response.results:
        if result.error_code != ErrorCode.none:
            raise KafkaError(int(result.error_code), result.error_message or f"user {result.user!r}")
        described[result.user] = [(MECHANISM_NAMES.get(int(c.mechanism), f"UNKNOWN({c.mechanism})"),
                                   int(c.iterations)) for c in result.credential_infos]
    return described


async def alter_user_scram_credentials(admin: Admin, changes: list[ScramUpsertion | ScramDeletion]) -> None:
    """Apply the changes; KafkaError names the first user whose change was refused."""
    deletions, upsertions = [], []
    for change in changes:
        code = mechanism_code(change.mechanism)
        if isinstance(change, ScramDeletion):
            deletions.append({"name": change.user, "mechanism": code})
            continue
        salt = secrets.token_bytes(32)  # Kafka's ScramFormatter.secureRandomBytes makes a 32-byte salt too
        salted = hashlib.pbkdf2_hmac(_HASHES[change.mechanism.upper()], change.password.encode(), salt,
                                     change.iterations)
        upsertions.append({"name": change.user, "mechanism": code, "iterations": change.iterations,
                           "salt": salt, "salted_password": salted})
    response = await admin._controller_send(ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
                                            {"deletions": deletions, "upsertions": upsertions},
                                            admin.request_timeout_ms)
    for result in response.results:
        if result.error_code != ErrorCode.none:
            raise KafkaError(int(result.error_code), f"user {result.user!r}: {result.error_message or ''}")
