"""The controller quorum as processes, for LocalCluster(controller_processes=True): N `replog controller start`
voters that can be SIGKILLed, paused (SIGSTOP) and cut off from the network, as a chaos run needs.

Each controller listens on 127.0.0.1:P, and a fault-injecting TcpProxy in front of it listens on its own loopback
address, controller_host(i):P (the same port on another address of 127/8). That proxy address is the one in
controller.quorum.voters, so the other voters and the brokers reach the controller only through it; and each
controller opens its own connections (to the other voters, to brokers) from its controller_host
(inter.broker.bind.host), so a proxy tells by a connection's source address which controller it comes from.
isolate() cuts a controller from everyone in both directions: its own proxy cuts every peer, and every other
controller's proxy cuts it. Brokers' proxies (if any) are LocalCluster's to cut.
"""

import asyncio
import time
import urllib.request
from pathlib import Path

from replog.client.errors import KafkaError
from replog.client.quorum_admin import QuorumInfo, describe_quorum
from replog.client.security import ClientSecurity

from .controller_process import ControllerProcess
from .metrics_layout import metrics_properties
from .node_process import READY_TIMEOUT_S
from .processes import HOST
from .tcp_proxy import REFUSE, TcpProxy

CONTROLLER_GAUGE_PREFIX = "kafka_controller_kafkacontroller_"
DESCRIBE_TIMEOUT_MS = 1_000  # a paused or dying controller must not hold up the search for the active one
POLL_INTERVAL_S = 0.1  # between DescribeQuorum rounds while waiting for a leader


def controller_host(index: int) -> str:
    """The loopback address controller number `index` (0, 1, ...) is reached at and connects from."""
    return f"127.0.0.{200 + index}"


class ControllerQuorumProcesses:
    def __init__(self, root: Path, ids: list[int], overrides: dict[str, str],
                 security: ClientSecurity | None = None) -> None:
        """security: how to reach the controllers' listeners (a secured cluster's admin)."""
        self.security = security
        self.hosts = {controller_id: controller_host(index) for index, controller_id in enumerate(ids)}
        self.processes = {
            controller_id: ControllerProcess(root / f"controller-{controller_id}", controller_id=controller_id,
                                             output=root / f"controller-{controller_id}.out")
            for controller_id in ids}
        voters = ",".join(f"{i}@{self.hosts[i]}:{p.port}" for i, p in self.processes.items())
        for controller_id, process in self.processes.items():
            process.overrides.update({**overrides, "controller.quorum.voters": voters,
                                      "inter.broker.bind.host": self.hosts[controller_id],
                                      **metrics_properties(root, f"controller-{controller_id}", 0)})
        self.proxies: dict[int, TcpProxy] = {}

    @property
    def bootstrap(self) -> str:
        """controller.quorum.bootstrap.servers for the brokers: every voter, through its proxy."""
        return ",".join(f"{self.hosts[i]}:{p.port}" for i, p in self.processes.items())

    @property
    def running(self) -> set[int]:
        return {i for i, p in self.processes.items() if p.running}

    async def start(self) -> None:
        for controller_id, process in self.processes.items():
            proxy = TcpProxy(HOST, process.port, host=self.hosts[controller_id], port=process.port)
            self.proxies[controller_id] = await proxy.start()
        for process in self.processes.values():
            process.launch()
        for process in self.processes.values():
            await asyncio.to_thread(process.wait_ready, READY_TIMEOUT_S)

    async def stop(self) -> None:
        await asyncio.gather(*(asyncio.to_thread(p.stop) for p in self.processes.values()))
        for proxy in self.proxies.values():
            await proxy.stop()

    async def describe(self) -> QuorumInfo | None:
        """The quorum as its leader in the highest epoch describes it, asked at every running, unpaused
        controller's own port (past the proxies: the harness is never cut off, and an isolated leader that has
        not resigned yet must not hide the new one); None while no leader answers."""
        answers = []
        for process in self.processes.values():
            if process.running and not process.paused:
                try:
                    answers.append(await describe_quorum([(HOST, process.port)], DESCRIBE_TIMEOUT_MS,
                                                         security=self.security))
                except KafkaError:
                    continue  # not the leader, or not answering: ask the next
        answers = [a for a in answers if a.leader_id >= 0]
        return max(answers, key=lambda a: a.leader_epoch, default=None)

    async def wait_for_leader(self, timeout: float, *, not_id: int | None = None,
                              above_epoch: int = 0) -> QuorumInfo:
        """Poll DescribeQuorum until a controller other than `not_id` leads an epoch above `above_epoch`."""
        deadline = time.monotonic() + timeout
        while True:
            info = await self.describe()
            if info is not None and info.leader_id != not_id and info.leader_epoch > above_epoch:
                return info
            if time.monotonic() > deadline:
                raise AssertionError(f"no active controller (other than {not_id}, above epoch {above_epoch}) "
                                     f"after {timeout}s; last answer {info}")
            await asyncio.sleep(POLL_INTERVAL_S)

    async def gauges(self, controller_id: int) -> dict[str, float]:
        """The controller's KafkaController gauges (activebrokercount, fencedbrokercount, epoch, ...) from its
        Prometheus endpoint, by their short names."""
        port = self.processes[controller_id].metrics_port
        assert port is not None, f"controller {controller_id} serves no metrics"
        text = await asyncio.to_thread(_get, f"http://{HOST}:{port}/metrics")
        gauges = {}
        for line in text.splitlines():
            if line.startswith(CONTROLLER_GAUGE_PREFIX):
                name, value = line.removeprefix(CONTROLLER_GAUGE_PREFIX).split()
                gauges[name] = float(value)
        return gauges

    async def kill(self, controller_id: int) -> None:
        await asyncio.to_thread(self.processes[controller_id].kill)

    async def start_one(self, controller_id: int) -> None:
        """Start a stopped or killed controller again on its port and metadata log."""
        await asyncio.to_thread(self.processes[controller_id].start)

    async def stop_one(self, controller_id: int) -> None:
        await asyncio.to_thread(self.processes[controller_id].stop)

    def pause(self, controller_id: int) -> None:
        self.processes[controller_id].pause()

    def resume(self, controller_id: int) -> None:
        self.processes[controller_id].resume()

    def isolate(self, controller_id: int, mode: str = REFUSE) -> None:
        """Cut a controller from the other voters and from the brokers, in both directions."""
        self.proxies[controller_id].cut(None, mode)
        for other, proxy in self.proxies.items():
            if other != controller_id:
                proxy.cut([self.hosts[controller_id]], mode)

    def rejoin(self, controller_id: int) -> None:
        """Undo isolate()."""
        self.proxies[controller_id].heal()
        for other, proxy in self.proxies.items():
            if other != controller_id:
                proxy.heal([self.hosts[controller_id]])

    def cut_sources(self, sources: list[str], mode: str = REFUSE) -> None:
        """Cut connections from these addresses (brokers) to every controller."""
        for proxy in self.proxies.values():
            proxy.cut(sources, mode)

    def heal(self, sources: list[str] | None = None) -> None:
        """Every controller's proxy forwards again (from these sources; None: from everyone)."""
        for proxy in self.proxies.values():
            proxy.heal(sources)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode()
