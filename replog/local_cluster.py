"""A local cluster for tests and benchmarks: broker processes and a controller in the caller's event loop.

The brokers are `replog broker start` child processes on 127.0.0.1 that register with the controller,
heartbeat, replicate among themselves and send AlterPartition; the controller runs in-process so a test can
read its state (registrations, ISRs, epochs) directly. `replog cluster` runs the same pieces as processes.
"""

import asyncio
import dataclasses
import secrets
import time
from pathlib import Path

from .chaos.tcp_proxy import TcpProxy
from .cluster_control import METRICS_DIR, free_port, metrics_properties
from .controller.server import ClusterController, ControllerConfig
from .demo import BrokerProcess
from .metrics.config import MetricsConfig

FAST_SESSION_TIMEOUT_MS = 3_000  # fence a killed broker within a test's patience (Kafka: 9 s)
FAST_REPLICATION = {
    # Short lag and back-off so ISR changes happen within a test's patience; semantics are unchanged.
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.backoff.ms": "100",
    "replica.fetch.wait.max.ms": "200",
    "replica.high.watermark.checkpoint.interval.ms": "500",
    "broker.heartbeat.interval.ms": "300",
}


class LocalCluster:
    def __init__(self, root: Path, *, brokers: int = 3, overrides: dict[str, str] | None = None,
                 session_timeout_ms: int = FAST_SESSION_TIMEOUT_MS) -> None:
        self.root = root
        self.secret = secrets.token_hex(16)
        # Dumps under root/metrics/<node>, as `replog cluster up` lays them out for `replog analyze`.
        self.metrics_dir = root / METRICS_DIR
        self.controller_config = ControllerConfig(
            inter_broker_secret=self.secret, metadata_log_dir=root / "controller",
            broker_session_timeout_ms=session_timeout_ms,
            metrics=MetricsConfig(dump_dir=self.metrics_dir / "controller"))
        self.controller = ClusterController(self.controller_config)
        self.overrides = {**FAST_REPLICATION, **(overrides or {})}
        self.brokers: dict[int, BrokerProcess] = {}
        self.controller_links: dict[int, TcpProxy] = {}  # broker id -> its link to the controller
        self.metrics_ports: dict[int, int] = {}  # broker id -> its Prometheus endpoint
        self._count = brokers

    async def start(self) -> None:
        await self.controller.start()
        # Later controllers (restart_controller) must be where the brokers look for them.
        self.controller_config = dataclasses.replace(self.controller_config, port=self.controller.port)
        common = {**self.overrides, "inter.broker.secret": self.secret}
        for node_id in range(1, self._count + 1):
            # Each broker reaches the controller through a proxy of its own, so a test can cut that link.
            link = await TcpProxy("127.0.0.1", self.controller.port).start()
            self.controller_links[node_id] = link
            self.metrics_ports[node_id] = free_port()
            self.brokers[node_id] = BrokerProcess(
                self.root / f"broker-{node_id}", node_id=node_id, output=self.root / f"broker-{node_id}.out",
                overrides={**common, "controller.quorum.bootstrap.servers": f"127.0.0.1:{link.port}",
                           **metrics_properties(self.root, f"broker-{node_id}", self.metrics_ports[node_id])})
        await asyncio.gather(*(asyncio.to_thread(b.start) for b in self.brokers.values()))
        await self.wait_for(lambda: self.active_brokers() == set(self.brokers), 30.0, "every broker to register")

    async def stop(self) -> None:
        await asyncio.gather(*(asyncio.to_thread(b.stop) for b in self.brokers.values()))
        await self.controller.stop()
        for link in self.controller_links.values():
            await link.stop()

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def log_dir(self, node_id: int, topic: str, partition: int) -> Path:
        return self.brokers[node_id].log_dir / f"{topic}-{partition}"

    def active_brokers(self) -> set[int]:
        return set(self.controller.metadata.active_broker_ids())

    async def kill(self, node_id: int) -> None:
        """SIGKILL a broker; the controller fences it once its session times out."""
        await asyncio.to_thread(self.brokers[node_id].kill)

    async def restart(self, node_id: int) -> None:
        """Start a stopped broker again with its data; it registers (once its old session has expired) and
        the controller hands it its partitions."""
        await asyncio.to_thread(self.brokers[node_id].start)
        await self.wait_for(lambda: node_id in self.active_brokers(), 30.0, f"broker {node_id} to be unfenced")

    async def restart_controller(self) -> None:
        """Stop the controller and start a new one on the same port and metadata log, as after a crash."""
        await self.controller.stop()
        self.controller = ClusterController(self.controller_config)
        await self.controller.start()

    async def wait_for(self, predicate, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}")
            await asyncio.sleep(0.05)  # poll interval: the brokers are other processes

    async def wait_for_isr(self, topic: str, partition: int, isr: set[int], timeout: float = 20.0) -> None:
        await self.wait_for(lambda: set(self.controller.registration(topic, partition).isr) == isr, timeout,
                            f"ISR of {topic}-{partition} to become {sorted(isr)}")
