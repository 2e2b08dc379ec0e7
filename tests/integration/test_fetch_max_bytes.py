"""The broker's fetch.max.bytes (KIP-541) over the raw wire: a consumer's Fetch response carries no more
record bytes than the broker allows, whatever the request asks, but always its first batch whole (KIP-74)."""

import pytest
from kio.schema.errors import ErrorCode

from replog.harness.broker_process import BrokerProcess
from replog.protocol.apis import ApiKey
from replog.protocol.records import build_batch
from tests.integration.test_bad_input import create_topic, produce
from tests.raw_wire import RawConnection

TOPIC = "capped"
BROKER_LIMIT = 4096
VALUE = b"v" * 1500  # one record per batch: a batch of about 1.6 KB, so two fit under the limit, three do not


@pytest.fixture
def capped_broker(tmp_path):
    process = BrokerProcess(tmp_path / "logs", output=tmp_path / "broker.out",
                            overrides={"fetch.max.bytes": str(BROKER_LIMIT)})
    process.start()
    try:
        yield process
    finally:
        process.stop()


def fetch_records(conn: RawConnection, partitions: dict[int, int], max_bytes: int) -> dict[int, bytes]:
    response = conn.call(ApiKey.FETCH, 12, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": max_bytes, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": TOPIC, "partitions": [
            {"partition": p, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
             "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p, offset in partitions.items()]}]})
    assert response.error_code == ErrorCode.none
    results = {int(p.partition_index): p for t in response.responses for p in t.partitions}
    assert all(p.error_code == ErrorCode.none for p in results.values())
    return {index: bytes(p.records or b"") for index, p in results.items()}


def test_a_consumer_response_stops_at_the_brokers_fetch_max_bytes(capped_broker):
    conn = RawConnection(capped_broker.port)
    create_topic(conn, TOPIC, 2)
    batch_bytes = []
    for offset in range(3):
        batch = build_batch([(None, VALUE, [], offset)])
        batch_bytes.append(len(batch))
        for partition in (0, 1):
            assert produce(conn, TOPIC, partition, batch).error_code == ErrorCode.none

    # The request allows 1 MiB; the broker's 4 KiB lets two of partition 0's three batches through, and
    # nothing of partition 1 (its first batch would pass the limit, and only the response's first batch
    # goes out regardless).
    records = fetch_records(conn, {0: 0, 1: 0}, max_bytes=1 << 20)
    assert len(records[0]) == batch_bytes[0] + batch_bytes[1] <= BROKER_LIMIT
    assert records[1] == b""

    # A request asking for less than the broker's limit gets what it asked: one batch.
    assert len(fetch_records(conn, {0: 0}, max_bytes=batch_bytes[0])[0]) == batch_bytes[0]
    conn.close()


def test_the_first_batch_goes_out_whole_even_above_fetch_max_bytes(capped_broker):
    conn = RawConnection(capped_broker.port)
    create_topic(conn, TOPIC, 1)
    large = build_batch([(None, b"w" * (2 * BROKER_LIMIT), [], 0)])
    assert produce(conn, TOPIC, 0, large).error_code == ErrorCode.none
    assert len(fetch_records(conn, {0: 0}, max_bytes=1 << 20)[0]) == len(large)
    conn.close()
