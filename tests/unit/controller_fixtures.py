"""Shared by the ClusterController tests: a controller in-process with the real protocol on a fake clock, fake
brokers that register, heartbeat and record what it pushes (test_controller_fakes.py), and helpers that speak
for them. Tests import the fixtures by name (pytest finds fixtures in the test module's namespace)."""

import uuid
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from replog.controller.channel import ChannelConfig
from replog.controller.cluster import ControllerError
from replog.controller.heartbeats import HeartbeatAnswer
from replog.controller.server import (
    ClusterController,
    ControllerConfig,
)
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_request, encode_request

from .test_controller_fakes import HOST, SECRET, FakeBroker, FakeClock

LAI, UM, SR = ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA
FAST = ChannelConfig(retry_backoff_ms=5, retry_backoff_max_ms=20)
CONTROLLER_ID = 3000
SESSION_MS = 9_000


# ------------------------------------------------------------------------------------------- helpers


def config(log_dir: Path, **overrides) -> ControllerConfig:
    values = {"inter_broker_secret": SECRET, "metadata_log_dir": log_dir, "controller_id": CONTROLLER_ID,
              "channel": FAST, "propagation_timeout_ms": 5_000, "broker_session_timeout_ms": SESSION_MS}
    return ControllerConfig(**(values | overrides))


class Controllers:
    """Starts controllers on a fake clock, each with brokers that register and get unfenced; stops them all."""

    def __init__(self, log_dir: Path, clock: FakeClock) -> None:
        self.log_dir = log_dir
        self.clock = clock
        self.started: list[ClusterController] = []

    async def start(self, *joining: FakeBroker, log_dir: Path | None = None, connect=None,
                    **overrides) -> ClusterController:
        controller = ClusterController(config(log_dir or self.log_dir, **overrides), connect=connect,
                                       clock_ms=self.clock)
        await controller.start()
        self.started.append(controller)
        for fake in joining:
            join(controller, fake)
        await controller.settle()
        return controller

    async def stop_all(self) -> None:
        for controller in self.started:
            await controller.stop()


def join(controller: ClusterController, fake: FakeBroker, incarnation: uuid.UUID | None = None) -> int:
    """Register the broker and unfence it with its first heartbeat, as a starting broker does."""
    epoch = controller.register_broker(fake.broker_id, incarnation or uuid.uuid4(), HOST, fake.port)
    assert heartbeat(controller, fake.broker_id) == HeartbeatAnswer(is_fenced=False, should_shut_down=False)
    return epoch


def epoch_of(controller: ClusterController, broker_id: int) -> int:
    return controller.metadata.brokers[broker_id].epoch


def heartbeat(controller: ClusterController, broker_id: int, *, want_fence: bool = False,
              want_shutdown: bool = False) -> HeartbeatAnswer:
    """A heartbeat with the broker's current epoch."""
    return controller.broker_heartbeat(broker_id, epoch_of(controller, broker_id), want_fence=want_fence,
                                       want_shutdown=want_shutdown)


def let_sessions_expire(controller: ClusterController, clock: FakeClock, *silent: int) -> list[int]:
    """A session timeout passes in which every unfenced broker but `silent` heartbeats; then the periodic
    check runs. Returns the brokers it fenced. No await in between: the background check cannot interleave."""
    clock.advance(SESSION_MS + 1)
    for broker in list(controller.metadata.brokers.values()):
        if broker.broker_id not in silent and broker.is_active:
            heartbeat(controller, broker.broker_id)
    return controller.fence_expired_brokers()


def forget_requests(brokers) -> None:
    for fake in brokers.values():
        fake.received.clear()


def apis(fake: FakeBroker) -> list[ApiKey]:
    return [key for key, _ in fake.received]


def partition_states(request) -> dict[tuple[str, int], object]:
    return {(t.topic_name, p.partition_index): p for t in request.topic_states for p in t.partition_states}


def live_broker_ids(update_metadata) -> list[int]:
    return [b.id for b in update_metadata.live_brokers]


def alter_partition_request(topic_id: uuid.UUID, index: int, new_isr: list[int], *, broker_id: int = 1,
                            broker_epoch: int, leader_epoch: int = 0, partition_epoch: int = 0,
                            leader_recovery_state: int = 0) -> dict:
    """An AlterPartition v2 body."""
    return {"broker_id": broker_id, "broker_epoch": broker_epoch, "topics": [{"topic_id": topic_id, "partitions": [
        {"partition_index": index, "leader_epoch": leader_epoch, "new_isr": new_isr,
         "leader_recovery_state": leader_recovery_state, "partition_epoch": partition_epoch}]}]}


def decoded(api_key: ApiKey, version: int, body: dict):
    """A request as the controller's handler sees it: encoded, then decoded with kio."""
    return decode_request(api_key, version, encode_request(api_key, version, body), 0)


ALIVE = HeartbeatAnswer(is_fenced=False, should_shut_down=False)
FENCED = HeartbeatAnswer(is_fenced=True, should_shut_down=False)
GONE = HeartbeatAnswer(is_fenced=True, should_shut_down=True)


def state(controller: ClusterController, topic: str, partition: int = 0) -> tuple:
    p = controller.registration(topic, partition)
    return p.leader, p.isr, p.leader_epoch, p.partition_epoch


def alter_partition(controller: ClusterController, topic: str, new_isr: list[int], *, broker_id: int | None = None,
                    broker_epoch: int | None = None, **fields) -> ErrorCode:
    """AlterPartition v2 from the current leader (or broker_id) with the current epochs and RECOVERED, or the
    leader_epoch, partition_epoch, leader_recovery_state given: the request's error if it failed as a whole,
    else the partition's."""
    current = controller.registration(topic, 0)
    broker_id = current.leader if broker_id is None else broker_id
    body = alter_partition_request(
        current.topic_id, 0, new_isr, broker_id=broker_id,
        broker_epoch=epoch_of(controller, broker_id) if broker_epoch is None else broker_epoch,
        leader_epoch=fields.get("leader_epoch", current.leader_epoch),
        partition_epoch=fields.get("partition_epoch", current.partition_epoch),
        leader_recovery_state=fields.get("leader_recovery_state", 0))
    response = controller.alter_partition(decoded(ApiKey.ALTER_PARTITION, 2, body), 2)
    if response["error_code"] != ErrorCode.none:
        return response["error_code"]
    return response["topics"][0]["partitions"][0]["error_code"]


def alter_partition_v3(controller: ClusterController, topic: str, members: list[tuple[int, int]]) -> ErrorCode:
    """AlterPartition v3 from the current leader: members are (broker id, the broker epoch the leader saw)."""
    current = controller.registration(topic, 0)
    body = {"broker_id": current.leader, "broker_epoch": epoch_of(controller, current.leader), "topics": [
        {"topic_id": current.topic_id, "partitions": [
            {"partition_index": 0, "leader_epoch": current.leader_epoch, "partition_epoch": current.partition_epoch,
             "leader_recovery_state": 0,
             "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": e} for b, e in members]}]}]}
    return controller.alter_partition(decoded(ApiKey.ALTER_PARTITION, 3, body), 3)["topics"][0]["partitions"][0][
        "error_code"]


def last_state(fake: FakeBroker, api: ApiKey, topic: str, partition: int = 0):
    """The state of topic-partition in the last request of `api` the broker got that names it."""
    for request in reversed(fake.requests(api)):
        states = partition_states(request)
        if (topic, partition) in states:
            return states[(topic, partition)]
    raise AssertionError(f"broker {fake.broker_id} got no {api.name} naming {topic}-{partition}")


def error_of(function, *args, **kwargs) -> ErrorCode:
    """The error code of the ControllerError that function(*args, **kwargs) must raise."""
    with pytest.raises(ControllerError) as raised:
        function(*args, **kwargs)
    return raised.value.error_code


# ------------------------------------------------------------------------------------------ fixtures


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def brokers():
    fakes = {i: await FakeBroker(i).start() for i in (1, 2, 3)}
    yield fakes
    for fake in fakes.values():
        await fake.stop()


@pytest.fixture
async def controllers(tmp_path, clock):
    started = Controllers(tmp_path / "metadata", clock)
    yield started
    await started.stop_all()


@pytest.fixture
async def controller(controllers, brokers):
    return await controllers.start(*brokers.values())
