"""The controller's metadata log on the Raft quorum (KIP-595): records are the values of the quorum's entries.

Each record (records.py, a JSON object) is one entry of the `__cluster_metadata` log, so offsets count records
as before and a broker epoch (the offset of its registration) stays unique and growing. A snapshot (KIP-630)
is records.snapshot_records as JSON lines; the log behind it is deleted. The controller epoch is the quorum's
leader epoch, so every restart (a new election) raises it.

A quorum of one leads as soon as it starts, and an entry is committed once it is on the voter's disk, so
`append` fsyncs before it returns, as the single-node log did. With several voters (KIP-631's standby
controllers) the leader is the active controller: it decides, appends and applies at once, but what it tells
the brokers waits until the records are committed (the channel's commit gate, server.py); standbys replay the
committed records (`take_committed_records`) and so hold the same state when they take over.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from replog.log.dir_lock import DirectoryLock
from replog.raft.commits import Committed, LoadSnapshot
from replog.raft.config import VOTERS, QuorumConfig, QuorumConfigError
from replog.raft.messages import OffsetAndEpoch
from replog.raft.shell import ConnectFactory, QuorumShell
from replog.raft.snapshots import SnapshotPolicy

from .records import CorruptMetadataError, Record

log = logging.getLogger(__name__)

METADATA_PARTITION_DIR = "__cluster_metadata-0"  # Kafka's directory for the metadata log's one partition
MAX_RECORD_BYTES = 1 << 20  # far above any real record; a bug must not write (and later read) a giant one


def controller_quorum_config(controller_id: int, host: str, port: int,
                             quorum: QuorumConfig | None) -> QuorumConfig:
    """The quorum this controller runs: the configured one (this controller must be one of its voters), or
    else a quorum of one on its own listener."""
    if quorum is None:
        return QuorumConfig(voters={controller_id: (host, port)})
    if controller_id not in quorum.voter_ids:
        raise QuorumConfigError(f"{VOTERS}: node.id {controller_id} is not among the voters "
                                f"{sorted(quorum.voter_ids)}")
    return quorum


def encode_record(record: Record) -> bytes:
    data = json.dumps(record, separators=(",", ":"), sort_keys=True).encode()
    assert len(data) <= MAX_RECORD_BYTES, f"a {len(data)}-byte {record.get('type')} record"
    return data


def decode_record(data: bytes, where: str) -> Record:
    try:
        record = json.loads(data)
    except ValueError as e:
        raise CorruptMetadataError(f"{where}: not a metadata record ({e})") from e
    if not isinstance(record, dict) or "type" not in record:
        raise CorruptMetadataError(f"{where}: not a metadata record: {data[:100]!r}")
    return record


class QuorumMetadataLog:
    """The open log; create it with `await QuorumMetadataLog.open(...)`."""

    def __init__(self, shell: QuorumShell, lock: DirectoryLock, policy: SnapshotPolicy,
                 snapshot_records: Callable[[], list[Record]]) -> None:
        self._shell = shell
        self._lock = lock
        self._policy = policy
        self._snapshot_records = snapshot_records  # the state machine's current state, as records
        self._records_since_snapshot = 0
        self._bytes_since_snapshot = 0
        # The records this controller appended and that have not committed yet, by offset, with their bytes:
        # on commit they are taken from here rather than decoded again (10,000 partition records at once
        # when a large topic is created). An entry another leader wrote at that offset meanwhile has other
        # bytes and is decoded.
        self._appended: dict[int, tuple[bytes, Record]] = {}

    @classmethod
    def start(cls, directory: Path, controller_id: int, quorum: QuorumConfig, cluster_id: str,
              connect: ConnectFactory, *, policy: SnapshotPolicy | None = None) -> QuorumMetadataLog:
        """Start this controller's voter in `directory` without waiting for a leader: the caller sets
        `shell.on_commit` and reads `take_committed_records()` as the quorum moves."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        lock = DirectoryLock.acquire(directory)
        shell = QuorumShell(controller_id, quorum, directory / METADATA_PARTITION_DIR, connect,
                            cluster_id=cluster_id)
        try:
            shell.start()
        except BaseException:
            lock.release()
            raise
        return cls(shell, lock, policy or SnapshotPolicy(), list)

    def take_committed_records(self) -> tuple[bool, list[Record]]:
        """What committed since the last call, as records: (True when a snapshot comes first, so the state
        must start over from it, the records)."""
        reset, out = False, []
        for item in self._shell.take_committed():
            if isinstance(item, LoadSnapshot):
                where = f"{self._shell.directory} snapshot {item.snapshot_id.offset}-{item.snapshot_id.epoch}"
                reset, out = True, [decode_record(line, where) for line in item.data.splitlines() if line]
            elif isinstance(item, Committed):
                self._records_since_snapshot += 1
                self._bytes_since_snapshot += len(item.entry.value)
                appended = self._appended.pop(item.offset, None)
                if item.entry.control:
                    continue
                if appended is not None and appended[0] == item.entry.value:
                    out.append(appended[1])
                else:
                    out.append(decode_record(item.entry.value, f"{self._shell.directory} offset {item.offset}"))
        if reset:
            self._appended.clear()
        return reset, out

    def maybe_snapshot(self, state_records: Callable[[], list[Record]]) -> None:
        """Snapshot when the policy says one is due (KIP-630) and the whole log is committed and applied, so
        that state_records(), the state machine's state, is the state at the log's end."""
        node = self._shell.node
        assert node is not None
        if node.high_watermark == node.log.end_offset and self._policy.due(self._records_since_snapshot,
                                                                            self._bytes_since_snapshot):
            self.compact(state_records())

    @classmethod
    async def open(cls, directory: Path, controller_id: int, quorum: QuorumConfig, cluster_id: str,
                   connect: ConnectFactory, *, snapshot_records: Callable[[], list[Record]],
                   policy: SnapshotPolicy | None = None) -> tuple[QuorumMetadataLog, list[Record]]:
        """Start this controller's voter in `directory` and return it with every committed record, oldest first
        (the snapshot's first). snapshot_records() is the controller's state as records: a snapshot is taken
        of it when `policy` says one is due."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        lock = DirectoryLock.acquire(directory)  # two controllers on one dir would interleave their appends
        shell = QuorumShell(controller_id, quorum, directory / METADATA_PARTITION_DIR, connect,
                            cluster_id=cluster_id)
        try:
            shell.start()
            metadata_log = cls(shell, lock, policy or SnapshotPolicy(), snapshot_records)
            records = await metadata_log._committed_so_far()
        except BaseException:
            await shell.stop()
            lock.release()
            raise
        shell.on_commit = metadata_log._discard_committed
        return metadata_log, records

    async def _committed_so_far(self) -> list[Record]:
        """Wait until this leader's first entry commits (then everything before it has), and read it all."""
        shell = self._shell
        assert shell.node is not None and shell.is_leader, "a quorum of one leads once started"
        await shell.wait_committed(shell.node.log.end_offset)
        return self.take_committed_records()[1]

    def _discard_committed(self) -> None:
        """The active controller applied its records when it decided them; committing only moves the queue,
        and may make a snapshot due."""
        self.take_committed_records()
        self.maybe_snapshot(self._snapshot_records)

    @property
    def epoch(self) -> int:
        """The quorum's leader epoch: the controller epoch."""
        assert self._shell.node is not None
        return self._shell.node.epoch

    @property
    def next_offset(self) -> int:
        assert self._shell.node is not None
        return self._shell.node.log.end_offset

    @property
    def shell(self) -> QuorumShell:
        return self._shell

    def append(self, records: Sequence[dict[str, Any]]) -> int:
        """Propose the records and make them durable here before returning (a quorum of one has then decided
        them); returns the offset of the first."""
        assert records
        first = self.next_offset
        values = [encode_record(r) for r in records]
        # Before proposing: a quorum of one commits them inside propose_durably.
        self._appended.update((first + i, (value, record)) for i, (value, record) in enumerate(zip(values, records, strict=True)))
        self._shell.propose_durably(values)
        return first

    def compact(self, records: Sequence[dict[str, Any]]) -> None:
        """Snapshot the state `records` rebuild, which is the state at the log's end (all of it committed and
        applied), and delete the log behind it (KIP-630)."""
        node = self._shell.node
        assert node is not None and node.high_watermark == node.log.end_offset
        snapshot_id: OffsetAndEpoch = node.log.last_offset_and_epoch()
        if snapshot_id.offset == node.log.start_offset:
            return  # nothing since the last snapshot
        node.create_snapshot(snapshot_id, b"\n".join(encode_record(r) for r in records) + b"\n")
        self._records_since_snapshot = self._bytes_since_snapshot = 0
        log.info("metadata snapshot at offset %d (epoch %d) of %d records", snapshot_id.offset, snapshot_id.epoch,
                 len(records))

    async def close(self) -> None:
        await self._shell.stop()
        self._lock.release()
