"""The `quorum-state` file: the election state a voter must not forget (FileQuorumStateStore, version 0).

Kafka's JSON: {"clusterId", "leaderId", "leaderEpoch", "votedId", "appliedOffset", "currentVoters":
[{"voterId": n}], "data_version": 0}, with -1 for an unknown leader or no vote. It is written before a vote
is granted or a new epoch acted on: to `<file>.tmp`, fsynced, renamed over the file, then the directory is
fsynced. The file operations are injectable so tests can fail them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from replog.log.checkpoint import write_atomically

DATA_VERSION = 0
MAX_FILE_BYTES = 1 << 20  # a voter list, not a log: anything larger is not a quorum-state file
UNKNOWN = -1


class CorruptQuorumStateError(Exception):
    """The quorum-state file cannot be parsed; the message names the file."""


class VoterSetMismatchError(Exception):
    """The configured voters differ from the ones this node voted with before; the message names both."""


@dataclass(frozen=True, slots=True)
class ElectionState:
    """Kafka's ElectionState: an epoch, and in it at most a known leader or the candidate voted for."""

    epoch: int
    leader_id: int | None
    voted_id: int | None
    voters: frozenset[int]

    def __post_init__(self) -> None:
        assert self.epoch >= 0
        assert self.leader_id is None or self.voted_id is None or self.leader_id == self.voted_id

    def to_json(self) -> bytes:
        return json.dumps({
            "clusterId": "",
            "leaderId": UNKNOWN if self.leader_id is None else self.leader_id,
            "leaderEpoch": self.epoch,
            "votedId": UNKNOWN if self.voted_id is None else self.voted_id,
            "appliedOffset": 0,
            "currentVoters": [{"voterId": voter} for voter in sorted(self.voters)],
            "data_version": DATA_VERSION,
        }).encode()

    @staticmethod
    def from_json(data: bytes, where: str) -> ElectionState:
        try:
            document = json.loads(data)
            if document["data_version"] != DATA_VERSION:
                raise CorruptQuorumStateError(f"{where}: data_version {document['data_version']} is not {DATA_VERSION}")
            epoch, leader, voted = (document[key] for key in ("leaderEpoch", "leaderId", "votedId"))
            voters = frozenset(entry["voterId"] for entry in document["currentVoters"])
            if not all(type(n) is int for n in (epoch, leader, voted, *voters)) or epoch < 0:
                raise CorruptQuorumStateError(f"{where}: ids and epoch must be integers, epoch >= 0")
            if leader != UNKNOWN and voted != UNKNOWN and leader != voted:
                raise CorruptQuorumStateError(f"{where}: leader {leader} and voted {voted} differ in one epoch")
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptQuorumStateError(f"{where}: not a quorum-state file ({exc!r})") from exc
        return ElectionState(epoch, None if leader == UNKNOWN else leader, None if voted == UNKNOWN else voted, voters)


class QuorumStateStore(Protocol):
    """Where a node keeps its ElectionState: QuorumStateFile, or MemoryQuorumStateStore in tests."""

    def read(self) -> ElectionState | None: ...

    def write(self, state: ElectionState) -> None: ...


class QuorumStateFile:
    """The quorum-state file in a log directory."""

    def __init__(self, path: Path, write: Callable[[Path, bytes], None] = write_atomically) -> None:
        self.path = Path(path)
        self._write = write

    def read(self) -> ElectionState | None:
        """The saved state, None for a new node; a corrupt file raises CorruptQuorumStateError naming it."""
        try:
            with open(self.path, "rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            return None
        if len(data) > MAX_FILE_BYTES:
            raise CorruptQuorumStateError(f"{self.path}: larger than {MAX_FILE_BYTES} bytes")
        return ElectionState.from_json(data, str(self.path))

    def write(self, state: ElectionState) -> None:
        self._write(self.path, state.to_json())


class MemoryQuorumStateStore:
    """The store for tests and the simulation: a write is durable when it returns, as the file's is."""

    def __init__(self) -> None:
        self.state: ElectionState | None = None
        self.writes = 0

    def read(self) -> ElectionState | None:
        return self.state

    def write(self, state: ElectionState) -> None:
        self.state = state
        self.writes += 1


def check_voters(saved: ElectionState | None, configured: frozenset[int], where: str) -> None:
    """Refuse to start with voters other than the ones the saved votes were cast among (QuorumState.initialize)."""
    if saved is not None and saved.voters and saved.voters != configured:
        raise VoterSetMismatchError(
            f"{where}: configured controller.quorum.voters {sorted(configured)} differ from the voters "
            f"{sorted(saved.voters)} saved in the quorum-state file; fix the configuration, or remove the file "
            f"if the quorum was really reconfigured")
