"""Idempotent-producer sequence checks and ListOffsets on a live broker, with exact wire requests."""

from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey
from replog.protocol.records import build_batch
from tests.integration.test_bad_input import create_topic, produce
from tests.raw_wire import RawConnection


def idempotent_batch(producer_id: int, epoch: int, sequence: int, count: int = 2, ts: int = 1000) -> bytearray:
    records = [(None, f"s{sequence + i}".encode(), [], ts + i) for i in range(count)]
    return bytearray(build_batch(records, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence))


def init_producer_id(conn: RawConnection) -> tuple[int, int]:
    response = conn.call(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout": 60000,
                                                       "producer_id": -1, "producer_epoch": -1})
    assert response.error_code == ErrorCode.none
    return response.producer_id, response.producer_epoch


def test_duplicates_of_the_last_five_batches_are_answered_not_appended(broker):
    conn = RawConnection(broker.port)
    create_topic(conn, "idem")
    pid, epoch = init_producer_id(conn)
    batches = [idempotent_batch(pid, epoch, seq) for seq in range(0, 12, 2)]  # six batches of two
    offsets = [produce(conn, "idem", 0, bytearray(b)).base_offset for b in batches]
    assert offsets == [0, 2, 4, 6, 8, 10]
    for batch, offset in zip(batches[1:], offsets[1:], strict=True):  # the last five
        retry = produce(conn, "idem", 0, bytearray(batch))
        assert (retry.error_code, retry.base_offset) == (ErrorCode.none, offset)
    too_old = produce(conn, "idem", 0, bytearray(batches[0]))
    assert too_old.error_code == ErrorCode.out_of_order_sequence_number
    gap = produce(conn, "idem", 0, idempotent_batch(pid, epoch, 20))
    assert gap.error_code == ErrorCode.out_of_order_sequence_number
    after = produce(conn, "idem", 0, idempotent_batch(pid, epoch, 12))
    assert (after.error_code, after.base_offset) == (ErrorCode.none, 12)  # nothing was re-appended
    conn.close()


def test_producer_ids_are_unique_and_survive_a_restart(broker):
    conn = RawConnection(broker.port)
    first, _ = init_producer_id(conn)
    second, _ = init_producer_id(conn)
    conn.close()
    broker.restart()
    conn = RawConnection(broker.port)
    third, _ = init_producer_id(conn)
    conn.close()
    assert len({first, second, third}) == 3


def test_list_offsets_earliest_latest_by_timestamp_and_max_timestamp(broker):
    conn = RawConnection(broker.port)
    create_topic(conn, "times")
    produce(conn, "times", 0, bytearray(build_batch([(None, b"a", [], 1000), (None, b"b", [], 9000)])))
    produce(conn, "times", 0, bytearray(build_batch([(None, b"c", [], 5000)])))

    def list_offset(timestamp: int):
        response = conn.call(ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "times", "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                              "timestamp": timestamp}]}]})
        p = response.topics[0].partitions[0]
        assert p.error_code == ErrorCode.none
        return p.offset, p.timestamp

    assert list_offset(-2)[0] == 0
    assert list_offset(-1)[0] == 3
    assert list_offset(4000) == (1, 9000)
    assert list_offset(9001) == (-1, -1)
    assert list_offset(-3) == (1, 9000)
    conn.close()
