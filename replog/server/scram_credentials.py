"""SCRAM credentials kept in the metadata log (KIP-554), sans-IO: the table the controller and every broker hold,
and Kafka's rules for DescribeUserScramCredentials (50) and AlterUserScramCredentials (51).

The client computes the salted password (Hi(password, salt, i), RFC 5802) and sends it with its salt and
iteration count; the controller derives the stored and server keys from it and keeps only those: the password
and the salted password never reach the metadata log (Kafka's UserScramCredentialRecord keeps the salted
password; replog keeps less). The table is a CredentialStore for the SASL SCRAM exchange (sasl.py).
"""

import base64
import hashlib
import hmac
import secrets
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .sasl import SCRAM_MECHANISMS, CredentialStore, ScramCredential

# ScramMechanism's wire codes (org.apache.kafka.clients.admin.ScramMechanism); 0 is UNKNOWN.
MECHANISM_CODES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
CODE_OF_MECHANISM = {name: code for code, name in MECHANISM_CODES.items()}
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's ScramMechanism.minIterations (4096 for both) and the controller's MAX_ITERATIONS.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
MAX_USERS = 100_000  # bounds the table a hostile admin could grow; Kafka has no limit but its heap
MAX_FIELD_BYTES = 1024  # a salt or a salted password (64 bytes for SHA-512); more is not a credential

# Kafka's error codes for these APIs (kio's ErrorCode values, kept here so this module needs no kio).
NONE = 0
UNSUPPORTED_SASL_MECHANISM = 33
RESOURCE_NOT_FOUND = 91
DUPLICATE_RESOURCE = 92
UNACCEPTABLE_CREDENTIAL = 93


@dataclass(frozen=True, slots=True)
class Upsertion:
    name: str
    mechanism: int  # a MECHANISM_CODES key, or anything a client sent
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True, slots=True)
class Deletion:
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class UserResult:
    user: str
    error_code: int = NONE
    error_message: str | None = None


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(Normalize(password), salt, i) of RFC 5802, which is PBKDF2 with the mechanism's HMAC: what a client
    sends in an upsertion (Kafka's ScramFormatter.saltedPassword; the password as UTF-8, as Kafka's)."""
    return hashlib.pbkdf2_hmac(_HASHES[mechanism], password.encode(), salt, iterations)


def derive_credential(mechanism: str, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
    """StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey = HMAC(SaltedPassword, "Server Key")."""
    digest = _HASHES[mechanism]
    client_key = hmac.digest(salted, b"Client Key", digest)
    return ScramCredential(salt, hashlib.new(digest, client_key).digest(),
                           hmac.digest(salted, b"Server Key", digest), iterations)


class ScramCredentialTable:
    """{(mechanism, user): credential}, as replay of the metadata log (or UpdateMetadata) leaves it."""

    def __init__(self) -> None:
        self._credentials: dict[tuple[str, str], ScramCredential] = {}

    def __len__(self) -> int:
        return len(self._credentials)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ScramCredentialTable) and self._credentials == other._credentials

    def items(self) -> list[tuple[str, str, ScramCredential]]:
        """(mechanism, user, credential), sorted: the order snapshots and UpdateMetadata list them in."""
        return [(m, u, c) for (m, u), c in sorted(self._credentials.items())]

    def put(self, mechanism: str, user: str, credential: ScramCredential) -> None:
        assert mechanism in SCRAM_MECHANISMS
        self._credentials[(mechanism, user)] = credential

    def remove(self, mechanism: str, user: str) -> None:
        del self._credentials[(mechanism, user)]

    def replace_all(self, entries: Iterable[tuple[str, str, ScramCredential]]) -> None:
        """The whole table, as a full UpdateMetadata carries it; a mechanism this node lacks is skipped."""
        self._credentials = {(m, u): c for m, u, c in entries if m in SCRAM_MECHANISMS}

    def scram_credential(self, mechanism: str, username: str) -> ScramCredential | None:
        return self._credentials.get((mechanism, username))

    def plain_password(self, username: str) -> None:
        return None  # PLAIN users come from the listener's JAAS config only

    def mechanisms_of(self, user: str) -> list[tuple[int, int]]:
        """(mechanism code, iterations) of each credential the user has, as DescribeUserScramCredentials shows."""
        return [(CODE_OF_MECHANISM[m], self._credentials[(m, user)].iterations) for m in SCRAM_MECHANISMS
                if (m, user) in self._credentials]

    def users(self) -> list[str]:
        return sorted({u for _, u in self._credentials})


def describe(table: ScramCredentialTable, users: Sequence[str] | None) -> list[tuple[UserResult, list]]:
    """Kafka's ScramImage.describe: every user when none are named; a user named twice is DUPLICATE_RESOURCE
    (once), one without credentials RESOURCE_NOT_FOUND. Each result with its [(mechanism, iterations)]."""
    if not users:
        return [(UserResult(u), table.mechanisms_of(u)) for u in table.users()]
    counts = Counter(users)
    results = []
    for user in dict.fromkeys(users):  # each named user once, in request order
        if counts[user] > 1:
            results.append((UserResult(user, DUPLICATE_RESOURCE, "Cannot describe SCRAM credentials for the "
                                       f"same user twice in a single request: {user}"), []))
        elif not (infos := table.mechanisms_of(user)):
            results.append((UserResult(user, RESOURCE_NOT_FOUND,
                                       f"Attempt to describe a user credential that does not exist: {user}"), []))
        else:
            results.append((UserResult(user), infos))
    return results


def decide_alterations(table: ScramCredentialTable, deletions: Sequence[Deletion],
                       upsertions: Sequence[Upsertion]) -> tuple[list[UserResult], list[Deletion | Upsertion]]:
    """Kafka's ScramControlManager.alterCredentials: one result per user named; a user altered twice in one
    request (whatever the mechanisms) is DUPLICATE_RESOURCE and none of its changes apply; the accepted
    changes, deletions first, are what the controller turns into records."""
    accepted: dict[str, Deletion | Upsertion] = {}
    errors: dict[str, UserResult] = {}
    for change in [*deletions, *upsertions]:
        name = change.name
        if name in errors:
            continue
        if accepted.pop(name, None) is not None:
            errors[name] = UserResult(name, DUPLICATE_RESOURCE,
                                      "A user credential cannot be altered twice in the same request")
            continue
        error = _validate(table, change)
        if error is not None:
            errors[name] = error
        else:
            accepted[name] = change
    changes = sorted(accepted.values(), key=lambda c: isinstance(c, Upsertion))  # deletions first, as Kafka's
    return [UserResult(c.name) for c in changes] + list(errors.values()), changes


def apply_changes(table: ScramCredentialTable, changes: Sequence[Deletion | Upsertion]) -> None:
    """Carry out accepted changes (decide_alterations) on a table directly: what a single node without a
    metadata log does, where a controller commits records instead (controller/scram.py)."""
    for change in changes:
        mechanism = MECHANISM_CODES[change.mechanism]
        if isinstance(change, Deletion):
            table.remove(mechanism, change.name)
        else:
            table.put(mechanism, change.name,
                      derive_credential(mechanism, change.salt, change.salted_password, change.iterations))


def changes_of_request(request) -> tuple[list[Deletion], list[Upsertion]]:
    """The deletions and upsertions of a decoded AlterUserScramCredentials request."""
    return ([Deletion(d.name, int(d.mechanism)) for d in request.deletions],
            [Upsertion(u.name, int(u.mechanism), int(u.iterations), bytes(u.salt), bytes(u.salted_password))
             for u in request.upsertions])


def _validate(table: ScramCredentialTable, change: Deletion | Upsertion) -> UserResult | None:
    if not change.name:
        return UserResult(change.name, UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    mechanism = MECHANISM_CODES.get(change.mechanism)
    if mechanism is None:
        return UserResult(change.name, UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    if isinstance(change, Deletion):
        if table.scram_credential(mechanism, change.name) is None:
            return UserResult(change.name, RESOURCE_NOT_FOUND,
                              "Attempt to delete a user credential that does not exist")
        return None
    if change.iterations < MIN_ITERATIONS:
        return UserResult(change.name, UNACCEPTABLE_CREDENTIAL, "Too few iterations")
    if change.iterations > MAX_ITERATIONS:
        return UserResult(change.name, UNACCEPTABLE_CREDENTIAL, "Too many iterations")
    if not change.salt or not change.salted_password or max(len(change.salt),
                                                             len(change.salted_password)) > MAX_FIELD_BYTES:
        return UserResult(change.name, UNACCEPTABLE_CREDENTIAL, "Salt and salted password must be 1 to "
                          f"{MAX_FIELD_BYTES} bytes")
    if table.scram_credential(mechanism, change.name) is None and len(table) >= MAX_USERS:
        return UserResult(change.name, UNACCEPTABLE_CREDENTIAL, f"More than {MAX_USERS} SCRAM credentials")
    return None


class LayeredCredentialStore:
    """A listener's credentials: the metadata log's SCRAM table first, then the listener's properties
    (PLAIN users of its JAAS config; SCRAM users of sasl.scram.credentials.file, a single node's source)."""

    def __init__(self, metadata: CredentialStore, properties: CredentialStore) -> None:
        self._metadata = metadata
        self._properties = properties

    def plain_password(self, username: str) -> str | None:
        return self._properties.plain_password(username)

    def scram_credential(self, mechanism: str, username: str) -> ScramCredential | None:
        return (self._metadata.scram_credential(mechanism, username)
                or self._properties.scram_credential(mechanism, username))


def parse_bootstrap_credentials(text: str) -> list[tuple[str, str, ScramCredential]]:
    """`kafka-storage format --add-scram` values, comma-separated:
    SCRAM-SHA-512=[name=admin,password=secret] or SCRAM-SHA-512=[name=admin,salt=<b64>,saltedpassword=<b64>,
    iterations=8192] (iterations default 4096). ValueError names what is wrong."""
    entries = []
    for item in _split_bracketed(text):
        mechanism, sep, body = item.partition("=")
        mechanism = mechanism.strip().upper()
        if mechanism not in SCRAM_MECHANISMS or not sep or not (body.startswith("[") and body.endswith("]")):
            raise ValueError(f"{item!r}: expected SCRAM-SHA-256=[name=...,password=...] or SCRAM-SHA-512=[...]")
        fields = dict(part.partition("=")[::2] for part in body[1:-1].split(","))
        name = fields.get("name", "")
        iterations = int(fields.get("iterations", MIN_ITERATIONS))
        if not name or not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise ValueError(f"{item!r}: needs a name and iterations in {MIN_ITERATIONS}..{MAX_ITERATIONS}")
        if "password" in fields:
            salt = secrets.token_bytes(32)
            salted = salted_password(mechanism, fields["password"], salt, iterations)
        elif "salt" in fields and "saltedpassword" in fields:
            salt, salted = base64.b64decode(fields["salt"]), base64.b64decode(fields["saltedpassword"])
        else:
            raise ValueError(f"{item!r}: needs password=, or salt= and saltedpassword=")
        entries.append((mechanism, name, derive_credential(mechanism, salt, salted, iterations)))
    return entries


def _split_bracketed(text: str) -> list[str]:
    items, depth, current = [], 0, ""
    for char in text:
        if char == "," and depth == 0:
            items.append(current.strip())
            current = ""
            continue
        depth += {"[": 1, "]": -1}.get(char, 0)
        current += char
    items.append(current.strip())
    return [item for item in items if item]
