"""One module per API; `build_handlers` binds each to the context it acts on (handlers/context.py)."""

import functools
from collections.abc import Callable

from replog.protocol.apis import ApiKey
from replog.server.dispatch import Handler
from replog.server.handlers import shared_handlers

from ..access import Access
from ..replica_manager import ReplicaManager
from . import (
    acls,
    alter_configs,
    alter_user_scram_credentials,
    create_partitions,
    create_topics,
    delete_groups,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_user_scram_credentials,
    elect_leaders,
    fetch,
    find_coordinator,
    heartbeat,
    init_producer_id,
    join_group,
    leader_and_isr,
    leave_group,
    list_groups,
    list_offsets,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    partition_reassignments,
    produce,
    stop_replica,
    sync_group,
    update_metadata,
)
from .context import ConfigAdmin, ControlPlane, GroupCoordination, TopicAdmin

_REPLICA_APIS = {
    ApiKey.FETCH: fetch,
    ApiKey.LIST_OFFSETS: list_offsets,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch,
    ApiKey.DELETE_RECORDS: delete_records,
    ApiKey.DESCRIBE_LOG_DIRS: describe_log_dirs,
}
_TOPIC_APIS = {
    ApiKey.METADATA: metadata,
    ApiKey.CREATE_TOPICS: create_topics,
    ApiKey.DELETE_TOPICS: delete_topics,
}
_CONTROL_APIS = {
    ApiKey.LEADER_AND_ISR: leader_and_isr,
    ApiKey.UPDATE_METADATA: update_metadata,
    ApiKey.STOP_REPLICA: stop_replica,
}
_GROUP_APIS = {
    ApiKey.FIND_COORDINATOR: find_coordinator,
    ApiKey.JOIN_GROUP: join_group,
    ApiKey.SYNC_GROUP: sync_group,
    ApiKey.HEARTBEAT: heartbeat,
    ApiKey.LEAVE_GROUP: leave_group,
    ApiKey.OFFSET_COMMIT: offset_commit,
    ApiKey.OFFSET_FETCH: offset_fetch,
    ApiKey.LIST_GROUPS: list_groups,
    ApiKey.DESCRIBE_GROUPS: describe_groups,
    ApiKey.DELETE_GROUPS: delete_groups,
    ApiKey.OFFSET_DELETE: offset_delete,
}
_ADMIN_APIS = {
    ApiKey.DESCRIBE_CONFIGS: describe_configs,
    ApiKey.ALTER_CONFIGS: alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: alter_configs,
    ApiKey.CREATE_PARTITIONS: create_partitions,
    ApiKey.ELECT_LEADERS: elect_leaders,
    ApiKey.DESCRIBE_CLUSTER: describe_cluster,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: partition_reassignments,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: alter_user_scram_credentials,
    ApiKey.DESCRIBE_ACLS: acls,
    ApiKey.CREATE_ACLS: acls,
    ApiKey.DELETE_ACLS: acls,
}
BROKER_APIS = (frozenset(_REPLICA_APIS) | frozenset(_TOPIC_APIS) | frozenset(_CONTROL_APIS) | frozenset(_GROUP_APIS)
               | frozenset(_ADMIN_APIS)
               | {ApiKey.PRODUCE, ApiKey.INIT_PRODUCER_ID, ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE,
                  ApiKey.SASL_AUTHENTICATE})


def build_handlers(replicas: ReplicaManager, access: Access, topics: TopicAdmin, control: ControlPlane,
                   groups: GroupCoordination, allocate_producer_id: Callable[[], int], inter_broker_secret: str | None,
                   admin: ConfigAdmin) -> dict[int, Handler]:
    handlers: dict[int, Handler] = {
        **{key: functools.partial(module.handle, replicas=replicas, access=access)
           for key, module in _REPLICA_APIS.items()},
        **{key: functools.partial(module.handle, topics=topics) for key, module in _TOPIC_APIS.items()},
        **{key: functools.partial(module.handle, control=control) for key, module in _CONTROL_APIS.items()},
        **{key: functools.partial(module.handle, admin=admin) for key, module in _ADMIN_APIS.items()},
        **{key: functools.partial(module.handle, groups=groups) for key, module in _GROUP_APIS.items()},
        # Produce also reads the metadata image: a NOT_LEADER_OR_FOLLOWER answer names the leader (KIP-951).
        ApiKey.PRODUCE: functools.partial(produce.handle, replicas=replicas, access=access, topics=topics),
        ApiKey.INIT_PRODUCER_ID: functools.partial(init_producer_id.handle, allocate_producer_id=allocate_producer_id,
                                                   access=access),
        **shared_handlers(BROKER_APIS, inter_broker_secret),
    }
    assert set(handlers) == BROKER_APIS
    return handlers
