"""A leader-epoch checkpoint written in the background can be stale after a crash (epoch_cache.py): missing
the newest epochs, or still holding epochs a truncation removed. Loading the log repairs both, and the one
change loading could not repair (clear) is written before it returns."""

from pathlib import Path

from replog.log.config import LogConfig
from replog.log.epoch_cache import LEADER_EPOCH_CHECKPOINT
from replog.log.partition_log import PartitionLog
from replog.protocol.records import build_batch

CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=100, segment_index_bytes=4096)


class WritesLostInACrash:
    """A background writer whose worker never ran before the process died: the changes stay in memory."""

    def __init__(self) -> None:
        self.submitted: list[bytes] = []

    def submit(self, path: Path, data: bytes) -> None:
        self.submitted.append(data)

    def write_now(self, path: Path, data: bytes) -> None:
        path.write_bytes(data)


def open_log(root: Path, *, clean: bool, recovery_point: int = 0) -> PartitionLog:
    return PartitionLog.open(root / "t-0", CONFIG, clock_ms=lambda: 0, clean_shutdown=clean,
                             recovery_point=recovery_point)


def append(log: PartitionLog, count: int, epoch: int) -> None:
    for i in range(count):
        log.append_as_leader(memoryview(bytearray(build_batch([(None, b"value-%d" % i, [], 1000 + i)] * 2))),
                             leader_epoch=epoch)


def on_disk(root: Path) -> str:
    return (root / "t-0" / LEADER_EPOCH_CHECKPOINT).read_text()


def test_epochs_missing_from_the_checkpoint_are_rebuilt_from_the_batches_past_the_recovery_point(tmp_path):
    log = open_log(tmp_path, clean=True)
    append(log, 10, epoch=0)  # offsets 0-19, written inline: on disk
    flushed = log.log_end_offset
    lost = WritesLostInACrash()
    log.epoch_cache.write_in_background(lost)
    append(log, 5, epoch=3)
    append(log, 5, epoch=4)
    assert log.epoch_cache.entries() == ((0, 0), (3, 20), (4, 30))
    assert len(lost.submitted) == 2 and on_disk(tmp_path) == "0\n1\n0 0\n"  # crash: the file is stale
    # The broker flushes the writer before checkpointing a recovery point, so the lost changes are past it.
    recovered = open_log(tmp_path, clean=False, recovery_point=flushed)
    assert recovered.epoch_cache.entries() == ((0, 0), (3, 20), (4, 30))
    recovered.close()


def test_epochs_a_truncation_removed_but_the_checkpoint_kept_are_dropped_at_load(tmp_path):
    log = open_log(tmp_path, clean=True)
    append(log, 10, epoch=0)
    append(log, 10, epoch=1)
    append(log, 10, epoch=2)
    assert log.epoch_cache.entries() == ((0, 0), (1, 20), (2, 40))
    log.epoch_cache.write_in_background(WritesLostInACrash())
    log.truncate_to(30)  # a follower truncating to its new leader's log
    assert log.epoch_cache.entries() == ((0, 0), (1, 20))
    assert on_disk(tmp_path).endswith("2 40\n")  # crash: the file still has epoch 2
    recovered = open_log(tmp_path, clean=False, recovery_point=30)
    assert recovered.log_end_offset == 30
    assert recovered.epoch_cache.entries() == ((0, 0), (1, 20))
    recovered.close()


def test_clearing_the_cache_is_on_disk_before_it_returns_even_with_a_background_writer(tmp_path):
    log = open_log(tmp_path, clean=True)
    append(log, 10, epoch=5)
    lost = WritesLostInACrash()
    log.epoch_cache.write_in_background(lost)
    log.truncate_fully_and_start_at(500)
    # A stale (5, 0) would become (5, 500) at load, claiming the empty log's first offsets for epoch 5.
    assert on_disk(tmp_path) == "0\n0\n" and lost.submitted == []
    recovered = open_log(tmp_path, clean=False, recovery_point=500)
    assert recovered.epoch_cache.entries() == ()
    recovered.close()
