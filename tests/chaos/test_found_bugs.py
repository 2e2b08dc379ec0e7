"""Replog bugs the chaos suite found, each reduced to a deterministic scenario on a local cluster and kept as a
regression test.

A leader fenced before it appended anything in its epoch kept that epoch's entry at its LEO; as a follower it
fetched with it as LastFetchedEpoch, was told it diverged at its LEO, truncated to its LEO (a no-op that left
the entry) and looped forever, never rejoining the ISR. Found by `replog chaos --duration 20 --seed 2`; fixed
in PartitionLog.truncate_to as Kafka's UnifiedLog.truncateTo does it."""

import asyncio
import os
import signal

import pytest

from tests.integration.test_replication import MIN_ISR_2, cluster, produce, values  # noqa: F401 (fixture)

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
