"""A controller process paused past the broker session timeout (SIGSTOP, as a long GC pause or a frozen VM)
fences no broker and moves no leadership when it resumes (issue 19): the brokers' heartbeats were waiting in
its sockets, and it gives every session a full timeout from the moment it notices its own stall."""

import os
import signal
import time

from replog.client.admin import NewTopic
from replog.client.sync import SyncAdmin
from replog.cluster_control import cluster_down, cluster_up

SESSION_MS = 3_000
PAUSE_S = 2 * SESSION_MS / 1000  # the fault itself: the controller is frozen this long


def _leaders(admin: SyncAdmin) -> dict[int, tuple[int, int]]:
    return {p.partition: (p.leader, p.leader_epoch) for p in admin.describe_topics(["paused"])["paused"].partitions}


def _wait_for(condition, what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_paused_controller_fences_no_broker_and_moves_no_leader_when_it_resumes(tmp_path):
    manifest = cluster_up(tmp_path, 3, controllers=1,
                          controller_overrides={"broker.session.timeout.ms": str(SESSION_MS)},
                          broker_overrides={"broker.heartbeat.interval.ms": "500"})
    controller_log = manifest.log_path(manifest.controller)
    admin = SyncAdmin(manifest.bootstrap)
    try:
        admin.create_topics([NewTopic("paused", 6, 3)])
        _wait_for(lambda: all(leader >= 0 for leader, _ in _leaders(admin).values()), "leaders for every partition")
        before = _leaders(admin)
        os.kill(manifest.controller.pid, signal.SIGSTOP)
        try:
            time.sleep(PAUSE_S)
        finally:
            os.kill(manifest.controller.pid, signal.SIGCONT)
        _wait_for(lambda: "was stalled" in controller_log.read_text(), "the controller noticing its stall")
        # Watch a whole session timeout after the resume: nobody is fenced, no leadership moves.
        watch_until = time.monotonic() + SESSION_MS / 1000 + 1
        while time.monotonic() < watch_until:
            assert " fenced (" not in controller_log.read_text()
            time.sleep(0.1)
        assert _leaders(admin) == before
    finally:
        admin.close()
        cluster_down(tmp_path)
