"""A local cluster for tests and benchmarks: broker processes and a controller in the caller's event loop.

The brokers are `replog broker start` child processes on 127.0.0.1 that register with the controller,
heartbeat, replicate among themselves and send AlterPartition; the controller runs in-process so a test can
read its state (registrations, ISRs, epochs) directly. `replog cluster` runs the same pieces as processes.

With `broker_proxies=True` the network between them can be partitioned. Each broker gets a loopback address
of its own (127.0.0.11, .12, ...; all of 127/8 is loopback on Linux) and a fault-injecting TcpProxy there in
front of its real listener, which it advertises; it opens its connections to other brokers and to the
controller from that address (`inter.broker.bind.host`), and the controller from 127.0.0.10. So the proxy in
front of a broker tells by a connection's source address whether it comes from another broker, the
controller, or a client (127.0.0.1), and `partition()` can cut any of these links in both directions.

With `controllers=N` (N > 1) N controllers (ids 3000, 3001, ...) run the controller quorum in the caller's event
loop, each on a port chosen up front (the voters must know each other's addresses); `controller` is the
active one, and the brokers bootstrap from all of them. In-process controllers take broker proxies only alone.

With `controller_processes=True` the N controllers are `replog controller start` processes instead
(controller_quorum.py: each behind a proxy of its own), which can be SIGKILLed, paused and cut off from the
network (kill_controller, pause_controller, isolate_controller), also with broker proxies. Their state is then
read as a client would: DescribeQuorum for the active controller, and the brokers' Metadata for leaders, ISRs
and live brokers (cluster_view.py), refreshed by wait_for(); `controller` is not there to read.
"""

import asyncio
import dataclasses
import secrets
import socket
import time
from collections.abc import Collection
from pathlib import Path

from kio.schema.errors import ErrorCode

from replog.client.admin import Admin, NewTopic
from replog.client.cluster import PartitionInfo
from replog.client.errors import KafkaError
from replog.controller.server import ClusterController, ControllerConfig
from replog.metrics.config import MetricsConfig
from replog.raft.config import QuorumConfig

from .broker_process import BrokerProcess
from .cluster_security import LocalClusterSecurity
from .cluster_view import BrokerMetadataView
from .controller_quorum import ControllerQuorumProcesses
from .metrics_layout import METRICS_DIR, metrics_properties
from .tcp_proxy import REFUSE, TcpProxy

FAST_SESSION_TIMEOUT_MS = 3_000  # fence a killed broker within a test's patience (Kafka: 9 s)
FAST_REPLICATION = {
    # Short lag and back-off so ISR changes happen within a test's patience; semantics are unchanged.
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.backoff.ms": "100",
    "replica.fetch.wait.max.ms": "200",
    "replica.high.watermark.checkpoint.interval.ms": "500",
    "broker.heartbeat.interval.ms": "300",
    # A broker stopped while no controller answers gives up its handover after 3 attempts, 0.6 s, not 10 s.
    "controlled.shutdown.retry.backoff.ms": "200",
}
CLIENT_HOST = "127.0.0.1"  # clients (and, without broker proxies, everything) connect from here
CONTROLLER_HOST = "127.0.0.10"  # with broker proxies: where the controller listens and connects from
FIRST_CONTROLLER_ID = 3000
VIEW_POLL_INTERVAL_S = 0.2  # between Metadata rounds when the controllers are processes
CREATE_TOPIC_TIMEOUT_S = 30.0  # retries of a CreateTopics through a controller failover


def broker_host(node_id: int) -> str:
    """A broker's own loopback address when the cluster runs with broker proxies."""
    return f"127.0.0.{10 + node_id}"


class LocalCluster:
    def __init__(self, root: Path, *, brokers: int = 3, overrides: dict[str, str] | None = None,
                 session_timeout_ms: int = FAST_SESSION_TIMEOUT_MS, broker_proxies: bool = False,
                 controllers: int = 1, controller_processes: bool = False,
                 security: LocalClusterSecurity | None = None, controller_options: dict | None = None) -> None:
        """security: TLS, SASL and the node credentials on every link (cluster_security.py); without it the
        nodes share a random inter.broker.secret. controller_options: more ControllerConfig fields of the
        in-process controllers."""
        assert controllers >= 1
        assert controller_processes or not (broker_proxies and controllers > 1), (
            "in-process controllers with broker proxies: one only")
        self.root = root
        self.security = security
        self.secret = None if security is not None else secrets.token_hex(16)
        # Dumps under root/metrics/<node>, as `replog cluster up` lays them out for `replog analyze`.
        self.metrics_dir = root / METRICS_DIR
        self.controller_config = ControllerConfig(
            inter_broker_secret=self.secret, metadata_log_dir=root / "controller",
            broker_session_timeout_ms=session_timeout_ms,
            metrics=MetricsConfig(dump_dir=self.metrics_dir / "controller"),
            **({"host": CONTROLLER_HOST, "inter_broker_bind_host": CONTROLLER_HOST} if broker_proxies else {}),
            **(security.controller_options if security is not None else {}), **(controller_options or {}))
        self.controllers: dict[int, ClusterController] = {}  # by id; the running ones are in running_controllers
        self.controller_configs: dict[int, ControllerConfig] = {}
        self.running_controllers: set[int] = set()
        self.quorum_processes: ControllerQuorumProcesses | None = None
        # with controller processes: the cluster as the brokers serve it
        self.view = BrokerMetadataView(security=security.broker_client if security is not None else None)
        if controller_processes:
            ids = list(range(FIRST_CONTROLLER_ID, FIRST_CONTROLLER_ID + controllers))
            node_login = security.controller_overrides if security is not None else {"inter.broker.secret": self.secret}
            self.quorum_processes = ControllerQuorumProcesses(
                root, ids, {**node_login, "broker.session.timeout.ms": str(session_timeout_ms)},
                security.controller_client if security is not None else None)
        elif controllers == 1:
            self.controllers[FIRST_CONTROLLER_ID] = ClusterController(self.controller_config)
        else:
            self._configure_quorum(controllers)
        self.overrides = {**FAST_REPLICATION, **(overrides or {})}
        self.brokers: dict[int, BrokerProcess] = {}
        self.controller_links: dict[int, TcpProxy] = {}  # broker id -> its link to the controller
        self.broker_proxies: dict[int, TcpProxy] = {}  # broker id -> the proxy in front of it (if enabled)
        self._with_broker_proxies = broker_proxies
        self._count = brokers

    def _configure_quorum(self, count: int) -> None:
        ids = list(range(FIRST_CONTROLLER_ID, FIRST_CONTROLLER_ID + count))
        ports = free_ports(count)
        quorum = QuorumConfig(voters={i: (CLIENT_HOST, port) for i, port in zip(ids, ports, strict=True)})
        for controller_id, port in zip(ids, ports, strict=True):
            config = dataclasses.replace(
                self.controller_config, controller_id=controller_id, port=port, quorum=quorum,
                metadata_log_dir=self.root / f"controller-{controller_id}",
                metrics=MetricsConfig(dump_dir=self.metrics_dir / f"controller-{controller_id}"))
            self.controller_configs[controller_id] = config
            self.controllers[controller_id] = ClusterController(config)

    @property
    def controller(self) -> ClusterController:
        """The active controller (with one controller: it, running or not)."""
        assert self.quorum_processes is None, "the controllers are processes: read registration(), active_brokers()"
        running = [self.controllers[i] for i in sorted(self.running_controllers)]
        active = [c for c in running if c.active]
        return (active or running or list(self.controllers.values()))[0]

    @property
    def controller_running(self) -> bool:
        if self.quorum_processes is not None:
            return bool(self.quorum_processes.running)
        return bool(self.running_controllers)

    async def wait_for_active_controller(self, timeout: float = 30.0) -> ClusterController:
        await self.wait_for(lambda: any(self.controllers[i].active for i in self.running_controllers), timeout,
                            "an active controller")
        return self.controller

    async def start(self) -> None:
        node_login = (self.security.broker_overrides if self.security is not None
                      else {"inter.broker.secret": self.secret})
        common = {**node_login, **self.overrides}
        if self.quorum_processes is not None:
            await self.quorum_processes.start()
            await self.quorum_processes.wait_for_leader(30.0)
            bootstrap = self.quorum_processes.bootstrap
        elif self.controller_configs:
            for controller_id, controller in self.controllers.items():
                await controller.start()
                self.running_controllers.add(controller_id)
            await self.wait_for_active_controller()
            bootstrap = ",".join(f"{c.host}:{c.port}" for c in self.controller_configs.values())
        else:
            await self.controllers[FIRST_CONTROLLER_ID].start()
            self.running_controllers.add(FIRST_CONTROLLER_ID)
            # Later controllers (restart_controller) must be where the brokers look for them.
            self.controller_config = dataclasses.replace(self.controller_config, port=self.controller.port)
        for node_id in range(1, self._count + 1):
            if not self.controller_configs and self.quorum_processes is None:
                # Each broker reaches the controller through a proxy of its own, so a test can cut that link.
                link = await TcpProxy(self.controller_config.host, self.controller.port).start()
                self.controller_links[node_id] = link
                bootstrap = f"127.0.0.1:{link.port}"
            # Metrics on any free port: each broker reports the one it got (metrics_ports).
            overrides = {**common, "controller.quorum.bootstrap.servers": bootstrap,
                         **metrics_properties(self.root, f"broker-{node_id}", 0)}
            broker = BrokerProcess(self.root / f"broker-{node_id}", node_id=node_id,
                                   output=self.root / f"broker-{node_id}.out", overrides=overrides)
            if self._with_broker_proxies:
                # The real listener stays on 127.0.0.1; only the proxy in front of it is advertised.
                host = broker_host(node_id)
                proxy = await TcpProxy("127.0.0.1", broker.port, host=host).start()
                self.broker_proxies[node_id] = proxy
                broker.overrides.update({"advertised.listeners": f"PLAINTEXT://{host}:{proxy.port}",
                                         "inter.broker.bind.host": host})
            self.brokers[node_id] = broker
        await asyncio.gather(*(asyncio.to_thread(b.start) for b in self.brokers.values()))
        await self.wait_for(lambda: self.active_brokers() == set(self.brokers), 30.0, "every broker to register")
        if self.quorum_processes is not None:
            return
        # In a quorum, until every controller has them (committed, replayed): a failover keeps them unfenced.
        await self.wait_for(lambda: all(set(self.controllers[i].metadata.active_broker_ids()) == set(self.brokers)
                                        for i in self.running_controllers), 30.0, "every controller to know them")

    async def stop(self) -> None:
        await asyncio.gather(*(asyncio.to_thread(b.stop) for b in self.brokers.values()))
        if self.quorum_processes is not None:
            await self.quorum_processes.stop()
        for controller_id in sorted(self.running_controllers):
            await self.stop_controller(controller_id)
        for link in (*self.controller_links.values(), *self.broker_proxies.values()):
            await link.stop()

    @property
    def metrics_ports(self) -> dict[int, int | None]:
        """Broker id -> its Prometheus endpoint, as the running broker reported it."""
        return {node_id: broker.metrics_port for node_id, broker in self.brokers.items()}

    @property
    def bootstrap(self) -> str:
        if self.broker_proxies:
            return ",".join(f"{p.host}:{p.port}" for p in self.broker_proxies.values())
        return ",".join(b.bootstrap for b in self.brokers.values())

    def partition(self, node_id: int, peers: Collection[int] = (), *, controller: bool = False,
                  clients: bool = False, mode: str = REFUSE) -> None:
        """Cut, in both directions, the links between a broker and these other brokers, and optionally the
        controller and the clients (needs broker_proxies)."""
        self._cut_or_heal(node_id, peers, controller, clients, mode)

    def heal_network(self) -> None:
        """Every link of the cluster forwards again."""
        for proxy in (*self.controller_links.values(), *self.broker_proxies.values()):
            proxy.heal()
        if self.quorum_processes is not None:
            self.quorum_processes.heal()

    def heal_partition(self, node_id: int, peers: Collection[int] = (), *, controller: bool = False,
                       clients: bool = False) -> None:
        """Undo partition() with the same arguments."""
        self._cut_or_heal(node_id, peers, controller, clients, None)

    def _cut_or_heal(self, node_id: int, peers: Collection[int], controller: bool, clients: bool,
                     mode: str | None) -> None:
        assert self.broker_proxies, "the cluster runs without broker proxies"

        def apply(proxy: TcpProxy, sources: list[str]) -> None:
            if mode is None:
                proxy.heal(sources)
            else:
                proxy.cut(sources, mode)

        sources = [broker_host(peer) for peer in peers]
        if controller:
            sources += list(self.quorum_processes.hosts.values()) if self.quorum_processes else [CONTROLLER_HOST]
        sources += [CLIENT_HOST] if clients else []
        apply(self.broker_proxies[node_id], sources)
        for peer in peers:
            apply(self.broker_proxies[peer], [broker_host(node_id)])
        if controller and self.quorum_processes is not None:  # its heartbeats, AlterPartition
            if mode is None:
                self.quorum_processes.heal([broker_host(node_id)])
            else:
                self.quorum_processes.cut_sources([broker_host(node_id)], mode)
        elif controller:  # the broker's own connections to the controller: heartbeats, AlterPartition
            apply(self.controller_links[node_id], [broker_host(node_id)])

    def log_dir(self, node_id: int, topic: str, partition: int) -> Path:
        return self.brokers[node_id].log_dir / f"{topic}-{partition}"

    def active_brokers(self) -> set[int]:
        if self.quorum_processes is not None:
            return set(self.view.live_brokers)
        return set(self.controller.metadata.active_broker_ids())

    def registration(self, topic: str, partition: int):
        """A partition's leader, leader epoch and ISR: the active controller's registration, or with controller
        processes the brokers' view of it (no leader while no broker has told of the partition)."""
        if self.quorum_processes is None:
            return self.controller.registration(topic, partition)
        return self.view.partitions.get((topic, partition), PartitionInfo(topic, partition, -1, -1, (), (), ()))

    async def create_topic(self, name: str, assignment: dict[int, list[int]], configs: dict[str, str]) -> None:
        """Create a topic with this replica assignment: at the controller, or with controller processes through
        a broker, as a client's CreateTopics is forwarded, retrying retriable errors (a failover under way) as
        a client would; TOPIC_ALREADY_EXISTS after such an error means the earlier attempt had won."""
        if self.quorum_processes is None:
            await self.controller.create_topic(name, assignment, configs)
            return
        deadline = time.monotonic() + CREATE_TOPIC_TIMEOUT_S
        retried = False
        async with Admin(",".join(b.bootstrap for b in self.brokers.values()),
                         security=self.security.broker_client if self.security is not None else None) as admin:
            while True:
                try:
                    await admin.create_topics([NewTopic(name, configs=configs, replica_assignment=assignment)])
                    return
                except KafkaError as e:
                    if retried and e.code == ErrorCode.topic_already_exists:
                        return
                    if not e.retriable or time.monotonic() > deadline:
                        raise
                retried = True
                await asyncio.sleep(VIEW_POLL_INTERVAL_S)  # back-off before the retry

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
        controller_id = await self.active_controller_id()
        await self.stop_controller(controller_id)
        await self.start_controller(controller_id)

    async def active_controller_id(self) -> int:
        """The active controller's id (with controller processes: as DescribeQuorum tells, once one leads)."""
        if self.quorum_processes is None:
            return self.controller.controller_id
        return (await self.quorum_processes.wait_for_leader(30.0)).leader_id

    async def stop_controller(self, controller_id: int | None = None) -> None:
        """Stop a controller (default: the active one). With one controller, until start_controller() brokers
        cannot heartbeat and nothing is elected; in a quorum the others elect a new active controller."""
        if controller_id is None:
            controller_id = await self.active_controller_id()
        if self.quorum_processes is not None:
            await self.quorum_processes.stop_one(controller_id)
        elif controller_id in self.running_controllers:
            self.running_controllers.discard(controller_id)
            await self.controllers[controller_id].stop()

    async def start_controller(self, controller_id: int = FIRST_CONTROLLER_ID) -> None:
        """A new controller on the stopped one's port and metadata log."""
        if self.quorum_processes is not None:
            await self.quorum_processes.start_one(controller_id)
            return
        assert controller_id not in self.running_controllers
        config = self.controller_configs.get(controller_id, self.controller_config)
        self.controllers[controller_id] = ClusterController(config)
        await self.controllers[controller_id].start()
        self.running_controllers.add(controller_id)

    async def kill_controller(self, controller_id: int) -> None:
        """SIGKILL a controller process; start_controller() brings it back on its metadata log."""
        assert self.quorum_processes is not None, "needs controller_processes=True"
        await self.quorum_processes.kill(controller_id)

    def pause_controller(self, controller_id: int) -> None:
        """SIGSTOP a controller process until resume_controller()."""
        assert self.quorum_processes is not None, "needs controller_processes=True"
        self.quorum_processes.pause(controller_id)

    def resume_controller(self, controller_id: int) -> None:
        assert self.quorum_processes is not None, "needs controller_processes=True"
        self.quorum_processes.resume(controller_id)

    def isolate_controller(self, controller_id: int, mode: str = REFUSE) -> None:
        """Cut a controller process from the other controllers and the brokers, both ways, until
        heal_controller() or heal_network()."""
        assert self.quorum_processes is not None, "needs controller_processes=True"
        self.quorum_processes.isolate(controller_id, mode)
        if self.broker_proxies:  # its LeaderAndIsr and UpdateMetadata to the brokers too
            for proxy in self.broker_proxies.values():
                proxy.cut([self.quorum_processes.hosts[controller_id]], mode)

    def heal_controller(self, controller_id: int) -> None:
        """Undo isolate_controller()."""
        assert self.quorum_processes is not None, "needs controller_processes=True"
        self.quorum_processes.rejoin(controller_id)
        for proxy in self.broker_proxies.values():
            proxy.heal([self.quorum_processes.hosts[controller_id]])

    async def wait_for(self, predicate, timeout: float, what: str) -> None:
        """Poll the predicate (with controller processes, on a view refreshed before each call)."""
        deadline = time.monotonic() + timeout
        while True:
            await self.refresh_view()
            if predicate():
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}")
            # poll interval: the brokers (and controllers) are other processes
            await asyncio.sleep(0.05 if self.quorum_processes is None else VIEW_POLL_INTERVAL_S)

    async def refresh_view(self) -> None:
        """With controller processes: read leaders, ISRs and live brokers again from the running brokers."""
        if self.quorum_processes is not None:
            await self.view.refresh([b.port for b in self.brokers.values() if b.running and not b.paused])

    async def wait_for_isr(self, topic: str, partition: int, isr: set[int], timeout: float = 20.0) -> None:
        await self.wait_for(lambda: set(self.registration(topic, partition).isr) == isr, timeout,
                            f"ISR of {topic}-{partition} to become {sorted(isr)}")


def free_ports(count: int) -> list[int]:
    """Ports free now, for voters that must know each other's before any listens (a tiny race, test-only)."""
    sockets = [socket.create_server((CLIENT_HOST, 0)) for _ in range(count)]
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports
