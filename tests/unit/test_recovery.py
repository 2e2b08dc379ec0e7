import random

from replog.log.config import LogConfig
from replog.log.partition_log import PartitionLog
from replog.protocol.records import build_batch, iter_batches

CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=100, segment_index_bytes=4096)


def _open(path, clean, recovery_point=0) -> PartitionLog:
    return PartitionLog.open(
        path / "t-0", CONFIG, clock_ms=lambda: 0, clean_shutdown=clean, recovery_point=recovery_point
    )


def _batch(i: int) -> memoryview:
    return memoryview(bytearray(build_batch([(None, b"value-%d" % i, [], 1000 + i)] * 2)))


def _filled(path, batches=30) -> PartitionLog:
    log = _open(path, clean=True)
    for i in range(batches):
        log.append_as_leader(_batch(i), leader_epoch=i // 10)
    return log


def _all_offsets(log):
    out = []
    for segment in log.segments:
        file_slice = segment.read(segment.base_offset, 1 << 20)
        out += [b.base_offset for b in iter_batches(file_slice.read_bytes())] if file_slice else []
    return out


def test_torn_tail_truncated(tmp_path):
    log = _filled(tmp_path)
    active = log.segments[-1]
    sizes = [b.size_in_bytes for b in iter_batches(active.read(active.base_offset, 1 << 20).read_bytes())]
    log.close()
    cut = random.Random(7).randint(1, sizes[-1] - 1)
    with open(active.log_path, "r+b") as f:
        f.truncate(active.log_path.stat().st_size - cut)
    recovered = _open(tmp_path, clean=False)
    assert recovered.log_end_offset == 58
    assert _all_offsets(recovered) == list(range(0, 58, 2))
    info = recovered.append_as_leader(_batch(99), leader_epoch=5)
    assert info.first_offset == 58


def test_flipped_byte_in_middle_truncates_and_drops_later_segments(tmp_path):
    log = _filled(tmp_path)
    middle = log.segments[len(log.segments) // 2]
    later = [s.log_path for s in log.segments if s.base_offset > middle.base_offset]
    log.close()
    data = bytearray(middle.log_path.read_bytes())
    second_batch = next(iter(iter_batches(data))).size_in_bytes
    data[second_batch + 70] ^= 0xFF  # inside the second batch's records
    middle.log_path.write_bytes(data)
    recovered = _open(tmp_path, clean=False)
    assert recovered.log_end_offset == middle.base_offset + 2
    assert [s.base_offset for s in recovered.segments][-1] == middle.base_offset
    assert not any(p.exists() for p in later)
    assert recovered.epoch_cache.latest_entry.start_offset < recovered.log_end_offset


def test_missing_and_garbage_indexes_rebuilt(tmp_path):
    log = _filled(tmp_path)
    first, second = log.segments[0], log.segments[1]
    expected = [first.offset_index.lookup(o) for o in range(first.base_offset, first.next_offset)]
    log.close()
    first.offset_index.path.unlink()
    second.offset_index.path.write_bytes(bytes.fromhex("00000009000001000000000100000200"))
    second.time_index.path.write_bytes(b"\x07" * 13)
    recovered = _open(tmp_path, clean=True, recovery_point=60)
    rebuilt = recovered.segments[0]
    assert [
        rebuilt.offset_index.lookup(o) for o in range(rebuilt.base_offset, rebuilt.next_offset)
    ] == expected
    assert recovered.segments[1].offset_index.entries > 0
    assert recovered.log_end_offset == 60
    assert _all_offsets(recovered) == list(range(0, 60, 2))


def test_clean_shutdown_skips_recovery(tmp_path):
    log = _filled(tmp_path)
    active = log.segments[-1]
    log.close()
    with open(active.log_path, "ab") as f:
        f.write(b"\0" * 5)  # a torn tail only recovery would notice
    with_garbage = active.log_path.stat().st_size
    clean = _open(tmp_path, clean=True, recovery_point=60)
    assert clean.segments[-1].size == with_garbage
    clean.close()
    unclean = _open(tmp_path, clean=False, recovery_point=60)
    assert unclean.segments[-1].size == with_garbage - 5
    assert active.log_path.stat().st_size == with_garbage - 5


def test_epoch_cache_rebuilt_from_batches(tmp_path):
    log = _filled(tmp_path)
    assert log.epoch_cache.entries() == ((0, 0), (1, 20), (2, 40))
    log.close()
    (tmp_path / "t-0" / "leader-epoch-checkpoint").unlink()
    recovered = _open(tmp_path, clean=False)
    assert recovered.epoch_cache.entries() == ((0, 0), (1, 20), (2, 40))
    recovered.close()
    recovered = _open(tmp_path, clean=True)
    recovered.truncate_to(30)
    recovered.close()
    assert _open(tmp_path, clean=True).epoch_cache.entries() == ((0, 0), (1, 20))


def test_recovery_from_recovery_point_only(tmp_path):
    log = _filled(tmp_path)
    first = log.segments[0]
    log.close()
    data = bytearray(first.log_path.read_bytes())
    data[-3] ^= 0xFF  # corrupt, but below the recovery point: trusted as flushed
    first.log_path.write_bytes(data)
    recovered = _open(tmp_path, clean=False, recovery_point=40)
    assert recovered.log_end_offset == 60
