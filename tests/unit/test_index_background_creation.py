"""A new segment's index files are created in a worker thread (index_file.py): all or nothing, adopted by the
first use that needs them, cancelled or waited for by release, close and delete, charged to the file
budget from the start."""

import errno
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from replog.log.config import LogConfig
from replog.log.file_budget import MIN_OPEN_FILES, FileBudget
from replog.log.index import OffsetIndex
from replog.log.index_file import ALLOCATION_CHUNK, IndexFileOps, create_index_file, creating_path
from replog.log.partition_log import PartitionLog
from replog.log.segment import LogSegment
from replog.protocol.records import build_batch, iter_batches
from tests.unit.deferred_executor import DeferredExecutor

INTERVAL = 4096
CREATION_STEPS = ("create", "set_size", "map", "publish")


class CountingIndexFileOps(IndexFileOps):
    """Counts every call by name; `fail_at` fails that step with ENOSPC (every time)."""

    def __init__(self, fail_at: str | None = None) -> None:
        self.calls: dict[str, int] = {}
        self.fail_at = fail_at

    def _step(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1
        if name == self.fail_at:
            raise OSError(errno.ENOSPC, "No space left on device")

    def create(self, path):
        self._step("create")
        return super().create(path)

    def set_size(self, fd, size):
        self._step("set_size")
        super().set_size(fd, size)

    def map(self, fd, size):
        self._step("map")
        return super().map(fd, size)

    def allocate(self, fd, offset, length):
        self._step("allocate")
        super().allocate(fd, offset, length)

    def populate(self, fd, offset, length):
        self._step("populate")
        super().populate(fd, offset, length)

    def publish(self, staging, path):
        self._step("publish")
        super().publish(staging, path)


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _index_files(directory) -> list[str]:
    return sorted(path.name for path in directory.iterdir() if path.suffix != ".log")


def _segment(tmp_path, creator, ops=None) -> LogSegment:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=INTERVAL, max_index_bytes=4096, created_ms=0,
                         index_creator=creator)  # fmt: skip
    if ops is not None:
        segment.offset_index._ops = segment.time_index._ops = ops
    return segment


def _append(segment, value_bytes=100) -> None:
    offset = segment.next_offset
    data = bytearray(build_batch([(None, b"v" * value_bytes, [], 1000 + offset)], base_offset=offset))
    [batch] = iter_batches(data)
    segment.append(batch.last_offset, memoryview(data), batch.max_timestamp, batch.last_offset)


@pytest.mark.parametrize("failing_step", CREATION_STEPS)
def test_a_failed_creation_leaves_no_file_and_no_descriptor(tmp_path, failing_step):
    path = tmp_path / "0.index"
    before = _open_fds()
    with pytest.raises(OSError):
        create_index_file(path, 10 * ALLOCATION_CHUNK, CountingIndexFileOps(fail_at=failing_step))
    assert list(tmp_path.iterdir()) == []
    assert _open_fds() == before


def test_a_creation_sizes_and_maps_the_file_and_leaves_its_pages_to_the_first_entry(tmp_path):
    ops = CountingIndexFileOps()
    created = create_index_file(tmp_path / "0.index", 10 * ALLOCATION_CHUNK, ops)
    assert ops.calls == {step: 1 for step in CREATION_STEPS}  # no allocate, no populate: no dirty page
    assert list(tmp_path.iterdir()) == [tmp_path / "0.index"]
    assert (tmp_path / "0.index").stat().st_size == 10 * ALLOCATION_CHUNK
    assert len(created.mapping) == 10 * ALLOCATION_CHUNK
    created.mapping.close()
    created.file.close()


def test_a_creation_never_takes_over_an_existing_file(tmp_path):
    # Another index opened under the name meanwhile (a log reopened in this process) keeps its file as it is.
    path = tmp_path / "0.index"
    path.write_bytes(b"\1" * 8)
    with pytest.raises(FileExistsError):
        create_index_file(path, 800)
    assert path.read_bytes() == b"\1" * 8
    assert list(tmp_path.iterdir()) == [path]


def test_the_loader_deletes_an_index_file_a_crash_left_half_made(tmp_path):
    directory = tmp_path / "topic-0"
    log = PartitionLog.open(directory, LogConfig(), clock_ms=lambda: 0, clean_shutdown=True)
    log.append_as_leader(memoryview(bytearray(build_batch([(None, b"v", [], 1000)]))), leader_epoch=0)
    log.close()
    half_made = creating_path(directory / "00000000000000000000.index")
    half_made.write_bytes(b"")
    reopened = PartitionLog.open(directory, LogConfig(), clock_ms=lambda: 0, clean_shutdown=False)
    assert not half_made.exists()
    assert reopened.log_end_offset == 1


def test_the_first_append_starts_the_creation_and_the_first_entry_adopts_it(tmp_path):
    creator = DeferredExecutor()
    ops = CountingIndexFileOps()
    segment = _segment(tmp_path, creator, ops)
    _append(segment)
    assert len(creator.submitted) == 2  # offset and time index, nothing created on the appending thread
    assert ops.calls == {}
    assert _index_files(tmp_path) == []
    creator.run_all()
    assert _index_files(tmp_path) == ["00000000000000000000.index", "00000000000000000000.timeindex"]
    _append(segment, INTERVAL)  # crosses the index interval: no entry yet (the bytes before it are counted)
    _append(segment)  # the first entries
    assert segment.offset_index.entries == segment.time_index.entries == 1
    assert len(creator.submitted) == 2
    # Each index: created once; its first page allocated and populated once, by the entry.
    assert ops.calls == {**{step: 2 for step in CREATION_STEPS}, "allocate": 2, "populate": 2}
    assert segment.translate_offset(2).position > 0


def test_an_entry_before_the_creation_finished_waits_for_it_and_creates_nothing_itself(tmp_path):
    creator = DeferredExecutor()
    ops = CountingIndexFileOps()
    segment = _segment(tmp_path, creator, ops)
    _append(segment, INTERVAL + 100)
    _append(segment)  # the first entries, while both creations are still queued
    assert all(future.done() for future in creator.submitted)
    assert ops.calls["create"] == 2
    assert segment.offset_index.lookup(1) == (1, segment.translate_offset(1).position)
    segment.flush()
    segment.close()
    reopened = LogSegment(tmp_path, 0, index_interval_bytes=INTERVAL, max_index_bytes=4096, created_ms=0)
    assert reopened.offset_index.entries == 1
    assert not reopened.needs_recovery


def test_deleted_before_the_creation_started_it_is_cancelled(tmp_path):
    creator = DeferredExecutor()
    ops = CountingIndexFileOps()
    segment = _segment(tmp_path, creator, ops)
    _append(segment)
    segment.delete()
    creator.run_all()
    assert all(future.cancelled() for future in creator.submitted)
    assert ops.calls == {}
    assert list(tmp_path.iterdir()) == []


def test_deleted_while_the_creation_runs_it_waits_and_removes_the_file(tmp_path):
    creator = DeferredExecutor(started=True)  # picked up by the worker: too late to cancel
    segment = _segment(tmp_path, creator)
    _append(segment)
    mappings_before = segment.offset_index.open_files
    segment.delete()
    assert mappings_before == 2
    assert all(future.done() and not future.cancelled() for future in creator.submitted)
    assert list(tmp_path.iterdir()) == []  # no index file appears after delete() returned
    assert segment.offset_index.open_files <= 1  # unmapped; the file object closes when dropped


def test_closed_before_the_first_entry_its_index_files_are_complete(tmp_path):
    creator = DeferredExecutor()
    segment = _segment(tmp_path, creator)
    _append(segment)
    segment.close()  # seals: the time index's final entry waits for its creation, the offset index's trim too
    assert _index_files(tmp_path) == ["00000000000000000000.index", "00000000000000000000.timeindex"]
    reopened = LogSegment(tmp_path, 0, index_interval_bytes=INTERVAL, max_index_bytes=4096, created_ms=0)
    assert not reopened.needs_recovery
    assert (reopened.offset_index.entries, reopened.time_index.entries) == (0, 1)
    assert reopened.next_offset == 1


def test_an_index_closed_before_its_creation_started_cancels_it(tmp_path):
    creator = DeferredExecutor()
    index = OffsetIndex(tmp_path / "0.index", 0, 800, create_lazily=True)
    index.create_in_background(creator)
    index.close()
    creator.run_all()
    assert creator.submitted[0].cancelled()
    assert list(tmp_path.iterdir()) == []


def test_truncated_while_the_creation_is_queued_then_appended_again(tmp_path):
    creator = DeferredExecutor()
    ops = CountingIndexFileOps()
    segment = _segment(tmp_path, creator, ops)
    _append(segment, INTERVAL + 100)
    assert segment.truncate_to(0) > 0  # the follower's truncation to the leader's log: nothing left
    assert not any(future.done() for future in creator.submitted)  # a truncation needs no index file
    _append(segment, INTERVAL + 100)
    _append(segment)
    assert (segment.offset_index.entries, segment.next_offset) == (1, 2)
    assert len(creator.submitted) == 2 and ops.calls["create"] == 2
    assert segment.offset_index.lookup(1) == (1, segment.translate_offset(1).position)


def test_the_budget_counts_the_descriptors_from_the_start_of_the_creation(tmp_path):
    budget = FileBudget(MIN_OPEN_FILES)
    creator = DeferredExecutor()
    segment = _segment(tmp_path, creator)
    segment.attach_file_budget(budget)
    assert budget.open_files == 1  # the log file
    _append(segment)
    assert budget.open_files == 5  # and two mapped index files, being created
    creator.run_all()
    _append(segment, INTERVAL)
    _append(segment)
    assert budget.open_files == segment.open_files == 5


def test_released_before_the_creation_started_the_next_entry_creates_the_files(tmp_path):
    budget = FileBudget(MIN_OPEN_FILES)
    creator = DeferredExecutor()
    ops = CountingIndexFileOps()
    segment = _segment(tmp_path, creator, ops)
    segment.attach_file_budget(budget)
    _append(segment, INTERVAL + 100)
    segment.release_file_handles()  # evicted by the budget
    assert all(future.cancelled() for future in creator.submitted)
    assert budget.open_files == 0 and segment.open_files == 0
    _append(segment)
    assert ops.calls["create"] == 2
    assert budget.open_files == segment.open_files == 5


def test_a_failed_creation_is_uncharged_and_its_error_met_by_the_entry(tmp_path):
    budget = FileBudget(MIN_OPEN_FILES)
    creator = DeferredExecutor()
    ops = CountingIndexFileOps(fail_at="create")  # a full disk
    segment = _segment(tmp_path, creator, ops)
    segment.attach_file_budget(budget)
    _append(segment, INTERVAL + 100)
    creator.run_all()
    assert _index_files(tmp_path) == []
    size = segment.size
    with pytest.raises(OSError) as raised:
        _append(segment)
    assert raised.value.errno == errno.ENOSPC
    assert segment.size == size  # nothing written
    # The offset index's failed creation is uncharged; the time index's is until its next use adopts it.
    assert budget.open_files == segment.open_files == 3
    assert _index_files(tmp_path) == []


def test_an_index_created_in_the_background_answers_as_one_created_in_place(tmp_path):
    creator = DeferredExecutor()
    background = OffsetIndex(tmp_path / "a.index", 0, 800, create_lazily=True)
    in_place = OffsetIndex(tmp_path / "b.index", 0, 800, create_lazily=True)
    background.create_in_background(creator)
    creator.run_all()
    for index in (background, in_place):
        for i in range(1, 6):
            index.append(i, i * 100)
        index.close()
    assert (tmp_path / "a.index").read_bytes() == (tmp_path / "b.index").read_bytes()


def test_with_a_real_worker_thread_deleted_segments_leave_no_files_and_the_rest_index_correctly(tmp_path):
    # The orderings above with a real worker: every creation queued behind a held task when half the
    # segments are deleted, then the first entries of the others racing the worker.
    worker_held = threading.Event()
    with ThreadPoolExecutor(max_workers=1) as creator:
        creator.submit(worker_held.wait, 60)
        segments = []
        for number in range(40):
            directory = tmp_path / str(number)
            directory.mkdir()
            segment = _segment(directory, creator)
            _append(segment, INTERVAL + 100)
            segments.append(segment)
        for segment in segments[1::2]:
            segment.delete()
        worker_held.set()
        for segment in segments[0::2]:
            _append(segment)
    for number, segment in enumerate(segments):
        directory = tmp_path / str(number)
        if number % 2:
            assert list(directory.iterdir()) == []
        else:
            assert _index_files(directory) == ["00000000000000000000.index", "00000000000000000000.timeindex"]
            assert segment.offset_index.lookup(1) == (1, segment.translate_offset(1).position)
            assert segment.open_files == 5
            segment.close()


def test_no_creation_ahead_of_need_when_the_budget_has_no_room_for_it(tmp_path):
    # At 10,000 partitions, files made ahead of their first entry would evict other segments' files.
    budget = FileBudget(MIN_OPEN_FILES)
    creator = DeferredExecutor()
    ops = CountingIndexFileOps()
    crowded = []
    for number in range(MIN_OPEN_FILES - 3):  # a log file each; with this one's, 2 left, short of the 4 needed
        directory = tmp_path / str(number)
        directory.mkdir()
        crowded.append(_segment(directory, creator))
        crowded[-1].attach_file_budget(budget)
    segment = _segment(tmp_path, creator, ops)
    segment.attach_file_budget(budget)
    _append(segment, INTERVAL + 100)
    assert creator.submitted == []
    assert budget.evictions == 0
    _append(segment)  # the first entry creates the files in place
    assert ops.calls["create"] == 2
    assert segment.offset_index.entries == 1
