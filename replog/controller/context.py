"""ControllerContext: what BrokerControl and ReplicationControl use of the controller that holds them.

The controller replaces its metadata, sessions, states and propagator when it activates or steps down
(failover.py), so the controls read them through this context each time rather than keep their own copies.
"""

from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from .channel import ControllerChannel
from .cluster import ClusterMetadata
from .config import ControllerConfig
from .heartbeats import BrokerSessions
from .propagation import Delivery, PropagationError, Propagator
from .quorum import QuorumMetadataLog
from .state_machines import ClusterStates


class ControllerContext(Protocol):
    config: ControllerConfig
    active: bool  # this controller leads the quorum and has activated
    clock_ms: Callable[[], int]
    metadata: ClusterMetadata
    sessions: BrokerSessions
    states: ClusterStates
    channel: ControllerChannel
    propagator: Propagator

    @property
    def metadata_log(self) -> QuorumMetadataLog: ...

    def require_active(self) -> None:
        """Raise ControllerError(NOT_CONTROLLER) unless this controller is the active one."""

    def request_metadata_push(self) -> None:
        """Send every broker the current metadata soon (changes made meanwhile coalesce into one push)."""

    def watch(self, deliveries: list[Delivery], what: str) -> None:
        """Log a warning, in the background, for each of `deliveries` that fails; settle() waits for them."""

    def spawn(self, work: Coroutine[Any, Any, PropagationError | None]) -> None:
        """Run `work` in the background; settle() and stop() see it."""
