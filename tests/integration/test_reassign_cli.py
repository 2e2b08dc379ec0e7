"""`replog reassign` against a 4-broker cluster, as kafka-reassign-partitions.sh is used: --generate proposes,
--execute --throttle starts the move and sets the throttles, --verify reports and, once done, clears them;
--cancel reverts a move that cannot finish."""

import asyncio
import json
import subprocess
import sys

import pytest

from replog.harness.local_cluster import LocalCluster

CLI = [sys.executable, "-m", "replog"]
TIMEOUT_S = 60


@pytest.fixture
async def cluster(tmp_path):
    cluster = LocalCluster(tmp_path, brokers=4)
    try:
        await cluster.start()
        yield cluster
    finally:
        await cluster.stop()


async def run(*args: str) -> subprocess.CompletedProcess:
    """In a thread: the controller runs in this event loop and must keep answering."""
    return await asyncio.to_thread(subprocess.run, [*CLI, *args], capture_output=True, timeout=TIMEOUT_S)


async def test_generate_execute_with_throttle_verify_and_cancel(cluster, tmp_path):
    server = ["--bootstrap-server", cluster.bootstrap]
    created = await run("topics", "create", *server, "--topic", "spread", "--partitions", "2",
                        "--replication-factor", "2")
    assert created.returncode == 0, created.stderr
    topics_file = tmp_path / "topics.json"
    topics_file.write_text(json.dumps({"topics": [{"topic": "spread"}], "version": 1}))
    generated = await run("reassign", *server, "--generate", "--topics-to-move-json-file", str(topics_file),
                          "--broker-list", "3,4")
    assert generated.returncode == 0, generated.stderr
    lines = generated.stdout.decode().splitlines()
    assert lines[0] == "Current partition replica assignment"
    proposal = json.loads(lines[lines.index("Proposed partition reassignment configuration") + 1])
    assert {tuple(sorted(p["replicas"])) for p in proposal["partitions"]} == {(3, 4)}

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(proposal))
    executed = await run("reassign", *server, "--execute", "--reassignment-json-file", str(plan),
                         "--throttle", "50000000")
    assert executed.returncode == 0, executed.stderr
    out = executed.stdout.decode()
    assert "The inter-broker throttle limit was set to 50000000 B/s" in out
    assert "Successfully started partition reassignments for spread-0,spread-1" in out

    def moved() -> bool:
        partitions = cluster.controller.metadata.topics["spread"].partitions.values()
        return all(set(p.replicas) == {3, 4} and not p.is_reassigning for p in partitions)

    await cluster.wait_for(moved, 60.0, "the partitions to move to brokers 3 and 4")
    assert cluster.controller.metadata.broker_configs["3"] == {
        "leader.replication.throttled.rate": "50000000", "follower.replication.throttled.rate": "50000000"}
    assert "follower.replication.throttled.replicas" in cluster.controller.metadata.topics["spread"].configs
    verified = await run("reassign", *server, "--verify", "--reassignment-json-file", str(plan))
    assert verified.returncode == 0, verified.stderr
    out = verified.stdout.decode()
    assert "Reassignment of partition spread-0 is completed." in out
    assert "Reassignment of partition spread-1 is completed." in out
    assert "Clearing topic-level throttles on topic spread" in out
    assert not cluster.controller.metadata.broker_configs  # every throttle rate removed
    assert cluster.controller.metadata.topics["spread"].configs == {}

    # KIP-860: with --disallow-replication-factor-change a target of another length is refused, untouched.
    grow = tmp_path / "grow.json"
    grow.write_text(json.dumps({"version": 1, "partitions": [{"topic": "spread", "partition": 1,
                                                               "replicas": [3, 4, 2], "log_dirs": ["any"] * 3}]}))
    refused = await run("reassign", *server, "--execute", "--disallow-replication-factor-change",
                        "--reassignment-json-file", str(grow))
    assert refused.returncode != 0
    assert b"Failed to start the reassignment of spread-1: INVALID_REPLICATION_FACTOR" in refused.stdout
    assert set(cluster.controller.registration("spread", 1).replicas) == {3, 4}
    assert not cluster.controller.registration("spread", 1).is_reassigning

    # A move onto a down broker waits; --verify says so, --cancel reverts it.
    await cluster.kill(1)
    await cluster.wait_for(lambda: 1 not in cluster.active_brokers(), 20.0, "broker 1 to be fenced")
    stuck = tmp_path / "stuck.json"
    stuck.write_text(json.dumps({"version": 1, "partitions": [{"topic": "spread", "partition": 0,
                                                                "replicas": [1, 3], "log_dirs": ["any", "any"]}]}))
    assert (await run("reassign", *server, "--execute", "--reassignment-json-file", str(stuck))).returncode == 0
    busy = await run("reassign", *server, "--execute", "--reassignment-json-file", str(stuck))
    assert busy.returncode != 0 and b"Use --additional" in busy.stderr
    verified = await run("reassign", *server, "--verify", "--reassignment-json-file", str(stuck))
    assert b"Reassignment of partition spread-0 is still in progress." in verified.stdout
    described = await run("topics", "describe", *server, "--topic", "spread")
    assert described.returncode == 0, described.stderr
    line = next(x for x in described.stdout.decode().splitlines() if "Partition: 0" in x)
    fields = dict(field.split(": ", 1) for field in line.strip().split("\t"))
    assert set(fields["Isr"].split(",")) == {"3", "4"}, line  # in the order the replicas joined
    assert (fields["Adding Replicas"], fields["Removing Replicas"]) == ("1", "4"), line
    cancelled = await run("reassign", *server, "--cancel", "--reassignment-json-file", str(stuck))
    assert cancelled.returncode == 0, cancelled.stderr
    assert b"Successfully cancelled partition reassignments for spread-0" in cancelled.stdout
    assert not cluster.controller.registration("spread", 0).is_reassigning
    again = await run("reassign", *server, "--cancel", "--reassignment-json-file", str(stuck))
    assert again.returncode != 0 and b"NO_REASSIGNMENT_IN_PROGRESS" in again.stdout + again.stderr
