"""RecordAccumulator: batching by size and linger, draining, expiry and memory accounting."""

import asyncio

from replog.client.accumulator import RecordAccumulator, record_size
from replog.protocol.records import RECORD_BATCH_OVERHEAD, build_batch, decode_records, iter_batches

TP = ("t", 0)


def record(i: int, size: int = 100):
    return (None, bytes([i % 256]) * size, (), 1_000 + i)


def future() -> asyncio.Future:
    return asyncio.get_running_loop().create_future()


def fill(acc: RecordAccumulator, n: int, now: float = 0.0, tp=TP, size: int = 100):
    return [acc.append(tp, record(i, size), future(), now) for i in range(n)]


async def test_batches_close_by_size():
    per_record = record_size(record(0))
    acc = RecordAccumulator(
        batch_size=RECORD_BATCH_OVERHEAD + 10 * per_record, linger_ms=1000, delivery_timeout_ms=5000
    )
    batches = fill(acc, 25)
    assert len(acc) == 3
    assert [len(b.records) for b in dict.fromkeys(batches)] == [10, 10, 5]
    ready, _ = acc.ready(now=0.0, flush=False)
    assert ready == [TP]  # the head batch is full although linger has not passed
    assert len(acc.drain(TP).records) == 10


async def test_single_batch_waits_for_linger():
    acc = RecordAccumulator(batch_size=16384, linger_ms=5, delivery_timeout_ms=5000)
    fill(acc, 3, now=10.0)
    assert acc.ready(now=10.004, flush=False) == ([], 10.005)
    assert acc.ready(now=10.005, flush=False)[0] == [TP]
    assert acc.ready(now=10.0, flush=True)[0] == [TP]


async def test_oversized_record_gets_its_own_batch():
    acc = RecordAccumulator(batch_size=200, linger_ms=0, delivery_timeout_ms=5000)
    big = fill(acc, 2, size=1000)
    assert big[0] is not big[1]
    assert all(len(b.records) == 1 for b in big)


async def test_partitions_batch_independently_and_drain_empties_queue():
    acc = RecordAccumulator(batch_size=16384, linger_ms=0, delivery_timeout_ms=5000)
    fill(acc, 3, tp=("t", 0))
    fill(acc, 2, tp=("t", 1))
    ready, next_time = acc.ready(now=0.0, flush=False)
    assert sorted(ready) == [("t", 0), ("t", 1)]
    assert next_time is None
    assert len(acc.drain(("t", 1)).records) == 2
    assert acc.ready(now=0.0, flush=False)[0] == [("t", 0)]


async def test_buffered_bytes_released_on_completion():
    acc = RecordAccumulator(batch_size=16384, linger_ms=0, delivery_timeout_ms=5000)
    fill(acc, 4)
    assert acc.buffered_bytes == 4 * record_size(record(0))
    batch = acc.drain(TP)
    assert acc.buffered_bytes > 0  # still owed until acknowledged
    acc.release(batch)
    assert acc.buffered_bytes == 0


async def test_expired_batches_are_removed():
    acc = RecordAccumulator(batch_size=16384, linger_ms=10_000, delivery_timeout_ms=100)
    fill(acc, 2, now=0.0)
    assert acc.expired(now=0.05) == []
    expired = acc.expired(now=0.1)
    assert len(expired) == 1
    assert len(acc) == 0


async def test_drained_batch_encodes_once_to_what_was_appended():
    acc = RecordAccumulator(batch_size=16384, linger_ms=0, delivery_timeout_ms=5000)
    fill(acc, 5)
    batch = acc.drain(TP)
    encoded = build_batch(batch.records, base_sequence=0, producer_id=7, producer_epoch=0)
    (view,) = iter_batches(encoded)
    assert view.records_count == 5
    assert [r.value for r in decode_records(view)] == [rec[1] for rec in batch.records]
