"""A controller and a broker told to listen on port 0 serve on the ports the OS picked, report them in their
ready files, and the broker registers and advertises its real port: what lets anyone start servers without
choosing ports for them."""

import asyncio
import secrets
import sys
import time

from replog.client import Admin
from replog.harness.processes import (
    HOST,
    SpawnedProcess,
    kill_processes,
    launch,
    output_tail,
    stop_processes,
    wait_until_ready,
)

TIMEOUT_S = 30.0


def start(role: str, tmp_path, overrides: dict[str, str]) -> tuple[SpawnedProcess, int]:
    """`replog <role> start` with these overrides; once it serves, the process and the port it reported."""
    argv = [sys.executable, "-m", "replog", role, "start"]
    for key, value in overrides.items():
        argv += ["--override", f"{key}={value}"]
    output = tmp_path / f"{role}.out"
    process = SpawnedProcess(launch(argv, output, ready_file=tmp_path / f"{role}.ready"))
    try:
        (ready,) = wait_until_ready([process], [tmp_path / f"{role}.ready"], time.monotonic() + TIMEOUT_S)
    except Exception:
        kill_processes([process])
        raise AssertionError(f"{role} did not serve:\n{output_tail(output)}") from None
    assert ready.pid == process.proc.pid and ready.port > 0 and ready.metrics_port is None
    return process, ready.port


async def registered_brokers(bootstrap: str) -> dict:
    deadline = time.monotonic() + TIMEOUT_S
    async with Admin(bootstrap) as admin:
        while not (brokers := (await admin.cluster.refresh()).brokers) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
    return brokers


def test_a_broker_and_its_controller_on_port_0_advertise_the_ports_they_got(tmp_path):
    secret = secrets.token_hex(16)
    processes = []
    try:
        controller, controller_port = start("controller", tmp_path, {
            "listeners": f"PLAINTEXT://{HOST}:0", "metadata.log.dir": str(tmp_path / "controller"),
            "inter.broker.secret": secret})  # fmt: skip
        processes.append(controller)
        broker, broker_port = start("broker", tmp_path, {
            "listeners": f"PLAINTEXT://{HOST}:0", "log.dirs": str(tmp_path / "broker"), "node.id": "1",
            "controller.quorum.bootstrap.servers": f"{HOST}:{controller_port}", "inter.broker.secret": secret})
        processes.append(broker)
        brokers = asyncio.run(registered_brokers(f"{HOST}:{broker_port}"))
        assert [(b.node_id, b.host, b.port) for b in brokers.values()] == [(1, HOST, broker_port)]
    finally:
        stop_processes(processes[::-1], TIMEOUT_S)


def test_a_single_broker_on_port_0_advertises_the_port_it_got(tmp_path):
    broker, port = start("broker", tmp_path, {"listeners": f"PLAINTEXT://{HOST}:0", "log.dirs": str(tmp_path)})
    try:
        brokers = asyncio.run(registered_brokers(f"{HOST}:{port}"))
        assert [(b.node_id, b.host, b.port) for b in brokers.values()] == [(1, HOST, port)]
    finally:
        stop_processes([broker], TIMEOUT_S)
