"""What the broker's handlers act on, one small context per family of APIs; the broker builds them once.

Produce, Fetch, ListOffsets and OffsetForLeaderEpoch take the ReplicaManager itself and the Access checks
(access.py); InitProducerId takes the producer id allocator. Every family asks Access before acting.
"""

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from replog.log.config import LogConfig
from replog.log.dynamic_configs import ConfigResource
from replog.security.acl_requests import AclChanges
from replog.server.dispatch import RequestContext
from replog.server.scram_credentials import Deletion, Upsertion, UserResult

from ..access import Access
from ..config import BrokerConfig
from ..group_coordinator import GroupCoordinatorShell
from ..lifecycle import BrokerLifecycleManager
from ..metadata import MetadataImage, TopicMetadata
from ..replica_manager import ReplicaManager


@dataclass(frozen=True, slots=True)
class TopicDefaults:
    """What a topic gets when its creator leaves a value to the broker (Kafka's broker-level configs)."""

    num_partitions: int
    replication_factor: int
    log_config: LogConfig
    auto_create: bool  # auto.create.topics.enable: Metadata creates the unknown topics it names


class CreateTopic(Protocol):
    """A single node creating a topic (its local controller decides, the replica manager takes it up)."""

    def __call__(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str], *,
                 validate_only: bool = False) -> TopicMetadata: ...


class ForwardToController(Protocol):
    """Send a client's request on to the controller and return its answer body (KIP-590): the request's own
    body, or `body` instead (the request without the resources its principal may not touch)."""

    def __call__(self, ctx: RequestContext, body: bytes | None = None) -> Awaitable[bytes]: ...


class SendToController(Protocol):
    """The broker's own request (api key, version, body) to the active controller; its answer body back."""

    def __call__(self, api_key: int, version: int, body: bytes) -> Awaitable[bytes]: ...


@dataclass(frozen=True, slots=True)
class TopicAdmin:
    """What Metadata, CreateTopics and DeleteTopics use. A single node decides topics itself (create_topic,
    delete_topic); in a cluster only the controller does, and requests are forwarded to it (KIP-590)."""

    image: MetadataImage
    defaults: TopicDefaults
    create_topic: CreateTopic
    delete_topic: Callable[[str], TopicMetadata | None]
    # The controller's answer body to a request sent on; None on a single node.
    forward_to_controller: ForwardToController | None
    # Set once the controller's first UpdateMetadata is applied; a single node never waits for it.
    has_metadata: asyncio.Event
    access: Access
    # In a cluster: the broker's own requests to the controller (Metadata's auto-creation); None on a single node.
    send_to_controller: SendToController | None = None

    @property
    def in_cluster(self) -> bool:
        return self.forward_to_controller is not None


class Registration(Protocol):
    """This broker's registration with the controller, which the controller's requests are checked against
    (the Broker implements it)."""

    @property
    def lifecycle(self) -> BrokerLifecycleManager | None: ...  # None: a single node, run by no controller

    def is_stale_broker_epoch(self, broker_epoch: int) -> bool: ...

    def metadata_applied(self, broker_epoch: int) -> None: ...


@dataclass(frozen=True, slots=True)
class ControlPlane:
    """What the controller's requests (LeaderAndIsr, UpdateMetadata, StopReplica) act on."""

    replicas: ReplicaManager
    image: MetadataImage
    registration: Registration


@dataclass(frozen=True, slots=True)
class GroupCoordination:
    """What the group APIs act on: the coordinator's shell, the metadata (to find a group's coordinator) and
    the creation of __consumer_offsets on first use, which the broker starts (a single node creates it
    itself; a broker of a cluster asks the controller) and FindCoordinator answers around."""

    shell: GroupCoordinatorShell
    image: MetadataImage
    ensure_offsets_topic: Callable[[], None]
    access: Access


class LocalAdmin(Protocol):
    """The admin operations a single node decides itself (the Broker implements it)."""

    def alter_configs(self, resources: list[ConfigResource], *, incremental: bool,
                      validate_only: bool) -> list[tuple[ErrorCode, str | None]]: ...

    def create_partitions(self, name: str, count: int, assignment: list[list[int]] | None, *,
                          validate_only: bool) -> None: ...

    def change_acls(self, changes: AclChanges) -> None: ...

    def alter_scram_credentials(self, deletions: Sequence[Deletion],
                                upsertions: Sequence[Upsertion]) -> list[UserResult]: ...


@dataclass(frozen=True, slots=True)
class ConfigAdmin:
    """What DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, CreatePartitions and the ACL APIs use. In a
    cluster the changes are the controller's (forwarded, KIP-590); describing is answered from this broker's
    image."""

    image: MetadataImage
    static: BrokerConfig
    local: LocalAdmin
    forward_to_controller: ForwardToController | None
    access: Access
