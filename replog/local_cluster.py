"""A local cluster: broker processes driven by a controller that runs in the caller's event loop.

Integration tests and benchmarks use it to decide leadership by calling the controller; the brokers are
`replog broker start` child processes on 127.0.0.1 that replicate among themselves and send AlterPartition
to the controller. (The controller becomes a process of its own with registration and fencing later.)
"""

import asyncio
import secrets
import time
from pathlib import Path

from .controller.server import ClusterController, ControllerConfig
from .demo import BrokerProcess

FAST_REPLICATION = {
    # Short lag and back-off so ISR changes happen within a test's patience; semantics are unchanged.
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.backoff.ms": "100",
    "replica.fetch.wait.max.ms": "200",
    "replica.high.watermark.checkpoint.interval.ms": "500",
}


class LocalCluster:
    def __init__(self, root: Path, *, brokers: int = 3, overrides: dict[str, str] | None = None) -> None:
        self.root = root
        self.secret = secrets.token_hex(16)
        self.controller = ClusterController(ControllerConfig(inter_broker_secret=self.secret))
        self.overrides = {**FAST_REPLICATION, **(overrides or {})}
        self.brokers: dict[int, BrokerProcess] = {}
        self._count = brokers

    async def start(self) -> None:
        await self.controller.start()
        common = {**self.overrides, "inter.broker.secret": self.secret,
                  "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller.port}"}
        for node_id in range(1, self._count + 1):
            self.brokers[node_id] = BrokerProcess(self.root / f"broker-{node_id}", node_id=node_id,
                                                  output=self.root / f"broker-{node_id}.out", overrides=common)
        await asyncio.gather(*(asyncio.to_thread(b.start) for b in self.brokers.values()))
        for node_id, broker in self.brokers.items():
            await self.controller.add_broker(node_id, "127.0.0.1", broker.port)

    async def stop(self) -> None:
        await asyncio.gather(*(asyncio.to_thread(b.stop) for b in self.brokers.values()))
        await self.controller.stop()

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def log_dir(self, node_id: int, topic: str, partition: int) -> Path:
        return self.brokers[node_id].log_dir / f"{topic}-{partition}"

    async def kill(self, node_id: int) -> None:
        """SIGKILL a broker; the controller stops talking to it (no fencing yet: the test elects leaders)."""
        await asyncio.to_thread(self.brokers[node_id].kill)
        await self.controller.remove_broker(node_id)

    async def restart(self, node_id: int) -> None:
        """Start a killed broker again with its data; the controller hands it its partitions again."""
        broker = self.brokers[node_id]
        await asyncio.to_thread(broker.start)
        await self.controller.add_broker(node_id, "127.0.0.1", broker.port)

    async def wait_for(self, predicate, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}")
            await asyncio.sleep(0.05)  # poll interval: the brokers are other processes

    async def wait_for_isr(self, topic: str, partition: int, isr: set[int], timeout: float = 20.0) -> None:
        await self.wait_for(lambda: set(self.controller.registration(topic, partition).isr) == isr, timeout,
                            f"ISR of {topic}-{partition} to become {sorted(isr)}")
