"""Creating the logs of a LeaderAndIsr (broker/log_creation.py): every new log is created and adopted, and the
event loop gets turns while thousands are adopted, so the broker's heartbeats keep going."""

import asyncio
import uuid

from replog.broker import log_creation
from replog.broker.log_creation import create_missing_logs
from replog.log.config import LogConfig
from replog.log.log_manager import LogManager
from replog.log.partition_log import TopicPartition
from replog.protocol.control import LeaderAndIsrPartitionState, LeaderAndIsrRequest, LeaderAndIsrTopicState

NODE_ID = 1


def request_for(partitions: int) -> LeaderAndIsrRequest:
    states = [LeaderAndIsrPartitionState("t", i, 1, 1 + i % 3, 0, [1, 2, 3], 0, [1, 2, 3])
              for i in range(partitions)]
    return LeaderAndIsrRequest(3000, 1, 10, [LeaderAndIsrTopicState("t", uuid.uuid4(), states, {})], [])


async def test_new_logs_are_created_and_adopted_with_turns_for_other_work_between(tmp_path, monkeypatch):
    monkeypatch.setattr(log_creation, "ADOPTION_SLICE_S", 0.0)  # a turn after every log
    manager = LogManager([tmp_path], LogConfig(), clock_ms=lambda: 0)
    adopted_at_each_turn = []
    done = False

    async def other_work():  # heartbeats, say
        while not done:
            adopted_at_each_turn.append(len(manager.all_logs()))
            await asyncio.sleep(0)

    ticker = asyncio.create_task(other_work())
    errors = await create_missing_logs(manager, LogConfig(), NODE_ID, set(), request_for(50))
    done = True
    await ticker
    assert errors == {}
    assert {log.topic_partition for log in manager.all_logs()} == {TopicPartition("t", i) for i in range(50)}
    # Turns came while the logs were being adopted, not only before and after.
    assert any(0 < adopted < 50 for adopted in adopted_at_each_turn)
    for log in manager.all_logs():
        log.close()
