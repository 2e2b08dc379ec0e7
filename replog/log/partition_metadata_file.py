"""The partition metadata file, `partition.metadata`: the topic id a partition's directory belongs to
(Kafka's PartitionMetadataFile). A directory left by a deleted topic of the same name carries another
topic id, and must never be taken for the new topic's log."""

from __future__ import annotations

import uuid
from pathlib import Path

from replog.log.checkpoint import write_atomically
from replog.log.errors import CorruptCheckpointError, InconsistentTopicIdError

PARTITION_METADATA = "partition.metadata"
VERSION = "0"


class PartitionMetadataFile:
    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / PARTITION_METADATA

    def read(self) -> uuid.UUID | None:
        """The stored topic id; None when there is no file yet."""
        if not self.path.exists():
            return None
        fields = dict(line.split(": ", 1) for line in self.path.read_text().splitlines() if ": " in line)
        try:
            assert fields.get("version") == VERSION, fields
            return uuid.UUID(fields["topic_id"])
        except (AssertionError, KeyError, ValueError) as exc:
            raise CorruptCheckpointError(f"{self.path}: malformed partition metadata") from exc

    def write(self, topic_id: uuid.UUID, *, durable: bool = True) -> None:
        write_atomically(self.path, f"version: {VERSION}\ntopic_id: {topic_id}\n".encode(), durable=durable)

    def reconcile(self, topic_id: uuid.UUID | None, *, durable: bool = True) -> uuid.UUID | None:
        """The directory's topic id: the stored one, which must equal `topic_id` when both are known, else
        `topic_id` (written down now; fsynced unless not `durable`, see write_atomically)."""
        stored = self.read()
        if stored is None:
            if topic_id is not None:
                self.write(topic_id, durable=durable)
            return topic_id
        if topic_id is not None and topic_id != stored:
            raise InconsistentTopicIdError(f"{self.path}: stored topic id {stored}, given {topic_id}")
        return stored
