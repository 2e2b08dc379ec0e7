"""DelayedFetch and DelayedProduce on a real ReplicaManager: each of Kafka's completion conditions wakes a
parked request through the event that causes it, with no timer involved (facts §3 and §5)."""

import errno
import uuid

import pytest
from kio.schema.errors import ErrorCode

from replog.broker.delayed_fetch import DelayedFetch
from replog.broker.delayed_produce import DelayedProduce
from replog.broker.fetch_params import FetchParams, FetchPartitionParams, FollowerFetch
from replog.broker.replica_manager import ReplicaManager
from replog.log.config import LogConfig
from replog.log.log_manager import LogManager
from replog.log.offset_metadata import LogOffsetMetadata
from replog.log.segment_files import OS_FILE_OPS, SegmentFileOps
from replog.protocol.control import LeaderAndIsrPartitionState, LeaderAndIsrRequest, LeaderAndIsrTopicState
from replog.protocol.fetch import FetchPartitionResult
from replog.protocol.records import build_batch

LOCAL, FOLLOWER = 1, 2
TOPIC_ID = uuid.uuid4()
PARKED_MS = 60_000  # long enough that only the condition under test can complete the operation


class Clock:
    now = 1_000_000

    def __call__(self) -> int:
        return self.now


class ReadsFailOnDemand(SegmentFileOps):
    """Segment file reads that fail once `failing` is set, as a broken disk's would."""

    failing = False

    def pread(self, fd, size, position):
        if self.failing:
            raise OSError(errno.EIO, "injected read failure")
        return super().pread(fd, size, position)


async def leading_replica_manager(log_dir, file_ops: SegmentFileOps = OS_FILE_OPS) -> ReplicaManager:
    config = LogConfig(segment_bytes=4096)
    manager = ReplicaManager(LOCAL, LogManager([log_dir], config, clock_ms=Clock(), file_ops=file_ops), config, 1,
                             clock_ms=Clock(), replica_lag_time_max_ms=10_000, fetch_purgatory_size=100,
                             produce_purgatory_size=100, alter_isr=lambda partition, change: None)
    await lead(manager, leader_epoch=3, isr=[LOCAL, FOLLOWER])
    return manager


@pytest.fixture
async def replicas(tmp_path):
    return await leading_replica_manager(tmp_path)


async def lead(manager: ReplicaManager, *, leader_epoch: int, isr: list[int], leader: int = LOCAL,
         partition_epoch: int | None = None) -> None:
    state = LeaderAndIsrPartitionState("t", 0, 1, leader, leader_epoch, isr,
                                       leader_epoch if partition_epoch is None else partition_epoch,
                                       [LOCAL, FOLLOWER])
    error, errors = await manager.become_leader_or_follower(
        LeaderAndIsrRequest(9, 1, -1, [LeaderAndIsrTopicState("t", TOPIC_ID, [state])], []))
    assert error == ErrorCode.none and set(errors.values()) == {ErrorCode.none}


def append(manager: ReplicaManager, count: int = 1, acks: int = 1):
    records = memoryview(bytearray(build_batch([(None, b"x" * 100, [], 1000)] * count)))
    result = manager.append_to_partition("t", 0, records, acks)
    assert result.error_code == ErrorCode.none
    return result


def park_fetch(manager: ReplicaManager, fetch_offset: int, *, replica_id: int = FOLLOWER, min_bytes: int = 1,
               current_leader_epoch: int = 3, last_fetched_epoch: int = -1) -> DelayedFetch:
    params = FetchParams(replica_id, PARKED_MS, min_bytes, 1 << 20, [
        FetchPartitionParams("t", 0, fetch_offset, current_leader_epoch, last_fetched_epoch, 0, 1 << 20)])
    op = DelayedFetch(manager, params, [fetch_offset_metadata(manager, fetch_offset)])
    assert not manager.fetch_purgatory.try_complete_else_watch(op, [("t", 0)])
    return op


def fetch_offset_metadata(manager: ReplicaManager, fetch_offset: int) -> LogOffsetMetadata:
    """Where the read that parks a fetch at fetch_offset would have started."""
    return manager.get_partition("t", 0).log.offset_metadata_of(fetch_offset)


def fetched(op: DelayedFetch):
    assert op.future.done(), "the delayed fetch is still parked"
    (result,) = op.future.result()
    return result


async def test_follower_fetch_completes_when_an_append_reaches_min_bytes(replicas):
    op = park_fetch(replicas, 0, min_bytes=500)
    append(replicas)  # one ~130-byte batch: below min_bytes
    assert not op.future.done()
    append(replicas, 5)
    assert fetched(op).error_code == ErrorCode.none


async def test_consumer_fetch_waits_for_the_high_watermark_not_the_leo(replicas):
    op = park_fetch(replicas, 0, replica_id=-1)
    append(replicas)  # the follower has not fetched it yet: HW stays 0
    assert not op.future.done()
    replicas.read_partition("t", 0, 1, current_leader_epoch=3, last_fetched_epoch=-1, max_bytes=1 << 20,
                            fetcher=FollowerFetch(FOLLOWER, 0), min_one_batch=True)  # the follower reports offset 1: HW moves to 1
    assert fetched(op).high_watermark == 1


async def test_leadership_change_completes_with_not_leader(replicas):
    op = park_fetch(replicas, 0)
    await lead(replicas, leader_epoch=4, isr=[FOLLOWER], leader=FOLLOWER)
    assert fetched(op).error_code == ErrorCode.not_leader_or_follower


async def test_new_leader_epoch_completes_a_fetch_with_the_old_one_as_fenced(replicas):
    op = park_fetch(replicas, 0, current_leader_epoch=3)
    await lead(replicas, leader_epoch=4, isr=[LOCAL, FOLLOWER])
    assert fetched(op).error_code == ErrorCode.fenced_leader_epoch


async def test_fetch_offset_past_the_end_completes_with_out_of_range(replicas):
    append(replicas, 3)
    op = park_fetch(replicas, 3)
    replicas.get_partition("t", 0).log.truncate_to(1)  # as after a truncation
    replicas.fetch_purgatory.check_and_complete(("t", 0))
    assert fetched(op).error_code == ErrorCode.offset_out_of_range


async def test_segment_roll_completes_a_fetch_on_the_older_segment(replicas):
    append(replicas)
    op = park_fetch(replicas, 1, min_bytes=1 << 20)
    while replicas.get_partition("t", 0).log.active_segment.base_offset <= 1:
        append(replicas, 10)  # fills the 4 KiB segment, then rolls
    assert fetched(op).error_code == ErrorCode.none


async def test_diverging_epoch_completes_at_once(replicas):
    append(replicas, 2)
    await lead(replicas, leader_epoch=4, isr=[LOCAL, FOLLOWER])
    append(replicas, 2)
    params = FetchParams(FOLLOWER, PARKED_MS, 1, 1 << 20, [FetchPartitionParams("t", 0, 3, 4, 3, 0, 1 << 20)])
    op = DelayedFetch(replicas, params, [fetch_offset_metadata(replicas, 3)])
    assert replicas.fetch_purgatory.try_complete_else_watch(op, [("t", 0)])
    assert fetched(op).diverging_epoch == (3, 2)


async def test_try_complete_reads_no_file_so_an_append_wakes_parked_fetches_even_on_a_failing_disk(tmp_path):
    disk = ReadsFailOnDemand()
    manager = await leading_replica_manager(tmp_path, disk)
    append(manager, 2)
    follower_fetch = park_fetch(manager, 0, min_bytes=1 << 20)
    consumer_fetch = park_fetch(manager, 0, replica_id=-1, min_bytes=1 << 20)
    disk.failing = True
    append(manager, 3)  # an append writes and never reads; its wake-up runs both try_completes
    assert not follower_fetch.try_complete()
    assert not consumer_fetch.try_complete()
    assert not manager.log_manager.failure_channel.offline_dirs
    assert not manager.get_partition("t", 0).storage_failed


async def test_a_follower_fetch_moves_the_high_watermark_with_its_position_so_consumers_wait_without_io(replicas):
    for _ in range(2):
        append(replicas)  # one batch per offset, so that the follower fetches from batch starts
    replicas.read_partition("t", 0, 2, current_leader_epoch=3, last_fetched_epoch=-1, max_bytes=1 << 20,
                            fetcher=FollowerFetch(FOLLOWER, 0), min_one_batch=True)
    log = replicas.get_partition("t", 0).log
    assert log.high_watermark_metadata == log.offset_metadata_of(2) == log.log_end_offset_metadata
    for _ in range(3):
        append(replicas)
    replicas.read_partition("t", 0, 3, current_leader_epoch=3, last_fetched_epoch=-1, max_bytes=1 << 20,
                            fetcher=FollowerFetch(FOLLOWER, 0), min_one_batch=True)
    assert log.high_watermark == 3 < log.log_end_offset
    assert log.high_watermark_metadata == log.offset_metadata_of(3)  # from the follower's read, not a lookup


async def test_acks_all_produce_completes_when_the_isr_has_the_records(replicas):
    result = append(replicas, 2, acks=-1)
    op = DelayedProduce(replicas, PARKED_MS, {("t", 0): result}, {("t", 0): result})
    assert not replicas.produce_purgatory.try_complete_else_watch(op, [("t", 0)])
    follower = FollowerFetch(FOLLOWER, 0)
    replicas.read_partition("t", 0, 1, current_leader_epoch=3, last_fetched_epoch=-1, max_bytes=1 << 20,
                            fetcher=follower, min_one_batch=True)
    assert not op.future.done()  # the follower has offset 0 only
    replicas.read_partition("t", 0, 2, current_leader_epoch=3, last_fetched_epoch=-1, max_bytes=1 << 20,
                            fetcher=follower, min_one_batch=True)
    assert op.future.result()[("t", 0)].error_code == ErrorCode.none


async def test_acks_all_produce_answers_not_leader_when_leadership_moves(replicas):
    result = append(replicas, 1, acks=-1)
    op = DelayedProduce(replicas, PARKED_MS, {("t", 0): result}, {("t", 0): result})
    assert not replicas.produce_purgatory.try_complete_else_watch(op, [("t", 0)])
    await lead(replicas, leader_epoch=4, isr=[FOLLOWER], leader=FOLLOWER)
    assert op.future.result()[("t", 0)].error_code == ErrorCode.not_leader_or_follower


async def test_a_fetch_over_two_partitions_adds_their_bytes_when_the_woken_one_alone_falls_short(tmp_path):
    # The woken partition is checked first; short of min_bytes alone, the others' bytes still count.
    manager = await leading_replica_manager(tmp_path)
    await lead_topic_u(manager)
    partitions = [FetchPartitionParams(topic, 0, 0, 3, -1, 0, 1 << 20) for topic in ("t", "u")]
    offsets = [manager.get_partition(topic, 0).log.offset_metadata_of(0) for topic in ("t", "u")]
    op = DelayedFetch(manager, FetchParams(FOLLOWER, PARKED_MS, 200, 1 << 20, partitions), offsets)
    assert not manager.fetch_purgatory.try_complete_else_watch(op, [("t", 0), ("u", 0)])
    append(manager)  # ~130 bytes on t-0
    assert not op.future.done()
    append_to_u(manager, acks=1)  # ~130 bytes on u-0 alone
    assert [result.error_code for result in op.future.result()] == [ErrorCode.none, ErrorCode.none]


async def lead_topic_u(manager: ReplicaManager) -> None:
    """A second partition, u-0, led here with the same replicas as t-0."""
    state = LeaderAndIsrPartitionState("u", 0, 1, LOCAL, 3, [LOCAL, FOLLOWER], 3, [LOCAL, FOLLOWER])
    error, _ = await manager.become_leader_or_follower(
        LeaderAndIsrRequest(9, 1, -1, [LeaderAndIsrTopicState("u", uuid.uuid4(), [state])], []))
    assert error == ErrorCode.none


def append_to_u(manager: ReplicaManager, acks: int):
    result = manager.append_to_partition("u", 0, memoryview(bytearray(build_batch([(None, b"x" * 100, [], 1000)]))),
                                         acks)
    assert result.error_code == ErrorCode.none
    return result


async def test_acks_all_produce_over_two_partitions_checks_only_the_partition_whose_hw_moved(tmp_path, monkeypatch):
    manager = await leading_replica_manager(tmp_path)
    await lead_topic_u(manager)
    results = {("t", 0): append(manager, 1, acks=-1), ("u", 0): append_to_u(manager, acks=-1)}
    op = DelayedProduce(manager, PARKED_MS, results, dict(results))
    assert not manager.produce_purgatory.try_complete_else_watch(op, list(results))
    looked_up = []
    get_partition = manager.get_partition
    monkeypatch.setattr(manager, "get_partition", lambda *key: looked_up.append(key) or get_partition(*key))
    follower = FollowerFetch(FOLLOWER, 0)
    manager.read_partition("t", 0, 1, current_leader_epoch=3, last_fetched_epoch=-1, max_bytes=1 << 20,
                           fetcher=follower, min_one_batch=True)  # t-0's HW passes its record
    assert not op.future.done()
    assert looked_up == [("t", 0)]
    manager.read_partition("u", 0, 1, current_leader_epoch=3, last_fetched_epoch=-1, max_bytes=1 << 20,
                           fetcher=follower, min_one_batch=True)
    assert {key: r.error_code for key, r in op.future.result().items()} == {("t", 0): ErrorCode.none,
                                                                             ("u", 0): ErrorCode.none}


async def test_a_wake_up_re_counts_only_its_own_partition_of_a_parked_fetch(tmp_path, monkeypatch):
    manager = await leading_replica_manager(tmp_path)
    await lead_topic_u(manager)
    partitions = [FetchPartitionParams(topic, 0, 0, 3, -1, 0, 1 << 20) for topic in ("t", "u")]
    offsets = [manager.get_partition(topic, 0).log.offset_metadata_of(0) for topic in ("t", "u")]
    op = DelayedFetch(manager, FetchParams(FOLLOWER, PARKED_MS, 1, 1 << 20, partitions), offsets)
    assert not manager.fetch_purgatory.try_complete_else_watch(op, [("t", 0), ("u", 0)])
    looked_up = []
    get_partition = manager.get_partition
    monkeypatch.setattr(manager, "get_partition", lambda *key: looked_up.append(key) or get_partition(*key))
    manager.fetch_purgatory.check_and_complete(("t", 0))  # e.g. t-0's HW moved: nothing new to read
    assert not op.future.done()
    assert looked_up == [("t", 0)]
    append_to_u(manager, acks=1)
    assert op.future.done()


async def test_a_quiet_session_partition_woken_after_another_wake_up_counts_its_bytes(tmp_path):
    # Fetch sessions park quiet partitions unread and unwatched; one joins the fetch when it changes, after
    # the counted shares of the read ones exist (a wake-up on t-0 built them): its bytes must count.
    manager = await leading_replica_manager(tmp_path)
    await lead_topic_u(manager)
    read = FetchPartitionParams("t", 0, 0, 3, -1, 0, 1 << 20)
    quiet = FetchPartitionParams("u", 0, 0, 3, -1, 0, 1 << 20)
    session = quiet_session(manager, read, quiet)
    op = DelayedFetch(manager, FetchParams(FOLLOWER, PARKED_MS, 1, 1 << 20, [read]),
                      [manager.get_partition("t", 0).log.offset_metadata_of(0)], session)
    assert not manager.fetch_purgatory.try_complete_else_watch(op, [("t", 0)])
    manager.fetch_purgatory.check_and_complete(("t", 0))
    assert not op.future.done() and op.keys == (("t", 0),)
    append_to_u(manager, acks=1)
    assert len(op.future.result()) == 2  # t-0, and u-0 that joined it
    assert not session.waiters, "a completed fetch leaves its session"


def quiet_session(manager: ReplicaManager, active: FetchPartitionParams, quiet: FetchPartitionParams):
    """A follower's fetch session on the manager with `quiet` quiet (caught up at offset 0)."""
    results = [FetchPartitionResult(p.partition, ErrorCode.none, 0, 0, 0, records=b"") for p in (active, quiet)]
    session = manager.fetch_sessions.get(manager.fetch_sessions.create(True, [active, quiet], results, 0))
    session.record_reads([active, quiet], [None, manager.get_partition(quiet.topic, quiet.partition).log.offset_metadata_of(0)], 0)
    return session


async def test_a_parked_session_fetch_watches_only_what_it_read(tmp_path):
    """A session of 1,000 quiet partitions and one read: the parked fetch is watched on the one key, and a
    change to one quiet partition adds just that key."""
    manager = await leading_replica_manager(tmp_path)
    await lead_topic_u(manager)
    read = FetchPartitionParams("t", 0, 0, 3, -1, 0, 1 << 20)
    quiet = [FetchPartitionParams("idle", i, 0, 3, -1, 0, 1 << 20) for i in range(1000)]
    results = [FetchPartitionResult(p.partition, ErrorCode.none, 0, 0, 0, records=b"") for p in [read, *quiet]]
    session = manager.fetch_sessions.get(manager.fetch_sessions.create(True, [read, *quiet], results, 0))
    session.record_reads(quiet, [LogOffsetMetadata(0)] * len(quiet), 0)
    future = manager.fetch_messages(FetchParams(FOLLOWER, PARKED_MS, 1, 1 << 20, [read]), session)
    assert not future.done()
    assert manager.fetch_purgatory._watchers.keys() == {("t", 0)}
    manager.fetch_sessions.partition_changed(("idle", 7))
    assert manager.fetch_purgatory._watchers.keys() == {("t", 0), ("idle", 7)}


async def test_an_acks_all_answer_is_encoded_in_the_follower_fetch_that_moves_the_high_watermark(replicas):
    """Kafka's rule: the acks=all produce completes in the step in which the follower's fetch moves the HW.
    Here the handler's encoding runs in that very call too, not in a task that wakes a loop turn later."""
    pending = replicas.append_records([("t", 0, memoryview(bytearray(build_batch([(None, b"x", [], 1000)]))))],
                                      -1, PARKED_MS)
    encoded = []
    pending.then(lambda results: encoded.append(results[("t", 0)].error_code) or ["answer"])
    replicas.read_partition("t", 0, 1, current_leader_epoch=3, last_fetched_epoch=-1, max_bytes=1 << 20,
                            fetcher=FollowerFetch(FOLLOWER, 0), min_one_batch=True)
    assert encoded == [ErrorCode.none]
    assert pending.result() == ["answer"]


async def test_a_consumer_fetch_answer_is_encoded_in_the_follower_fetch_that_moves_the_high_watermark(replicas):
    params = FetchParams(-1, PARKED_MS, 1, 1 << 20, [FetchPartitionParams("t", 0, 0, 3, -1, 0, 1 << 20)])
    pending = replicas.fetch_messages(params)
    assert not isinstance(pending, list), "nothing below the HW yet: the fetch parks"
    pending.then(lambda results: [result.high_watermark for result in results])
    append(replicas)
    assert not pending.done()  # the HW has not moved
    replicas.read_partition("t", 0, 1, current_leader_epoch=3, last_fetched_epoch=-1, max_bytes=1 << 20,
                            fetcher=FollowerFetch(FOLLOWER, 0), min_one_batch=True)
    assert pending.result() == [1]


async def test_a_woken_follower_fetch_re_reads_without_recording_the_follower_again(replicas, monkeypatch):
    """Kafka's DelayedFetch.onComplete reads with readFromLocalLog: the follower's position was recorded when
    its fetch arrived, and has not moved while the fetch waited, so the answer's re-read leaves its fetch state
    (and with it the HW and the ISR) alone."""
    params = FetchParams(FOLLOWER, PARKED_MS, 1, 1 << 20, [FetchPartitionParams("t", 0, 0, 3, -1, 0, 1 << 20)])
    pending = replicas.fetch_messages(params)
    assert not isinstance(pending, list), "nothing past the follower's offset: the fetch parks"
    partition = replicas.get_partition("t", 0)
    recorded = partition.followers[FOLLOWER]
    assert recorded.log_end_offset == 0
    updates = []
    update = partition.update_follower_fetch_state
    monkeypatch.setattr(partition, "update_follower_fetch_state", lambda *a, **k: updates.append(a) or update(*a, **k))
    append(replicas)
    (result,) = pending.result()
    assert result.error_code == ErrorCode.none and result.records.length > 0
    assert updates == []
    assert partition.followers[FOLLOWER] is recorded
    assert partition.high_watermark == 0  # only the follower's next fetch, at offset 1, moves it
