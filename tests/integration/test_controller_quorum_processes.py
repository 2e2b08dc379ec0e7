"""`replog controller start` with three voters as real processes, each on a listening socket handed down by
the test (the voters must know each other's ports): they elect an active controller, and after a SIGKILL of it
another one is elected and activates within seconds."""

import asyncio
import signal
import sys
import time
from pathlib import Path

from kio.schema.errors import ErrorCode

from replog.client.connection import Connection
from replog.client.errors import KafkaError
from replog.harness.processes import (
    HOST,
    SpawnedProcess,
    kill_processes,
    launch,
    listening_socket,
    wait_until_ready,
)
from replog.protocol.apis import response_header_version
from replog.protocol.headers import decode_response_header
from replog.protocol.primitives import DecodeError
from replog.raft import codec
from replog.raft import messages as m

CONTROLLER_IDS = (3000, 3001, 3002)
READY_TIMEOUT_S = 30.0
FAILOVER_DEADLINE_S = 15.0  # Kafka's default quorum timeouts: a new leader in about 1-3.5 s


async def describe_quorum(port: int) -> m.DescribeQuorumResponse | None:
    """DescribeQuorum as any client may send it; None when the controller does not answer."""
    connection = Connection(HOST, port, request_timeout_ms=1_000)
    try:
        await connection.connect()
        api_key, version, body = codec.encode_request(m.DescribeQuorumRequest())
        frame = await connection.request(api_key, version, [body])
        _, offset = decode_response_header(frame, response_header_version(api_key, version))
        return codec.decode_response(api_key, version, bytes(frame[offset:]))
    except (OSError, KafkaError, DecodeError):  # refused, reset or timed out: a dead or starting controller
        return None
    finally:
        connection.close()


async def active_controller(ports: dict[int, int], deadline: float, above_epoch: int = 0) -> tuple[int, int]:
    """Poll until a controller answers DescribeQuorum as the leader of an epoch above `above_epoch`."""
    while time.monotonic() < deadline:
        for port in ports.values():
            answer = await describe_quorum(port)
            if answer is not None and answer.error_code == ErrorCode.none and answer.leader_epoch > above_epoch:
                return answer.leader_id, answer.leader_epoch
        await asyncio.sleep(0.05)  # poll interval
    raise AssertionError(f"no controller leads an epoch above {above_epoch}")


async def wait_for_output(path: Path, text: str, deadline: float) -> None:
    while text not in path.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"{path} never said {text!r}"
        await asyncio.sleep(0.05)  # poll interval


async def test_three_controller_processes_fail_over_after_a_sigkill_of_the_active_one(tmp_path):
    sockets = {i: listening_socket() for i in CONTROLLER_IDS}
    ports = {i: s.getsockname()[1] for i, s in sockets.items()}
    voters = ",".join(f"{i}@{HOST}:{port}" for i, port in ports.items())
    processes, outputs = {}, {}
    try:
        for controller_id, sock in sockets.items():
            argv = [sys.executable, "-m", "replog", "controller", "start",
                    "--override", f"node.id={controller_id}",
                    "--override", f"listeners=CONTROLLER://{HOST}:{ports[controller_id]}",
                    "--override", f"metadata.log.dir={tmp_path / str(controller_id)}",
                    "--override", "inter.broker.secret=quorum-secret",
                    "--override", f"controller.quorum.voters={voters}"]
            outputs[controller_id] = tmp_path / f"controller-{controller_id}.out"
            processes[controller_id] = launch(argv, outputs[controller_id],
                                              ready_file=tmp_path / f"controller-{controller_id}.ready",
                                              listeners=[sock])
            sock.close()
        await asyncio.to_thread(wait_until_ready, [SpawnedProcess(p) for p in processes.values()],
                                [tmp_path / f"controller-{i}.ready" for i in processes], time.monotonic() + 30)
        first, epoch = await active_controller(ports, time.monotonic() + READY_TIMEOUT_S)
        await wait_for_output(outputs[first], f"controller {first} is active in epoch {epoch}",
                              time.monotonic() + READY_TIMEOUT_S)

        killed_at = time.monotonic()
        processes[first].send_signal(signal.SIGKILL)
        processes[first].wait(10)
        survivors = {i: port for i, port in ports.items() if i != first}
        second, new_epoch = await active_controller(survivors, killed_at + FAILOVER_DEADLINE_S, above_epoch=epoch)
        await wait_for_output(outputs[second], f"controller {second} is active in epoch {new_epoch}",
                              killed_at + FAILOVER_DEADLINE_S)
        print(f"SIGKILL of the active controller -> controller {second} active after "
              f"{time.monotonic() - killed_at:.2f} s")
        assert second != first
    finally:
        kill_processes([SpawnedProcess(p) for p in processes.values()])
