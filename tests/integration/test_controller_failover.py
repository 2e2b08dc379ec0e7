"""Three ClusterControllers in one event loop, each behind its own listener, run the controller quorum: one is
active, the standbys replay its committed records and refuse brokers with NOT_CONTROLLER, and when the active
one stops another takes over with the same brokers, topics and leader epochs, fencing nobody."""

import time
import uuid
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from replog.controller import records
from replog.controller.channel import ChannelConfig
from replog.controller.cluster import ControllerError
from replog.controller.server import ClusterController, ControllerConfig
from replog.harness.local_cluster import free_ports
from replog.protocol.apis import ApiKey
from replog.raft.config import QuorumConfig
from tests.conditions import wait_until
from tests.unit.test_controller_fakes import HOST, SECRET, FakeBroker

FAST_QUORUM = {"election_timeout_ms": 300, "fetch_timeout_ms": 600, "election_backoff_max_ms": 300,
               "request_timeout_ms": 600}
CONTROLLER_IDS = (3000, 3001, 3002)
SESSION_MS = 9_000
LAI = ApiKey.LEADER_AND_ISR


def state_of(controller: ClusterController) -> list[records.Record]:
    return records.snapshot_records(0, controller.metadata)


class Quorum:
    def __init__(self, root: Path) -> None:
        ports = free_ports(len(CONTROLLER_IDS))
        quorum = QuorumConfig(voters={i: (HOST, p) for i, p in zip(CONTROLLER_IDS, ports, strict=True)},
                              **FAST_QUORUM)
        self.controllers = {
            i: ClusterController(ControllerConfig(
                inter_broker_secret=SECRET, metadata_log_dir=root / str(i), controller_id=i, port=port,
                quorum=quorum, broker_session_timeout_ms=SESSION_MS, propagation_timeout_ms=5_000,
                channel=ChannelConfig(retry_backoff_ms=5, retry_backoff_max_ms=20)))
            for i, port in zip(CONTROLLER_IDS, ports, strict=True)}
        self.running = dict(self.controllers)

    async def start(self) -> None:
        for controller in self.controllers.values():
            await controller.start()

    async def active(self, timeout_s: float = 10.0) -> ClusterController:
        await wait_until(lambda: sum(c.active for c in self.running.values()) == 1, "one active controller",
                         timeout_s)
        return next(c for c in self.running.values() if c.active)

    async def stop(self, controller_id: int) -> None:
        await self.running.pop(controller_id).stop()

    async def stop_all(self) -> None:
        for controller_id in list(self.running):
            await self.stop(controller_id)


@pytest.fixture
async def quorum(tmp_path):
    q = Quorum(tmp_path)
    try:
        await q.start()
        yield q
    finally:
        await q.stop_all()


@pytest.fixture
async def brokers():
    fakes = [await FakeBroker(b).start() for b in (1, 2, 3)]
    yield fakes
    for fake in fakes:
        await fake.stop()


def join(controller: ClusterController, fake: FakeBroker) -> None:
    epoch = controller.register_broker(fake.broker_id, uuid.uuid4(), HOST, fake.port)
    assert not controller.broker_heartbeat(fake.broker_id, epoch, want_fence=False, want_shutdown=False).is_fenced


async def test_standbys_refuse_brokers_and_replay_the_active_controllers_records(quorum, brokers):
    active = await quorum.active()
    standbys = [c for c in quorum.running.values() if c is not active]
    with pytest.raises(ControllerError) as refused:
        standbys[0].register_broker(1, uuid.uuid4(), HOST, brokers[0].port)
    assert refused.value.error_code == ErrorCode.not_controller
    assert standbys[0].alter_partition(None, 2)["error_code"] == ErrorCode.not_controller
    with pytest.raises(ControllerError) as refused:  # admin operations (AlterConfigs, ElectLeaders, ...) too
        standbys[0].commit_records([records.controller_epoch_record(99)])
    assert refused.value.error_code == ErrorCode.not_controller
    for fake in brokers:
        join(active, fake)
    await active.create_topic("orders", {0: [1, 2, 3], 1: [2, 3, 1]})
    await active.settle()
    # create_topic returned once the brokers had the topic, which they got only after it was committed.
    await wait_until(lambda: all(state_of(s) == state_of(active) for s in standbys), "standbys to catch up")
    assert sorted(standbys[0].metadata.topics) == ["orders"] and sorted(standbys[0].metadata.brokers) == [1, 2, 3]
    # Standbys send nothing to the brokers: every LeaderAndIsr came from the active controller.
    assert {r.controller_id for fake in brokers for r in fake.requests(LAI)} == {active.controller_id}


async def test_a_new_active_controller_takes_over_without_fencing_or_moving_leaders(quorum, brokers):
    first = await quorum.active()
    for fake in brokers:
        join(first, fake)
    await first.create_topic("orders", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
    await first.settle()
    before = state_of(first)
    leaders_before = {(p.partition, p.leader, p.leader_epoch)
                      for p in first.metadata.topics["orders"].partitions.values()}
    await wait_until(lambda: all(state_of(c) == before for c in quorum.running.values()), "standbys to catch up")

    stopped_at = time.monotonic()
    await quorum.stop(first.controller_id)
    second = await quorum.active(timeout_s=10)
    failover_s = time.monotonic() - stopped_at
    assert second.controller_epoch > first.controller_epoch
    print(f"new active controller {failover_s:.2f} s after the active one stopped")
    assert failover_s < SESSION_MS / 1000  # within a session timeout: nobody could have been fenced for it

    after = second.metadata
    assert {b: r.fenced for b, r in after.brokers.items()} == {1: False, 2: False, 3: False}
    leaders_after = {(p.partition, p.leader, p.leader_epoch) for p in after.topics["orders"].partitions.values()}
    assert leaders_after == leaders_before  # the failover itself moves no leader and bumps no leader epoch
    # Every broker is resynced with the new controller epoch, and keeps its session with the new controller.
    await wait_until(lambda: all(any(r.controller_epoch == second.controller_epoch for r in fake.requests(LAI))
                                 for fake in brokers), "LeaderAndIsr with the new controller epoch")
    for fake in brokers:
        answer = second.broker_heartbeat(fake.broker_id, after.brokers[fake.broker_id].epoch, want_fence=False,
                                         want_shutdown=False)
        assert not answer.is_fenced
    assert second.fence_expired_brokers() == []

    # The new active controller decides: a broker failure moves leadership as before.
    second.broker_heartbeat(1, after.brokers[1].epoch, want_fence=False, want_shutdown=True)
    await wait_until(lambda: all(p.leader != 1 for p in second.metadata.topics["orders"].partitions.values()),
                     "leadership to leave broker 1")
    remaining = [c for c in quorum.running.values() if c is not second]
    await wait_until(lambda: all(state_of(c) == state_of(second) for c in remaining), "the standby to catch up")
