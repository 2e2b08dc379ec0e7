from replog.log.epoch_cache import LeaderEpochCache


def _cache(tmp_path, *entries):
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


def test_assign_monotonic_and_persisted(tmp_path):
    cache = _cache(tmp_path, (1, 0), (1, 5), (0, 9), (3, 10), (5, 20))
    assert cache.entries() == ((1, 0), (3, 10), (5, 20))
    assert cache.latest_epoch == 5
    assert cache.earliest_entry == (1, 0)
    assert LeaderEpochCache(tmp_path / "leader-epoch-checkpoint").entries() == cache.entries()


def test_assign_newer_epoch_at_lower_offset_drops_conflicts(tmp_path):
    cache = _cache(tmp_path, (1, 0), (3, 10), (5, 20))
    assert cache.assign(6, 15)
    assert cache.entries() == ((1, 0), (3, 10), (6, 15))
    assert cache.assign(6, 12)  # same epoch, earlier start: replaces
    assert cache.entries() == ((1, 0), (3, 10), (6, 12))


def test_end_offset_for_table(tmp_path):
    cache = _cache(tmp_path, (2, 5), (4, 10), (7, 30))
    leo = 42
    assert cache.end_offset_for(-1, leo) == (-1, -1)
    assert cache.end_offset_for(7, leo) == (7, leo)
    assert cache.end_offset_for(1, leo) == (1, 5)  # below the earliest epoch
    assert cache.end_offset_for(2, leo) == (2, 10)
    assert cache.end_offset_for(3, leo) == (2, 10)  # floor epoch, next start
    assert cache.end_offset_for(5, leo) == (4, 30)
    assert cache.end_offset_for(8, leo) == (-1, -1)


def test_end_offset_for_empty(tmp_path):
    cache = LeaderEpochCache(tmp_path / "empty")
    assert cache.end_offset_for(0, 10) == (-1, -1)


def test_epoch_for_offset(tmp_path):
    cache = _cache(tmp_path, (2, 5), (4, 10))
    assert cache.epoch_for_offset(4) is None
    assert cache.epoch_for_offset(5) == 2
    assert cache.epoch_for_offset(9) == 2
    assert cache.epoch_for_offset(10) == 4
    assert cache.epoch_for_offset(1000) == 4


def test_truncate_from_end(tmp_path):
    cache = _cache(tmp_path, (2, 5), (4, 10), (7, 30))
    cache.truncate_from_end(31)
    assert cache.entries() == ((2, 5), (4, 10), (7, 30))
    cache.truncate_from_end(30)
    assert cache.entries() == ((2, 5), (4, 10))
    cache.truncate_from_end(6)
    assert cache.entries() == ((2, 5),)
    assert LeaderEpochCache(tmp_path / "leader-epoch-checkpoint").entries() == ((2, 5),)


def test_truncate_from_start(tmp_path):
    cache = _cache(tmp_path, (2, 5), (4, 10), (7, 30))
    cache.truncate_from_start(3)
    assert cache.entries() == ((2, 5), (4, 10), (7, 30))
    cache.truncate_from_start(12)
    assert cache.entries() == ((4, 12), (7, 30))
    cache.truncate_from_start(30)
    assert cache.entries() == ((7, 30),)
    cache.clear()
    assert cache.entries() == ()
    assert LeaderEpochCache(tmp_path / "leader-epoch-checkpoint").entries() == ()
