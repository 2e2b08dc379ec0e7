"""The controller quorum on real sockets and files: QuorumShell nodes in one event loop, each behind its own
listener, elect a leader, commit, fail over and restart from their quorum-state files and logs."""

import asyncio
import json
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from replog.client.connection import Connection
from replog.harness.local_cluster import free_ports
from replog.protocol.apis import CONTROLLER_API_SPECS, ApiKey, response_header_version
from replog.protocol.headers import decode_response_header
from replog.raft import codec
from replog.raft import messages as m
from replog.raft.commits import Committed
from replog.raft.config import QuorumConfig
from replog.raft.node import NotLeaderError
from replog.raft.quorum_state_file import CorruptQuorumStateError, VoterSetMismatchError
from replog.raft.shell import QUORUM_APIS, QUORUM_STATE_FILE, QuorumShell
from replog.server.api_versions import unsupported_version_body
from replog.server.connection import ConnectionHolder
from replog.server.dispatch import Dispatcher
from replog.server.handlers import shared_handlers
from replog.server.inter_broker import open_inter_broker_connection
from replog.server.listener import listen
from tests.conditions import wait_until

HOST = "127.0.0.1"
SECRET = "quorum-test-secret"
SERVED = QUORUM_APIS | {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE}
FAST = {"election_timeout_ms": 300, "fetch_timeout_ms": 600, "election_backoff_max_ms": 300,
        "request_timeout_ms": 600}


async def _connect(host: str, port: int) -> Connection:
    return await open_inter_broker_connection(host, port, client_id="quorum-test", username="controller",
                                              secret=SECRET, request_timeout_ms=600)


class QuorumMember:
    """A QuorumShell behind its own listener, recording the values it applies."""

    def __init__(self, node_id: int, config: QuorumConfig, directory: Path) -> None:
        self.node_id = node_id
        self.applied: list[bytes] = []
        self.shell = QuorumShell(node_id, config, directory, _connect, cluster_id="test-cluster",
                                 on_commit=self._apply)
        self.server: asyncio.AbstractServer | None = None
        self.holder = ConnectionHolder(100)

    def _apply(self) -> None:
        for item in self.shell.take_committed():
            if isinstance(item, Committed) and not item.entry.control:
                self.applied.append(item.entry.value)

    async def start(self) -> None:
        self.shell.start()
        dispatcher = Dispatcher({**shared_handlers(SERVED, SECRET, CONTROLLER_API_SPECS), **self.shell.handlers()},
                                lambda: unsupported_version_body(SERVED, CONTROLLER_API_SPECS),
                                api_specs=CONTROLLER_API_SPECS)
        host, port = self.shell.config.voters[self.node_id]
        self.server = await listen(host, port, self.holder, dispatcher, max_frame_bytes=1 << 20, max_inflight=16,
                                   use_sendfile=False)

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        self.holder.close_all()
        await self.shell.stop()
        await self.server.wait_closed()


def _config(ports: list[int], first_id: int = 3000) -> QuorumConfig:
    return QuorumConfig(voters={first_id + i: (HOST, port) for i, port in enumerate(ports)}, **FAST)


async def _start_quorum(tmp_path: Path, size: int) -> list[QuorumMember]:
    config = _config(free_ports(size))
    members = [QuorumMember(node_id, config, tmp_path / str(node_id)) for node_id in sorted(config.voters)]
    for member in members:
        await member.start()
    return members


def _leader(members: list[QuorumMember]) -> QuorumMember | None:
    leaders = [m for m in members if m.shell.is_leader]
    return max(leaders, key=lambda m: m.shell.node.epoch) if leaders else None


async def _wait_for_leader(members: list[QuorumMember], above_epoch: int = 0) -> QuorumMember:
    await wait_until(lambda: (leader := _leader(members)) is not None and leader.shell.node.epoch > above_epoch,
                     f"a leader in an epoch above {above_epoch}")
    return _leader(members)


async def _append(members: list[QuorumMember], value: bytes) -> None:
    """Append through whichever member leads, again if leadership moved meanwhile."""
    while True:
        leader = await _wait_for_leader(members)
        try:
            await leader.shell.append([value])
            return
        except NotLeaderError:
            continue


async def test_a_quorum_of_one_leads_at_once_and_keeps_its_log_and_epoch_through_a_restart(tmp_path):
    [member] = await _start_quorum(tmp_path, 1)
    try:
        assert member.shell.is_leader
        await member.shell.append([b"a", b"b"])
        assert member.applied == [b"a", b"b"]
        epoch = member.shell.node.epoch
    finally:
        await member.stop()
    again = QuorumMember(member.node_id, member.shell.config, member.shell.directory)
    await again.start()
    try:
        assert again.shell.is_leader and again.shell.node.epoch > epoch
        await wait_until(lambda: again.applied == [b"a", b"b"], "the log replayed after the restart")
        await again.shell.append([b"c"])
        assert again.applied == [b"a", b"b", b"c"]
    finally:
        await again.stop()


async def test_three_voters_elect_one_leader_and_every_voter_applies_what_it_commits(tmp_path):
    members = await _start_quorum(tmp_path, 3)
    try:
        leader = await _wait_for_leader(members)
        # Raft's election safety: at most one leader per epoch. A deposed leader may still think it leads
        # (in its older epoch) until it hears of the new one, which a loaded machine can make visible here.
        leader_epochs = [m.shell.node.epoch for m in members if m.shell.is_leader]
        assert len(leader_epochs) == len(set(leader_epochs)), leader_epochs
        for i in range(20):
            await _append(members, b"v%d" % i)
        expected = [b"v%d" % i for i in range(20)]
        await wait_until(lambda: all(m.applied == expected for m in members), "every voter applied the entries")
        # The quorum-state file holds what the node knows now; under load leadership may have moved since the
        # election above (a re-election is no fault), so the node's current view is the reference.
        node = leader.shell.node
        saved = json.loads((leader.shell.directory / QUORUM_STATE_FILE).read_bytes())
        assert (saved["leaderId"], saved["leaderEpoch"]) == (node.leader_id, node.epoch)
    finally:
        for member in members:
            await member.stop()


async def test_a_new_leader_takes_over_when_the_leader_dies_and_the_old_one_catches_up_on_restart(tmp_path):
    members = await _start_quorum(tmp_path, 3)
    try:
        await _append(members, b"before")
        old = await _wait_for_leader(members)
        old_epoch = old.shell.node.epoch
        await old.stop()
        survivors = [m for m in members if m is not old]
        new = await _wait_for_leader(survivors, above_epoch=old_epoch)
        assert new is not old
        await _append(survivors, b"after")
        await wait_until(lambda: all(m.applied == [b"before", b"after"] for m in survivors), "survivors applied")
        restarted = QuorumMember(old.node_id, old.shell.config, old.shell.directory)
        members[members.index(old)] = restarted
        await restarted.start()
        await wait_until(lambda: restarted.applied == [b"before", b"after"], "the restarted voter caught up")
        assert restarted.shell.node.epoch >= new.shell.node.epoch
    finally:
        for member in members:
            if member.server is not None and member.server.is_serving():
                await member.stop()


async def test_a_corrupt_quorum_state_file_is_refused_naming_it(tmp_path):
    [member] = await _start_quorum(tmp_path, 1)
    await member.stop()
    path = member.shell.directory / QUORUM_STATE_FILE
    path.write_bytes(b"{not json")
    with pytest.raises(CorruptQuorumStateError, match=str(path)):
        QuorumMember(member.node_id, member.shell.config, member.shell.directory).shell.start()


async def test_a_voter_set_other_than_the_saved_one_is_refused(tmp_path):
    [member] = await _start_quorum(tmp_path, 1)
    await member.stop()
    other_voters = _config(free_ports(3))
    path = member.shell.directory / QUORUM_STATE_FILE
    with pytest.raises(VoterSetMismatchError, match=f"{path}.*controller.quorum.voters"):
        QuorumMember(member.node_id, other_voters, member.shell.directory).shell.start()


async def _send_raw(port: int, message: m.Request, connection: Connection) -> m.Response:
    api_key, version, body = codec.encode_request(message)
    frame = await connection.request(api_key, version, [body])
    _, offset = decode_response_header(frame, response_header_version(api_key, version))
    return codec.decode_response(api_key, version, bytes(frame[offset:]))


async def test_quorum_requests_need_the_inter_broker_principal_but_anyone_may_describe_the_quorum(tmp_path):
    [member] = await _start_quorum(tmp_path, 1)
    port = member.shell.config.voters[member.node_id][1]
    anonymous = Connection(HOST, port, request_timeout_ms=2_000)
    await anonymous.connect()
    try:
        vote = m.VoteRequest("test-cluster", 99, 3000, 0, 0, member.node_id)
        answer = await _send_raw(port, vote, anonymous)
        assert answer.error_code == ErrorCode.cluster_authorization_failed and not answer.vote_granted
        described = await _send_raw(port, m.DescribeQuorumRequest(), anonymous)
        assert (described.error_code, described.leader_id) == (ErrorCode.none, member.node_id)
        assert [v.replica_id for v in described.current_voters] == [member.node_id]
    finally:
        anonymous.close()
        await member.stop()


async def test_a_vote_from_outside_the_voter_set_is_refused_and_never_counts(tmp_path):
    [member] = await _start_quorum(tmp_path, 1)
    port = member.shell.config.voters[member.node_id][1]
    connection = await _connect(HOST, port)
    try:
        epoch = member.shell.node.epoch
        vote = m.VoteRequest("test-cluster", epoch + 5, 4242, 100, 100, member.node_id)
        answer = await _send_raw(port, vote, connection)
        assert answer.error_code == ErrorCode.inconsistent_voter_set and not answer.vote_granted
        assert member.shell.is_leader and member.shell.node.epoch == epoch
    finally:
        connection.close()
        await member.stop()


async def test_a_controller_started_with_other_voters_is_refused_loudly_and_disturbs_nothing(tmp_path, caplog):
    members = await _start_quorum(tmp_path, 3)
    leader = await _wait_for_leader(members)
    epoch = leader.shell.node.epoch
    # 3003 believes the voters are 3000, 3001 and itself: a controller.quorum.voters that differs from the
    # quorum's. Its votes reach real voters, which refuse them (INCONSISTENT_VOTER_SET) without counting them
    # or moving to its epoch, and it says why in an error naming its voter set.
    voters = members[0].shell.config.voters
    [intruder_port] = free_ports(1)
    intruder_config = QuorumConfig(voters={3000: voters[3000], 3001: voters[3001], 3003: (HOST, intruder_port)},
                                   **FAST)
    intruder = QuorumMember(3003, intruder_config, tmp_path / "3003")
    await intruder.start()
    def refusals() -> list:
        return [r for r in caplog.records if r.getMessage().startswith("quorum node 3003:")
                and "controller.quorum.voters differ from ours" in r.getMessage()]

    try:
        await wait_until(lambda: len(refusals()) >= 2, "the intruder to be refused twice")
        assert refusals()[0].levelname == "ERROR" and "[3000, 3001, 3003]" in refusals()[0].getMessage()
        assert not intruder.shell.is_leader
        assert _leader(members) is leader and leader.shell.node.epoch == epoch
        await _append(members, b"after the intruder")
        await wait_until(lambda: all(m.applied == [b"after the intruder"] for m in members), "every voter applied")
        # It learnt the leader from the refusals and may fetch, as KafkaRaftClient does; the leader counts it
        # as an observer, never among the voters whose fetches make the high watermark.
        port = voters[leader.node_id][1]
        connection = await _connect(HOST, port)
        try:
            described = await _send_raw(port, m.DescribeQuorumRequest(), connection)
        finally:
            connection.close()
        assert [v.replica_id for v in described.current_voters] == [3000, 3001, 3002]
        assert {o.replica_id for o in described.observers} <= {3003}
    finally:
        await intruder.stop()
        for member in members:
            await member.stop()
