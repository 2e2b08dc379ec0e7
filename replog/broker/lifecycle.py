"""The broker's session with the controller: register, heartbeat, and the controlled-shutdown handshake.

Kafka's BrokerLifecycleManager (KIP-631): the broker registers with a new incarnation id and gets a broker
epoch, then heartbeats every broker.heartbeat.interval.ms with that epoch. It asks to stay fenced
(want_fence) until it has applied the controller's metadata for this registration, so it never leads or
joins an ISR knowing less than the controller assumes. To stop cleanly it sets want_shut_down and keeps
heartbeating, quickly, until the controller, having moved its leaderships away, answers should_shut_down.

A failed log dir is reported in every heartbeat from then on (v1's OfflineLogDirs, KIP-858), and at once
rather than at the next interval, so the controller moves its leaderships away quickly.

A controller that is unreachable or restarting is retried with the same epoch (a restarted controller
replays it from its metadata log); STALE_BROKER_EPOCH means the registration is gone, so register again.
During a controlled shutdown, though, an unreachable controller is given controlled.shutdown.max.retries
attempts, controlled.shutdown.retry.backoff.ms apart, as Kafka's ZooKeeper-mode broker gave it: with no
controller nobody can move the leaderships, and a broker told to stop must not wait out the whole
controlled-shutdown time for one (KRaft's broker waits a fixed 5 minutes there; a dead cluster's brokers
would outlive their tests).
"""

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from replog.client.connection import Connection
from replog.client.errors import KafkaError
from replog.protocol.apis import ApiKey

from .controller_client import ControllerClient

log = logging.getLogger(__name__)

BROKER_REGISTRATION_VERSION = 0
BROKER_HEARTBEAT_VERSION = 1  # v1 adds OfflineLogDirs (KIP-858)
SECURITY_PROTOCOL_PLAINTEXT = 0
SOON_INTERVAL_MS = 50  # heartbeat interval while the broker waits on the answer


@dataclass(frozen=True, slots=True)
class BrokerIdentity:
    node_id: int
    cluster_id: str
    host: str  # the advertised listener the controller and other brokers connect to
    port: int
    rack: str | None = None
    # The broker's other listeners, registered after the inter-broker one: (name, host, port, protocol id)
    other_listeners: tuple[tuple[str, str, int, int], ...] = ()
    listener_name: str = "PLAINTEXT"  # the inter-broker listener's name


class BrokerLifecycleManager(ControllerClient):
    def __init__(self, identity: BrokerIdentity, connect: Callable[[], Awaitable[Connection]], *,
                 heartbeat_interval_ms: int, has_metadata: Callable[[int], bool],
                 offline_log_dirs: Callable[[], Sequence[uuid.UUID]] = tuple, shutdown_max_retries: int = 3,
                 shutdown_retry_backoff_ms: int = 5_000) -> None:
        """has_metadata(broker_epoch) says whether the broker has applied the controller's metadata sent
        for the registration with that epoch; offline_log_dirs() names the log dirs that have failed.
        shutdown_max_retries, shutdown_retry_backoff_ms: controlled.shutdown.max.retries and
        .retry.backoff.ms (Kafka's defaults), how long an unreachable controller is tried on shutdown."""
        assert heartbeat_interval_ms > 0 and shutdown_max_retries > 0 and shutdown_retry_backoff_ms >= 0
        super().__init__(connect, "broker-lifecycle")
        self.identity = identity
        self.incarnation_id = uuid.uuid4()
        self.broker_epoch = -1
        # Set while this process holds a registration (broker_epoch >= 0): controller requests wait for it.
        self.registered = asyncio.Event()
        self.is_fenced = True
        self._heartbeat_interval_ms = heartbeat_interval_ms
        self._has_metadata = has_metadata
        self._offline_log_dirs = offline_log_dirs
        self._want_shutdown = False
        self._may_shut_down = asyncio.Event()
        self._shutdown_max_retries = shutdown_max_retries
        self._shutdown_retry_backoff_ms = shutdown_retry_backoff_ms
        self._failed_shutdown_attempts = 0  # in a row; an answer from a controller resets it
        self._controller_gone = asyncio.Event()  # set when those attempts ran out

    async def controlled_shutdown(self, timeout_ms: int) -> bool:
        """Ask the controller to move this broker's leaderships away; True once it says to stop now."""
        if self.broker_epoch < 0:
            return True  # never registered: nothing to hand over
        self._want_shutdown = True
        self._wake.set()
        waits = [asyncio.ensure_future(event.wait()) for event in (self._may_shut_down, self._controller_gone)]
        try:
            await asyncio.wait(waits, timeout=timeout_ms / 1000, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        if self._may_shut_down.is_set():
            return True
        if self._controller_gone.is_set():
            log.warning("controlled shutdown: the controller could not be reached in %d attempts; stopping anyway",
                        self._shutdown_max_retries)
        else:
            log.warning("controlled shutdown not confirmed within %d ms; stopping anyway", timeout_ms)
        return False

    def propagate_directory_failure(self) -> None:
        """A log dir failed: heartbeat now (Kafka's BrokerLifecycleManager.propagateDirectoryFailure)."""
        self._wake.set()

    async def _run(self) -> None:
        while not self._stopping and not self._may_shut_down.is_set() and not self._controller_gone.is_set():
            failed = False
            try:
                if self.broker_epoch < 0:
                    await self._register()
                else:
                    await self._heartbeat()
            except (KafkaError, OSError) as e:
                log.warning("controller unreachable (%s); retrying", e)
                self._drop_connection()
                failed = True
            if self._want_shutdown:
                self._failed_shutdown_attempts = self._failed_shutdown_attempts + 1 if failed else 0
                if self._failed_shutdown_attempts >= self._shutdown_max_retries:
                    self._controller_gone.set()
                    return
            # Soon while something waits on the answer: our shutdown, or our unfencing after registering.
            soon = self._want_shutdown or (self.broker_epoch >= 0 and self.is_fenced)
            interval = SOON_INTERVAL_MS if soon else self._heartbeat_interval_ms
            if self._want_shutdown and failed:
                interval = self._shutdown_retry_backoff_ms
            self._wake.clear()
            try:
                async with asyncio.timeout(interval / 1000):
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def _register(self) -> None:
        identity = self.identity
        response = await self._send(ApiKey.BROKER_REGISTRATION, {
            "broker_id": identity.node_id, "cluster_id": identity.cluster_id, "incarnation_id": self.incarnation_id,
            # The inter-broker listener first: the controller reaches the broker there.
            "listeners": [{"name": identity.listener_name, "host": identity.host, "port": identity.port,
                           "security_protocol": SECURITY_PROTOCOL_PLAINTEXT},
                          *({"name": name, "host": host, "port": port, "security_protocol": protocol}
                            for name, host, port, protocol in identity.other_listeners)],
            "features": [], "rack": identity.rack,
        }, BROKER_REGISTRATION_VERSION)
        if response.error_code != ErrorCode.none:
            # DUPLICATE_BROKER_REGISTRATION: our previous process's session has not expired yet; wait it out.
            log.warning("registration refused: %s; retrying", response.error_code.name)
            return
        self.broker_epoch = response.broker_epoch
        self.registered.set()
        self.is_fenced = True
        log.info("registered with the controller, broker epoch %d", self.broker_epoch)

    async def _heartbeat(self) -> None:
        epoch = self.broker_epoch
        response = await self._send(ApiKey.BROKER_HEARTBEAT, {
            "broker_id": self.identity.node_id, "broker_epoch": epoch, "current_metadata_offset": -1,
            "want_fence": not self._has_metadata(epoch), "want_shut_down": self._want_shutdown,
            "offline_log_dirs": list(self._offline_log_dirs()),
        }, BROKER_HEARTBEAT_VERSION)
        if response.error_code == ErrorCode.stale_broker_epoch:
            log.warning("the controller no longer knows broker epoch %d; registering again", epoch)
            self.broker_epoch = -1
            self.registered.clear()
            return
        if response.error_code != ErrorCode.none:
            log.warning("heartbeat refused: %s", response.error_code.name)
            return
        if response.is_fenced != self.is_fenced:
            log.info("broker is now %s", "fenced" if response.is_fenced else "unfenced")
        self.is_fenced = response.is_fenced
        if response.should_shut_down:
            self._may_shut_down.set()
