"""The quorum's configuration keys, with Kafka's names and defaults (QuorumConfig.java)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

VOTERS = "controller.quorum.voters"
BOOTSTRAP_SERVERS = "controller.quorum.bootstrap.servers"
ELECTION_TIMEOUT_MS = "controller.quorum.election.timeout.ms"
FETCH_TIMEOUT_MS = "controller.quorum.fetch.timeout.ms"
ELECTION_BACKOFF_MAX_MS = "controller.quorum.election.backoff.max.ms"
REQUEST_TIMEOUT_MS = "controller.quorum.request.timeout.ms"
RETRY_BACKOFF_MS = "controller.quorum.retry.backoff.ms"


class QuorumConfigError(ValueError):
    """A quorum key that cannot be parsed; the message names the key."""


@dataclass(frozen=True, slots=True)
class QuorumConfig:
    voters: Mapping[int, tuple[str, int]]  # voter id -> (host, port)
    bootstrap_servers: tuple[tuple[str, int], ...] = ()
    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    fetch_max_wait_ms: int = 500  # KafkaRaftClient's fetchMaxWaitMs: how long a leader parks an empty fetch
    fetch_max_entries: int = 64  # entries returned per Fetch (Kafka bounds bytes; the simulation counts)
    # KIP-996 pre-vote; Kafka uses it once every voter speaks Vote v2. Off: a timed-out voter stands at once,
    # as before KIP-996 (the simulation runs both).
    pre_vote: bool = True
    voter_ids: frozenset[int] = field(init=False)

    def __post_init__(self) -> None:
        for key, value in ((ELECTION_TIMEOUT_MS, self.election_timeout_ms), (FETCH_TIMEOUT_MS, self.fetch_timeout_ms),
                           (REQUEST_TIMEOUT_MS, self.request_timeout_ms)):
            if value <= 0:
                raise QuorumConfigError(f"{key} must be positive, got {value}")
        if self.election_backoff_max_ms < 0 or self.retry_backoff_ms < 0:
            raise QuorumConfigError(f"{ELECTION_BACKOFF_MAX_MS} and {RETRY_BACKOFF_MS} must not be negative")
        if not self.voters and not self.bootstrap_servers:
            raise QuorumConfigError(f"set {VOTERS} or {BOOTSTRAP_SERVERS}")
        object.__setattr__(self, "voter_ids", frozenset(self.voters))

    @property
    def majority(self) -> int:
        return len(self.voter_ids) // 2 + 1


def _host_port(key: str, text: str) -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise QuorumConfigError(f"{key}: {text!r} is not host:port")
    return host.strip("[]"), int(port)


def parse_voters(text: str) -> dict[int, tuple[str, int]]:
    """`controller.quorum.voters`: `id@host:port,...`; ids must be unique."""
    voters: dict[int, tuple[str, int]] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        node_id, at, address = item.partition("@")
        if not at or not node_id.strip().lstrip("-").isdigit():
            raise QuorumConfigError(f"{VOTERS}: {item!r} is not id@host:port")
        voter_id = int(node_id)
        if voter_id < 0 or voter_id in voters:
            raise QuorumConfigError(f"{VOTERS}: voter id {voter_id} is negative or repeated")
        voters[voter_id] = _host_port(VOTERS, address)
    return voters


def quorum_config_from_properties(properties: Mapping[str, str]) -> QuorumConfig:
    def integer(key: str, default: int) -> int:
        raw = properties.get(key)
        if raw is None:
            return default
        try:
            return int(raw)
        except ValueError as exc:
            raise QuorumConfigError(f"{key}: {raw!r} is not an integer") from exc

    bootstrap = tuple(_host_port(BOOTSTRAP_SERVERS, part)
                      for part in properties.get(BOOTSTRAP_SERVERS, "").split(",") if part.strip())
    return QuorumConfig(
        voters=parse_voters(properties.get(VOTERS, "")),
        bootstrap_servers=bootstrap,
        election_timeout_ms=integer(ELECTION_TIMEOUT_MS, 1000),
        fetch_timeout_ms=integer(FETCH_TIMEOUT_MS, 2000),
        election_backoff_max_ms=integer(ELECTION_BACKOFF_MAX_MS, 1000),
        request_timeout_ms=integer(REQUEST_TIMEOUT_MS, 2000),
        retry_backoff_ms=integer(RETRY_BACKOFF_MS, 20),
    )
