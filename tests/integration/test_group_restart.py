"""A single broker restarted: it loads __consumer_offsets again before answering for its groups, so the
committed offsets survive (issue 15, item 2)."""

import time

import pytest

from replog.harness.broker_process import BrokerProcess
from tests.interop.test_consumer_groups import (
    committed_offsets,
    confluent_consume,
    create_topic_with_records,
    produce,
)


def test_committed_offsets_survive_a_broker_restart(tmp_path):
    pytest.importorskip("confluent_kafka")
    broker = BrokerProcess(tmp_path / "logs", output=tmp_path / "broker.out",
                           overrides={"group.initial.rebalance.delay.ms": "0"})
    broker.start()
    try:
        ends = create_topic_with_records(broker.bootstrap, "kept", count=200)
        values, _ = confluent_consume(broker.bootstrap, "kept", "kept-group", 200)
        assert len(values) == 200
        assert committed_offsets(broker.bootstrap, "kept-group", "kept") == ends
        broker.restart()
        deadline = time.monotonic() + 30
        while (after := committed_offsets(broker.bootstrap, "kept-group", "kept")) != ends:
            assert time.monotonic() < deadline, after
        produce(broker.bootstrap, "kept", 10, start=200)
        resumed, _ = confluent_consume(broker.bootstrap, "kept", "kept-group", 10)
        assert sorted(resumed) == sorted(f"v-{i}".encode() for i in range(200, 210))
    finally:
        broker.stop()
