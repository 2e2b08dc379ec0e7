"""The APIs replog speaks, their version ranges, and which versions are flexible (KIP-482)."""

import enum
from dataclasses import dataclass


class ApiKey(enum.IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    CREATE_PARTITIONS = 37
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    SASL_AUTHENTICATE = 36
    DELETE_GROUPS = 42
    OFFSET_DELETE = 47
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    VOTE = 52
    BEGIN_QUORUM_EPOCH = 53
    END_QUORUM_EPOCH = 54
    DESCRIBE_QUORUM = 55
    ALTER_PARTITION = 56
    FETCH_SNAPSHOT = 59
    DESCRIBE_CLUSTER = 60
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63


NEVER_FLEXIBLE = 99  # first_flexible_version of an API whose JSON says "flexibleVersions": "none"


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: ApiKey
    min_version: int
    max_version: int
    first_flexible_version: int  # from Kafka's message JSON "flexibleVersions"

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def is_flexible(self, version: int) -> bool:
        return version >= self.first_flexible_version


# Version floors follow the contract; every client we test negotiates within them.
# The controller-to-broker APIs (LeaderAndIsr, StopReplica, UpdateMetadata) have one version each, since only
# replog's own controller sends them; their codecs are in control.py (kio has no schemas for them).
SUPPORTED_APIS: dict[int, ApiSpec] = {
    spec.key: spec
    for spec in (
        ApiSpec(ApiKey.PRODUCE, 3, 10, 9),  # v10: the current leader in NOT_LEADER_OR_FOLLOWER (KIP-951)
        ApiSpec(ApiKey.FETCH, 4, 12, 12),
        ApiSpec(ApiKey.LIST_OFFSETS, 1, 7, 6),
        ApiSpec(ApiKey.METADATA, 1, 12, 9),
        ApiSpec(ApiKey.API_VERSIONS, 0, 3, 3),
        ApiSpec(ApiKey.CREATE_TOPICS, 2, 7, 5),
        ApiSpec(ApiKey.DELETE_TOPICS, 1, 6, 4),
        ApiSpec(ApiKey.INIT_PRODUCER_ID, 0, 4, 2),
        ApiSpec(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4, 4),
        # The classic group protocol (issue 15); KIP-848's consumer protocol comes later.
        ApiSpec(ApiKey.OFFSET_COMMIT, 2, 9, 8),
        ApiSpec(ApiKey.OFFSET_FETCH, 1, 9, 6),
        ApiSpec(ApiKey.FIND_COORDINATOR, 0, 4, 3),
        ApiSpec(ApiKey.JOIN_GROUP, 0, 9, 6),
        ApiSpec(ApiKey.HEARTBEAT, 0, 4, 4),
        ApiSpec(ApiKey.LEAVE_GROUP, 0, 5, 4),
        ApiSpec(ApiKey.SYNC_GROUP, 0, 5, 4),
        ApiSpec(ApiKey.DESCRIBE_GROUPS, 0, 5, 5),
        ApiSpec(ApiKey.LIST_GROUPS, 0, 5, 3),
        ApiSpec(ApiKey.DELETE_GROUPS, 0, 2, 2),
        ApiSpec(ApiKey.OFFSET_DELETE, 0, 0, NEVER_FLEXIBLE),
        # Admin APIs (issue 16). DescribeConfigs v0 is gone from kio's schemas (Kafka 4 removed it); v1 is
        # what every client since Kafka 1.1 sends.
        ApiSpec(ApiKey.DESCRIBE_CONFIGS, 1, 4, 4),
        ApiSpec(ApiKey.ALTER_CONFIGS, 0, 2, 2),
        ApiSpec(ApiKey.CREATE_PARTITIONS, 0, 3, 2),
        ApiSpec(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1, 1),
        ApiSpec(ApiKey.ELECT_LEADERS, 0, 2, 2),
        ApiSpec(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 1, 0),  # KIP-455; v1: allowReplicationFactorChange (KIP-860)
        ApiSpec(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0, 0),
        ApiSpec(ApiKey.DESCRIBE_CLUSTER, 0, 1, 0),
        ApiSpec(ApiKey.DELETE_RECORDS, 0, 2, 2),
        ApiSpec(ApiKey.DESCRIBE_LOG_DIRS, 1, 4, 2),  # no v0 schema in kio either
        # SCRAM credentials in the metadata log (KIP-554); v0 is the only version.
        ApiSpec(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0, 0),
        ApiSpec(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0, 0),
        # ACLs (issue 17): v0, before pattern types (KIP-290), is gone from Kafka 4 (KIP-896) and from kio.
        ApiSpec(ApiKey.DESCRIBE_ACLS, 1, 3, 2),
        ApiSpec(ApiKey.CREATE_ACLS, 1, 3, 2),
        ApiSpec(ApiKey.DELETE_ACLS, 1, 3, 2),
        ApiSpec(ApiKey.LEADER_AND_ISR, 7, 7, 4),
        ApiSpec(ApiKey.STOP_REPLICA, 4, 4, 2),
        ApiSpec(ApiKey.UPDATE_METADATA, 8, 8, 6),
        # After a v0 handshake bare size-prefixed SASL tokens follow (KIP-43); v1 wraps them in
        # SaslAuthenticate (KIP-152). server/dispatch.py handles both.
        ApiSpec(ApiKey.SASL_HANDSHAKE, 0, 1, NEVER_FLEXIBLE),  # "flexibleVersions": "none"
        ApiSpec(ApiKey.SASL_AUTHENTICATE, 0, 2, 2),
        ApiSpec(ApiKey.ALTER_PARTITION, 2, 3, 0),
        # Broker to controller (KIP-631); v0 of each is all replog's brokers send, the rest adds no meaning here.
        ApiSpec(ApiKey.BROKER_REGISTRATION, 0, 2, 0),
        ApiSpec(ApiKey.BROKER_HEARTBEAT, 0, 1, 0),
        # The controller quorum (KIP-595, KIP-630, KIP-996), served by controllers only; replog/raft/codec.py.
        ApiSpec(ApiKey.VOTE, 0, 2, 0),
        ApiSpec(ApiKey.BEGIN_QUORUM_EPOCH, 0, 0, 1),
        ApiSpec(ApiKey.END_QUORUM_EPOCH, 0, 0, 1),
        ApiSpec(ApiKey.DESCRIBE_QUORUM, 0, 2, 0),
        ApiSpec(ApiKey.FETCH_SNAPSHOT, 0, 0, 0),
    )
}

# A controller's Fetch is the quorum's (KRaft's, with ReplicaState and topic ids: v16), not a broker's range.
CONTROLLER_API_SPECS: dict[int, ApiSpec] = {**SUPPORTED_APIS, ApiKey.FETCH: ApiSpec(ApiKey.FETCH, 16, 16, 12)}


def request_header_version(api_key: int, api_version: int) -> int:
    """Header v2 (with tagged fields) for flexible request versions, v1 otherwise."""
    return 2 if SUPPORTED_APIS[api_key].is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    # ApiVersions always answers with header v0 so a client can parse it before it knows our versions.
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if SUPPORTED_APIS[api_key].is_flexible(api_version) else 0
