"""Hand-written codecs for the controller-to-broker requests LeaderAndIsr (key 4), StopReplica (key 5) and
UpdateMetadata (key 6), with their responses.

kio has no schema for these APIs (Kafka 4 removed them along with ZooKeeper mode), so they are written here
from Kafka 3.x's message JSON specs. replog's own controller is the only sender, so each API has exactly one
version, the newest and flexible one: LeaderAndIsr v7, StopReplica v4, UpdateMetadata v8. Flexible means
compact strings and arrays, a tagged-field section after every struct, request header v2 and response
header v1 (see apis.py).

Decoders take the frame and the offset where the body starts, and reject truncated input and trailing bytes
with DecodeError. Array counts come from Reader.array_length, which bounds them by the bytes left, and
elements are appended one by one, so a hostile count never makes us allocate up front. Encoders return the
body only: no size prefix, no header.

One module per API (leader_and_isr.py, update_metadata.py, stop_replica.py, their shared fields in
control_fields.py); this module gathers their names, which the broker and the controller import from here.
"""

from .leader_and_isr import (
    LEADER_AND_ISR_VERSION,
    LEADER_DURING_DELETE,
    LeaderAndIsrPartitionError,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LeaderAndIsrTopicError,
    LeaderAndIsrTopicState,
    LiveLeader,
    decode_leader_and_isr_request,
    decode_leader_and_isr_response,
    encode_leader_and_isr_request,
    encode_leader_and_isr_response,
)
from .stop_replica import (
    STOP_REPLICA_VERSION,
    StopReplicaPartitionError,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
    StopReplicaTopicState,
    decode_stop_replica_request,
    decode_stop_replica_response,
    encode_stop_replica_request,
    encode_stop_replica_response,
)
from .update_metadata import (
    UPDATE_METADATA_FULL,
    UPDATE_METADATA_VERSION,
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
    UpdateMetadataTopicState,
    decode_update_metadata_request,
    decode_update_metadata_response,
    encode_update_metadata_request,
    encode_update_metadata_response,
)

__all__ = [
    "LEADER_AND_ISR_VERSION",
    "LEADER_DURING_DELETE",
    "LeaderAndIsrPartitionError",
    "LeaderAndIsrPartitionState",
    "LeaderAndIsrRequest",
    "LeaderAndIsrResponse",
    "LeaderAndIsrTopicError",
    "LeaderAndIsrTopicState",
    "LiveLeader",
    "decode_leader_and_isr_request",
    "decode_leader_and_isr_response",
    "encode_leader_and_isr_request",
    "encode_leader_and_isr_response",
    "STOP_REPLICA_VERSION",
    "StopReplicaPartitionError",
    "StopReplicaPartitionState",
    "StopReplicaRequest",
    "StopReplicaResponse",
    "StopReplicaTopicState",
    "decode_stop_replica_request",
    "decode_stop_replica_response",
    "encode_stop_replica_request",
    "encode_stop_replica_response",
    "UPDATE_METADATA_FULL",
    "UPDATE_METADATA_VERSION",
    "UpdateMetadataBroker",
    "UpdateMetadataEndpoint",
    "UpdateMetadataPartitionState",
    "UpdateMetadataRequest",
    "UpdateMetadataResponse",
    "UpdateMetadataTopicState",
    "decode_update_metadata_request",
    "decode_update_metadata_response",
    "encode_update_metadata_request",
    "encode_update_metadata_response",
]
