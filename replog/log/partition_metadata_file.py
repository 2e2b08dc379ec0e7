"""The partition metadata file, `partition.metadata`: the topic id a partition's directory belongs to
(Kafka's PartitionMetadataFile)."""

from __future__ import annotations

import uuid
from pathlib import Path

from replog.log.checkpoint import write_atomically
from replog.log.errors import CorruptCheckpointError, InconsistentTopicIdError

PARTITION_METADATA = "partition.metadata"


def read_topic_id(directory: Path, topic_id: uuid.UUID | None) -> uuid.UUID | None:
    path = directory / PARTITION_METADATA
    if not path.exists():
        if topic_id is not None:
            write_atomically(path, f"version: 0\ntopic_id: {topic_id}\n".encode())
        return topic_id
    fields = dict(line.split(": ", 1) for line in path.read_text().splitlines() if ": " in line)
    try:
        assert fields.get("version") == "0", fields
        stored = uuid.UUID(fields["topic_id"])
    except (AssertionError, KeyError, ValueError) as exc:
        raise CorruptCheckpointError(f"{path}: malformed partition metadata") from exc
    if topic_id is not None and topic_id != stored:
        raise InconsistentTopicIdError(f"{path}: stored topic id {stored}, given {topic_id}")
    return stored
