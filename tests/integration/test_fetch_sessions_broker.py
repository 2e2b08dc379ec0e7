"""Fetch sessions (KIP-227) on a real broker, over the raw wire: a full fetch opens a session, an incremental
one answers only partitions with news, a parked incremental fetch wakes on an append to a partition it did not
read, and the session errors and closing behave as in Kafka."""

import threading
import time

from kio.schema.errors import ErrorCode

from replog.protocol.apis import ApiKey
from replog.protocol.records import build_batch
from tests.integration.test_bad_input import create_topic, produce
from tests.raw_wire import RawConnection

TOPIC = "sessions"
PARTITIONS = 3


def fetch(conn: RawConnection, session_id: int, epoch: int, offsets: dict[int, int], *, forget=(),
          max_wait_ms: int = 0):
    return conn.call(ApiKey.FETCH, 12, {
        "replica_id": -1, "max_wait": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": session_id, "session_epoch": epoch,
        "topics": [{"topic": TOPIC, "partitions": [
            {"partition": p, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
             "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p, offset in offsets.items()]}]
        if offsets else [],
        "forgotten_topics_data": [{"topic": TOPIC, "partitions": list(forget)}] if forget else [],
        "rack_id": ""})


def answered(response) -> dict[int, tuple[int, bool]]:
    """{partition: (HW, whether it carries records)}."""
    return {int(p.partition_index): (int(p.high_watermark), bool(p.records))
            for t in response.responses for p in t.partitions}


def test_incremental_fetches_answer_news_only_and_wake_on_any_session_partition(broker):
    conn = RawConnection(broker.port)
    create_topic(conn, TOPIC, PARTITIONS)
    for p in range(PARTITIONS):
        assert produce(conn, TOPIC, p, build_batch([(None, b"v", [], 1)])).error_code == ErrorCode.none

    full = fetch(conn, 0, 0, dict.fromkeys(range(PARTITIONS), 0))
    assert full.error_code == ErrorCode.none and full.session_id != 0
    assert answered(full) == {p: (1, True) for p in range(PARTITIONS)}
    session_id = full.session_id

    # Caught up, nothing new: the fetch names the moved offsets and gets no partition back.
    caught_up = fetch(conn, session_id, 1, dict.fromkeys(range(PARTITIONS), 1))
    assert (caught_up.error_code, caught_up.session_id, answered(caught_up)) == (ErrorCode.none, session_id, {})

    # An empty incremental fetch parks; an append to any partition of the session answers it, with that one.
    producer = RawConnection(broker.port)
    append = threading.Timer(0.2, lambda: produce(producer, TOPIC, 2, build_batch([(None, b"w", [], 2)])))
    append.start()
    started = time.monotonic()
    woken = fetch(conn, session_id, 2, {}, max_wait_ms=20_000)
    assert time.monotonic() - started < 10, "the append did not wake the parked fetch"
    assert answered(woken) == {2: (2, True)}
    append.join()  # the fetch may be answered before the produce: its connection must stay open until then
    producer.close()

    assert fetch(conn, session_id, 9, {}).error_code == ErrorCode.invalid_fetch_session_epoch
    assert fetch(conn, session_id ^ 1, 3, {}).error_code == ErrorCode.fetch_session_id_not_found
    # The refused requests left the session as it was: epoch 3 is next. Forgetting every partition closes it.
    closed = fetch(conn, session_id, 3, {}, forget=range(PARTITIONS))
    assert (closed.error_code, closed.session_id) == (ErrorCode.none, 0)
    assert fetch(conn, session_id, 4, {}).error_code == ErrorCode.fetch_session_id_not_found
    conn.close()
