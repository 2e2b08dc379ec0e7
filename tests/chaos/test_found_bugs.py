"""Replog bugs the chaos suite found, each reduced to a deterministic scenario on a local cluster and kept as a
regression test.

A leader fenced before it appended anything in its epoch kept that epoch's entry at its LEO; as a follower it
fetched with it as LastFetchedEpoch, was told it diverged at its LEO, truncated to its LEO (a no-op that left
the entry) and looped forever, never rejoining the ISR. Found by `replog chaos --duration 20 --seed 2`; fixed
in PartitionLog.truncate_to as Kafka's UnifiedLog.truncateTo does it.

A replica fetcher whose only partition was backing off could go to sleep until the next metadata change: its
fetch round saw the back-off, and by the time it computed how long to sleep the back-off had ended, so no
deadline was left and it waited for a change that never came; the follower stayed out of the ISR for good
(Kafka's AbstractFetcherThread always sleeps at most replica.fetch.backoff.ms). Found by `replog chaos
--nemesis partition --seed 3 --duration 60` (a follower cut from its leader, refused, retrying every 100 ms
on a loaded machine; the leader's ISR stayed short for 40 s); fixed in ReplicaFetcher._wait_for_work."""

import asyncio
import os
import signal

import pytest
from kio.schema.errors import ErrorCode

from replog.fetcher.replica_fetcher import ReplicaFetcher
from replog.harness.local_cluster import LocalCluster
from replog.harness.tcp_proxy import BLACKHOLE
from replog.protocol.apis import ApiKey
from replog.protocol.produce import (
    ProducePartitionData,
    ProduceRequestData,
    ProduceTopicData,
    encode_produce_request,
)
from tests.conditions import wait_until
from tests.integration.test_idempotence_and_offsets import idempotent_batch, init_producer_id
from tests.integration.test_replication import MIN_ISR_2, cluster, produce, values  # noqa: F401 (fixture)
from tests.raw_wire import RawConnection
from tests.unit.test_fetcher_replication import (
    CONFIG,
    TP,
    FakeLeader,
    append_as_leader,
    follow,
    in_sync,
    open_log,
)

pytest.importorskip("confluent_kafka")


async def test_a_leader_fenced_before_appending_in_its_epoch_rejoins_the_isr(cluster):
    topic = "unused-epoch"
    await cluster.controller.create_topic(topic, {0: [1, 2, 3]}, MIN_ISR_2)
    await asyncio.to_thread(produce, cluster.bootstrap, topic, values("epoch-0", 100))
    await cluster.kill(1)
    # Broker 2 leads epoch 1 from offset 100 and, with no producer left, never appends in it.
    await cluster.wait_for(lambda: cluster.controller.registration(topic, 0).leader == 2, 20.0, "leader 2")
    await cluster.restart(1)
    await cluster.wait_for_isr(topic, 0, {1, 2, 3})
    paused = cluster.brokers[2].proc.pid
    os.kill(paused, signal.SIGSTOP)
    try:
        await cluster.wait_for(lambda: cluster.controller.registration(topic, 0).leader in (1, 3), 20.0,
                               "the controller to fence the paused leader and elect another")
    finally:
        os.kill(paused, signal.SIGCONT)
    # A follower rejoins within seconds (replica.lag.time.max.ms is 2 s here); with the bug it never did.
    await cluster.wait_for_isr(topic, 0, {1, 2, 3}, timeout=10.0)


class ScriptedClock:
    """A millisecond clock that answers from a script, then stays at its last value."""

    def __init__(self, start_ms: int) -> None:
        self.now_ms = start_ms
        self.script: list[int] = []

    def __call__(self) -> int:
        if self.script:
            self.now_ms = self.script.pop(0)
        return self.now_ms


async def test_a_back_off_that_ends_between_the_fetch_round_and_the_wait_does_not_stall_the_fetcher(tmp_path):
    leader = FakeLeader(1)
    leader_log = open_log(tmp_path, "leader")
    append_as_leader(leader_log, 0, 4)
    leader.lead(TP, leader_log, 0)
    follower_log = open_log(tmp_path, "follower")
    leader.failing_requests = 1  # the first fetch fails: the partition backs off until start + backoff
    clock = ScriptedClock(1_000_000)
    fetcher = ReplicaFetcher(1, 0, leader.endpoint(CONFIG), CONFIG, clock)
    fetcher.add_partitions(follow(leader, follower_log, 0))
    fetcher.start()
    try:
        await wait_until(lambda: fetcher.fetch_state(TP).is_delayed(clock.now_ms), what="the back-off")
        # Woken early by an update (the same partition at the same epoch, as a metadata update re-adds it),
        # the truncate and fetch rounds still see the back-off; by the time the loop decides how long to
        # sleep, it has ended.
        clock.script = [clock.now_ms, clock.now_ms, clock.now_ms + CONFIG.backoff_ms]
        fetcher.add_partitions(follow(leader, follower_log, 0))
        await wait_until(lambda: in_sync(follower_log, leader_log), what="the follower to fetch again")
    finally:
        await fetcher.stop()


PRODUCE_TIMEOUT_MS = 1_000


def produce_once(conn: RawConnection, topic: str, batch: bytearray):
    """One acks=all Produce of one batch to partition 0; its partition response."""
    request = ProduceRequestData(None, -1, PRODUCE_TIMEOUT_MS, [ProduceTopicData(topic, [ProducePartitionData(
        0, memoryview(bytearray(batch)))])])
    body = b"".join(bytes(p) for p in encode_produce_request(9, request))
    return conn.call(ApiKey.PRODUCE, 9, body).responses[0].partition_responses[0]


async def test_a_retried_batch_is_acknowledged_only_once_it_is_committed(tmp_path):
    # The follower stays in the ISR for the whole test, but cannot fetch while its link to the leader is cut.
    cluster = LocalCluster(tmp_path, brokers=2, overrides={"replica.lag.time.max.ms": "120000"},
                           broker_proxies=True)
    try:
        await cluster.start()
        await cluster.controller.create_topic("retried", {0: [1, 2]}, MIN_ISR_2)
        await cluster.wait_for_isr("retried", 0, {1, 2})
        conn = RawConnection(cluster.brokers[1].port)
        producer_id, epoch = await asyncio.to_thread(init_producer_id, conn)
        batch = idempotent_batch(producer_id, epoch, 0)
        cluster.partition(2, [1], mode=BLACKHOLE)
        first = await asyncio.to_thread(produce_once, conn, "retried", batch)
        assert first.error_code == ErrorCode.request_timed_out  # appended, not replicated
        # The producer retries the same batch: the leader finds it a duplicate, which is no more committed
        # than the first time (the bug acknowledged it at once).
        retry = await asyncio.to_thread(produce_once, conn, "retried", batch)
        assert retry.error_code == ErrorCode.request_timed_out
        cluster.heal_partition(2, [1])
        # Once the follower has it, a retry is acknowledged, at the offset of the one append. Each attempt
        # waits up to PRODUCE_TIMEOUT_MS on the broker: a bounded poll.
        for _ in range(20):
            committed = await asyncio.to_thread(produce_once, conn, "retried", batch)
            if committed.error_code != ErrorCode.request_timed_out:
                break
        assert (committed.error_code, committed.base_offset) == (ErrorCode.none, 0)
        conn.close()
    finally:
        await cluster.stop()
