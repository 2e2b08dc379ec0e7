"""The __consumer_offsets records a Write from an Outcome stands for, as (key, value) pairs in Kafka's
formats; a tombstone has a null value (Kafka's GroupMetadataManager.storeGroup / storeOffsets / the
tombstones of cleanupGroupMetadata and deleteGroups)."""

from __future__ import annotations

from replog.coordinator import records
from replog.coordinator.outcomes import StoreGroup, StoreOffsets, Write
from replog.coordinator.records import NO_TIMESTAMP


def records_of(write: Write) -> list[tuple[bytes, bytes | None]]:
    if isinstance(write, StoreGroup):
        key = records.encode_key(records.GroupMetadataKey(write.group_id))
        return [(key, records.encode_group_metadata_value(write.value))]
    if isinstance(write, StoreOffsets):
        pairs: list[tuple[bytes, bytes | None]] = []
        for topic, partition, o in write.offsets:
            key = records.encode_key(records.OffsetCommitKey(write.group_id, topic, partition))
            expire = NO_TIMESTAMP if o.expire_timestamp_ms is None else o.expire_timestamp_ms
            value = records.OffsetCommitValue(o.offset, o.metadata, o.commit_timestamp_ms, o.leader_epoch, expire)
            pairs.append((key, records.encode_offset_commit_value(value)))
        return pairs
    return [(records.encode_key(key), None) for key in write.keys]
