"""The node processes of a `replog cluster`: launched detached, stopped or killed by their recorded pid and
argv, and waited on until they serve, until a controller is active (leads the metadata quorum) and until every
broker lists all the brokers in its metadata."""

import asyncio
import socket
import time
from collections.abc import Callable, Iterable, Sequence

from ..client import Admin, BrokerInfo, KafkaError
from ..client.quorum_admin import QuorumInfo, describe_quorum
from ..client.security import ClientSecurity
from ..harness.processes import (
    HOST,
    KILL_TIMEOUT_S,
    ExitedBeforeReady,
    NotReadyInTime,
    RecordedProcess,
    StillRunning,
    StopOutcome,
    kill_processes,
    output_tail,
    stop_processes,
    wait_until_exec_done,
    wait_until_ready,
)
from ..harness.processes import launch as launch_process
from .manifest import ClusterError, ClusterManifest, Node

STOP_TIMEOUT_S = 30.0  # SIGTERM starts a controlled shutdown, which moves leaderships away first
POLL_INTERVAL_S = 0.05
METADATA_TIMEOUT_S = 2.0  # one Metadata round trip while polling


def _process(node: Node) -> RecordedProcess:
    return RecordedProcess(node.pid, node.argv)


def launch(manifest: ClusterManifest, node: Node, listener: socket.socket | None) -> None:
    """Start a node, detached, serving on `listener` if we hold its socket (else it binds its port); sets its
    pid once /proc shows its argv."""
    node.data_dir.mkdir(parents=True, exist_ok=True)
    proc = launch_process(node.argv, manifest.log_path(node), ready_file=manifest.ready_path(node),
                          listeners=[] if listener is None else [listener], detached=True)
    node.pid = proc.pid
    try:
        wait_until_exec_done(proc, node.argv)
    except TimeoutError as e:
        raise ClusterError(f"{node.name}: {e}") from None


def _settle(nodes: Sequence[Node], act: Callable[[list[RecordedProcess]], list[StopOutcome]]) -> dict[str, StopOutcome]:
    """Signal the nodes through `act`, then forget their pids: exited, or never running as the node."""
    try:
        outcomes = act([_process(n) for n in nodes])
    except StillRunning as e:
        names = ", ".join(f"{nodes[i].name} (pid {nodes[i].pid})" for i in e.indexes)
        raise ClusterError(f"still running {KILL_TIMEOUT_S}s after SIGKILL: {names}") from None
    for node in nodes:
        node.pid = None
    return {n.name: outcome for n, outcome in zip(nodes, outcomes, strict=True)}


def stop_nodes(nodes: Sequence[Node], timeout: float = STOP_TIMEOUT_S) -> dict[str, StopOutcome]:
    """SIGTERM all at once, wait for all, SIGKILL those still running at the timeout. Sets pids to None."""
    return _settle(nodes, lambda processes: stop_processes(processes, timeout))


def kill_nodes(nodes: Sequence[Node]) -> dict[str, StopOutcome]:
    """SIGKILL, as a crash would; waits until the processes are gone. Sets their pids to None."""
    return _settle(nodes, kill_processes)


def wait_until_serving(manifest: ClusterManifest, nodes: Sequence[Node], deadline: float) -> None:
    """Wait until each node serves (its ready file is there); fail fast, with its log tail, when one exits."""
    try:
        wait_until_ready([_process(n) for n in nodes], [manifest.ready_path(n) for n in nodes], deadline)
    except ExitedBeforeReady as e:
        raise _exited(manifest, nodes[e.index], "before serving") from None
    except NotReadyInTime as e:
        raise _not_ready(manifest, [nodes[i] for i in e.pending], "serve") from None


async def wait_until_active_controller(manifest: ClusterManifest, deadline: float,
                                      security: ClientSecurity | None = None) -> QuorumInfo:
    """Poll the controllers with DescribeQuorum until one answers as the quorum's leader: the active one.
    security: how to reach the controllers' ports (a secured cluster's admin)."""
    addresses = [(HOST, c.port) for c in manifest.controllers]
    while True:
        quorum = await active_controller(addresses, security)
        if quorum is not None:
            return quorum
        _fail_on_exit(manifest, manifest.controllers, "before a controller was active")
        if time.monotonic() > deadline:
            raise _not_ready(manifest, manifest.controllers, "elect an active controller")
        await asyncio.sleep(POLL_INTERVAL_S)


async def active_controller(addresses: Sequence[tuple[str, int]],
                            security: ClientSecurity | None = None) -> QuorumInfo | None:
    """The quorum as its leader describes it, or None while there is none (an election) or none answers."""
    try:
        return await describe_quorum(addresses, int(METADATA_TIMEOUT_S * 1000), security=security)
    except KafkaError:
        return None


async def wait_until_registered(manifest: ClusterManifest, deadline: float,
                                security: ClientSecurity | None = None) -> None:
    """Poll until every broker's metadata lists all brokers: each has registered and learnt of the others.
    security: how to reach the brokers' ports (a secured cluster's admin)."""
    expected = {b.id for b in manifest.brokers}
    pending = list(manifest.brokers)
    while True:
        listed = await asyncio.gather(*(metadata_brokers(f"{HOST}:{b.port}", security) for b in pending))
        pending = [b for b, brokers in zip(pending, listed, strict=True) if set(brokers or ()) != expected]
        if not pending:
            return
        _fail_on_exit(manifest, pending, "before the cluster formed")
        if time.monotonic() > deadline:
            raise _not_ready(manifest, pending, f"list brokers {sorted(expected)} in their metadata")
        await asyncio.sleep(POLL_INTERVAL_S)


async def metadata_brokers(bootstrap: str, security: ClientSecurity | None = None) -> dict[int, BrokerInfo] | None:
    """The brokers a Metadata request lists, or None when no broker answers in time."""
    try:
        # The request timeout bounds it: a wait_for around refresh() would leave its shared task to fail
        # unretrieved once the Admin closes ("Task exception was never retrieved" on the terminal).
        async with Admin(bootstrap, request_timeout_ms=int(METADATA_TIMEOUT_S * 1000),
                         security=security) as admin:
            snapshot = await admin.cluster.refresh()
    except (KafkaError, OSError, TimeoutError):
        return None
    return snapshot.brokers


def _fail_on_exit(manifest: ClusterManifest, nodes: Iterable[Node], when: str) -> None:
    for node in nodes:
        if _process(node).has_exited():
            raise _exited(manifest, node, when)


def _exited(manifest: ClusterManifest, node: Node, when: str) -> ClusterError:
    log = manifest.log_path(node)
    return ClusterError(f"{node.name} exited {when}; last lines of {log}:\n{output_tail(log)}")


def _not_ready(manifest: ClusterManifest, nodes: Sequence[Node], what: str) -> ClusterError:
    tails = "\n".join(
        f"--- last lines of {manifest.log_path(n)}:\n{output_tail(manifest.log_path(n))}" for n in nodes
    )
    return ClusterError(f"timed out waiting for {', '.join(n.name for n in nodes)} to {what}\n{tails}")
