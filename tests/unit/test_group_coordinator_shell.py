"""The broker's shell around the group coordinator, with a fake ReplicaManager and clock: a commit is answered
only once its write is replicated, a parked JoinGroup completes from a timer, leadership loss answers
parked requests with NOT_COORDINATOR, and the periodic offset expiry runs on the timer."""

import asyncio

from kio.schema.errors import ErrorCode

from replog.broker.group_coordinator import EXPIRY_KEY, GroupCoordinatorShell
from replog.broker.replica_manager import PartitionAppendResult
from replog.coordinator.config import GroupCoordinatorConfig
from replog.coordinator.offsets import CommitPartition, CommitRequest
from replog.coordinator.outcomes import JoinRequest
from replog.coordinator.partitioning import partition_for
from replog.coordinator.records import OffsetCommitKey, decode_key
from replog.log.partition_log import TopicPartition
from replog.protocol.records import decode_records, iter_batches
from replog.protocol.topics import OFFSETS_TOPIC

GROUP = "g"
PARTITION = partition_for(GROUP, 50)
SUBSCRIPTION = (("range", b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"),)


class FakeReplicas:
    """Appends are held until the test replicates (or fails) them; no partition is hosted (loads are empty)."""

    def __init__(self) -> None:
        self.appends: list[tuple[list, asyncio.Future]] = []

    def append_records(self, entries, required_acks, timeout_ms):
        assert required_acks == -1
        future = asyncio.get_running_loop().create_future()
        self.appends.append((entries, future))
        return future

    def replicate(self, error: ErrorCode = ErrorCode.none) -> None:
        for entries, future in self.appends:
            if not future.done():
                future.set_result({(t, p): PartitionAppendResult(error) for t, p, _ in entries})

    def records(self) -> list[tuple[bytes, bytes | None]]:
        return [(r.key, r.value) for entries, _ in self.appends for _, _, batch in entries
                for b in iter_batches(batch) for r in decode_records(b)]

    def get_partition(self, topic, index):
        return None


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


async def loaded_shell(**config) -> tuple[GroupCoordinatorShell, FakeReplicas, Clock]:
    replicas, clock = FakeReplicas(), Clock()
    shell = GroupCoordinatorShell(GroupCoordinatorConfig(**config), replicas, clock)
    shell.on_leadership(TopicPartition(OFFSETS_TOPIC, PARTITION), 0)
    for _ in range(100):  # the load is a task: an empty log loads within a few turns of the loop
        if shell.coordinator.status_error(GROUP) is None:
            break
        await asyncio.sleep(0)
    assert shell.coordinator.status_error(GROUP) is None
    return shell, replicas, clock


def join(shell: GroupCoordinatorShell, member_id: str = "") -> asyncio.Future:
    request_id, future = shell.new_request()
    shell.apply(shell.coordinator.join(JoinRequest(
        request_id, GROUP, member_id, None, "c", "/127.0.0.1", 10_000, 10_000, "consumer", SUBSCRIPTION),
        shell.now_ms, "uuid"))
    return future


def commit(shell: GroupCoordinatorShell) -> asyncio.Future:
    request_id, future = shell.new_request()
    shell.apply(shell.coordinator.commit(CommitRequest(
        request_id, GROUP, -1, "", (CommitPartition("t", 0, 42),)), shell.now_ms))
    return future


async def test_a_commit_is_answered_once_replicated():
    shell, replicas, _ = await loaded_shell()
    answer = commit(shell)
    await asyncio.sleep(0)
    assert not answer.done()
    assert [decode_key(k) for k, _ in replicas.records()] == [OffsetCommitKey(GROUP, "t", 0)]
    replicas.replicate()
    assert (await answer).partitions == (("t", 0, ErrorCode.none),)
    assert shell.coordinator.fetch_offsets(GROUP, [("t", 0)])[1][0].offset == 42


async def test_a_failed_write_answers_the_commit_with_the_converted_error():
    shell, replicas, _ = await loaded_shell()
    answer = commit(shell)
    replicas.replicate(ErrorCode.not_leader_or_follower)
    assert (await answer).partitions == (("t", 0, ErrorCode.not_coordinator),)
    assert shell.coordinator.fetch_offsets(GROUP, [("t", 0)])[1][0].offset == -1


async def test_a_parked_join_completes_from_the_rebalance_timer():
    shell, _, clock = await loaded_shell(group_initial_rebalance_delay_ms=10)
    first = await join(shell)
    assert first.error == ErrorCode.member_id_required
    second = join(shell, first.member_id)
    for _ in range(10):  # let everything runnable run; only the fake clock can complete the join
        await asyncio.sleep(0)
    assert not second.done()  # parked until group.initial.rebalance.delay.ms passes on the broker's clock
    clock.now += 10
    result = await asyncio.wait_for(second, 5)
    assert (result.error, result.generation_id, result.leader_id) == (ErrorCode.none, 1, first.member_id)


async def test_losing_leadership_answers_parked_joins_with_not_coordinator():
    shell, _, _ = await loaded_shell(group_initial_rebalance_delay_ms=60_000)
    first = await join(shell)
    parked = join(shell, first.member_id)
    shell.on_leadership(TopicPartition(OFFSETS_TOPIC, PARTITION), None)
    assert (await parked).error == ErrorCode.not_coordinator
    assert shell.coordinator.status_error(GROUP) == ErrorCode.not_coordinator


async def test_offsets_expire_on_the_timer():
    shell, replicas, clock = await loaded_shell(offsets_retention_minutes=1,
                                                offsets_retention_check_interval_ms=1000)
    answer = commit(shell)
    replicas.replicate()
    await answer
    assert EXPIRY_KEY in shell.timers
    clock.now += 61_000
    shell._fire()  # what the loop timer calls at the expiry deadline
    keys_and_values = replicas.records()
    assert keys_and_values[-2:] == [(keys_and_values[0][0], None), (keys_and_values[-1][0], None)]
    assert shell.coordinator.fetch_offsets(GROUP, [("t", 0)])[1][0].offset == -1
    assert EXPIRY_KEY in shell.timers  # and it runs again
