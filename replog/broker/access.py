"""What a request's principal may do: the broker's authorizer asked with the request's principal and host.

Handlers make one call per batch of resources of a request (Kafka's KafkaApis: authorize, or
filterByAuthorized over the topics a request names); `authorizer.class.name` unset allows everything. The
inter-broker principal acts for the cluster itself (its replication, forwarding and the controller's
requests), so it passes every check, as Kafka's brokers pass theirs by being super users.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from replog.security.acls import CLUSTER_NAME, Operation, ResourceType
from replog.security.authorizer import Authorizer
from replog.server.auth import client_host
from replog.server.dispatch import RequestContext

# What *_authorized_operations reports per resource type (KIP-430), as Kafka's AclEntry.supportedOperations.
_REPORTED_OPERATIONS = {
    ResourceType.TOPIC: (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DELETE, Operation.ALTER,
                         Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
    ResourceType.GROUP: (Operation.READ, Operation.DESCRIBE, Operation.DELETE),
    ResourceType.CLUSTER: (Operation.CREATE, Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS,
                           Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE, Operation.ALTER, Operation.DESCRIBE),
}
OPERATIONS_NOT_REQUESTED = -(2**31)  # the *_authorized_operations value when the client did not ask


@dataclass(frozen=True, slots=True)
class Access:
    authorizer: Authorizer

    @property
    def enabled(self) -> bool:
        return self.authorizer.enabled

    def allows(self, ctx: RequestContext, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        if not self.authorizer.enabled or ctx.session.cluster_action:
            return True
        return self.authorizer.authorize(ctx.session.principal, client_host(ctx.peer), operation, resource_type,
                                         name)

    def allows_cluster(self, ctx: RequestContext, operation: Operation) -> bool:
        return self.allows(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def allowed(self, ctx: RequestContext, operation: Operation, resource_type: ResourceType,
                names: Iterable[str]) -> set[str]:
        """The names of `names` the principal may perform `operation` on; each distinct name is asked once."""
        distinct = set(names)
        if not self.authorizer.enabled or ctx.session.cluster_action:
            return distinct
        principal, host = ctx.session.principal, client_host(ctx.peer)
        return {name for name in distinct
                if self.authorizer.authorize(principal, host, operation, resource_type, name)}

    def allows_any(self, ctx: RequestContext, operation: Operation, resource_type: ResourceType) -> bool:
        """Whether the principal may perform `operation` on some resource of the type (KIP-679)."""
        if not self.authorizer.enabled or ctx.session.cluster_action:
            return True
        return self.authorizer.authorize_any(ctx.session.principal, client_host(ctx.peer), operation, resource_type)

    def config_refusal(self, ctx: RequestContext, operation: Operation, *, topic: str | None) -> ErrorCode | None:
        """DESCRIBE_CONFIGS or ALTER_CONFIGS on a config resource: a topic's are the topic's; a broker's (and
        the cluster default's) are the cluster's. None when allowed, else the error Kafka answers."""
        if topic is not None:
            allowed = self.allows(ctx, operation, ResourceType.TOPIC, topic)
            return None if allowed else ErrorCode.topic_authorization_failed
        return None if self.allows_cluster(ctx, operation) else ErrorCode.cluster_authorization_failed

    def authorized_operations(self, ctx: RequestContext, resource_type: ResourceType, name: str) -> int:
        """The operations the principal may perform on the resource, as a bit field of their codes (KIP-430)."""
        bits = 0
        for operation in _REPORTED_OPERATIONS[resource_type]:
            if self.allows(ctx, operation, resource_type, name):
                bits |= 1 << operation
        return bits
