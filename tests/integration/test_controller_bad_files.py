"""`replog controller start` on damaged files, as an operator meets them: a corrupt quorum-state file (not JSON,
another data_version, cut short) or a bad metadata-log header stops it with one line naming the file, exit 1
and no traceback; a torn tail of the metadata log (a crash in the middle of an append) is truncated and the
controller serves again, still leading its quorum of one with the epoch it had."""

import asyncio
import json
import time

import pytest

from replog.client.errors import KafkaError
from replog.client.quorum_admin import describe_quorum
from replog.controller.quorum import METADATA_PARTITION_DIR
from replog.harness.controller_process import ControllerProcess
from replog.harness.processes import HOST
from replog.raft.file_log import LOG_FILE
from replog.raft.shell import QUORUM_STATE_FILE

EXIT_TIMEOUT_S = 30.0
LEAD_TIMEOUT_S = 30.0


@pytest.fixture
def controller(tmp_path) -> ControllerProcess:
    """A controller (a quorum of one) that has run once, elected itself and stopped."""
    process = ControllerProcess(tmp_path / "controller", controller_id=3000, output=tmp_path / "controller.out",
                                overrides={"inter.broker.secret": "bad-files-secret"})
    process.start()
    try:
        asyncio.run(leader_epoch(process))  # it leads: its election is on disk
    finally:
        assert process.stop() == 0
    return process


async def leader_epoch(controller: ControllerProcess) -> int:
    """Poll DescribeQuorum until the controller leads; its epoch."""
    deadline = time.monotonic() + LEAD_TIMEOUT_S
    while True:
        try:
            info = await describe_quorum([(HOST, controller.port)])
            if info.leader_id == controller.controller_id:
                return info.leader_epoch
        except KafkaError:
            pass  # not leading yet
        assert time.monotonic() < deadline, f"controller never led:\n{controller.output_tail()}"
        await asyncio.sleep(0.1)  # poll interval


def partition_dir(controller: ControllerProcess):
    return controller.metadata_log_dir / METADATA_PARTITION_DIR


def start_and_wait_for_exit(controller: ControllerProcess) -> tuple[int, str]:
    offset = controller.output.stat().st_size
    controller.launch()
    code = controller.proc.wait(EXIT_TIMEOUT_S)
    return code, controller.output.read_bytes()[offset:].decode(errors="replace")


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (lambda text: b"{not json", "not a quorum-state file"),
        (lambda text: json.dumps({**json.loads(text), "data_version": 7}).encode(), "data_version 7 is not 0"),
        (lambda text: text[: len(text) // 2], "not a quorum-state file"),  # cut short by a crash
    ],
    ids=["not-json", "other-version", "truncated"],
)
def test_a_corrupt_quorum_state_file_is_refused_naming_it_without_a_traceback(controller, damage, says):
    path = partition_dir(controller) / QUORUM_STATE_FILE
    path.write_bytes(damage(path.read_bytes()))
    code, output = start_and_wait_for_exit(controller)
    assert code == 1, output
    assert f"replog: the controller cannot start: {path}: " in output and says in output, output
    assert "Traceback" not in output, output


def test_a_metadata_log_with_a_bad_header_is_refused_naming_it(controller):
    path = partition_dir(controller) / LOG_FILE
    path.write_bytes(b"garbage" + path.read_bytes())
    code, output = start_and_wait_for_exit(controller)
    assert code == 1 and f"{path}: not a replog metadata log" in output, output
    assert "Traceback" not in output, output


def test_a_torn_metadata_log_tail_is_truncated_and_the_controller_serves_again(controller):
    saved_epoch = json.loads((partition_dir(controller) / QUORUM_STATE_FILE).read_text())["leaderEpoch"]
    path = partition_dir(controller) / LOG_FILE
    with open(path, "ab") as f:
        f.write(b"\x00\x00\x00\x40\x12\x34")  # a frame header whose body never made it to the disk
    controller.start()
    try:
        assert asyncio.run(leader_epoch(controller)) >= saved_epoch
    finally:
        assert controller.stop() == 0
    assert "torn tail of 6 bytes" in controller.output.read_text(), controller.output_tail()
