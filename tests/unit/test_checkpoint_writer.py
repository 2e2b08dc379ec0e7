"""CheckpointWriter: checkpoint files written off the event loop, per file latest-value-wins, never two writes
of one file at once, never an older value after a newer one."""

import asyncio
import errno
import shutil
import threading
from pathlib import Path

from replog.log import checkpoint_writer
from replog.log.checkpoint_writer import CheckpointWriter, write_if_directory_exists
from tests.conditions import wait_until


class GatedDisk:
    """A write function for the writer's thread that records each write and can hold them at a gate."""

    def __init__(self) -> None:
        self.written: list[tuple[Path, bytes]] = []
        self.open = threading.Event()
        self.open.set()
        self.started = threading.Event()
        self._lock = threading.Lock()
        self.in_flight: dict[Path, int] = {}
        self.most_in_flight = 0
        self.fail_with: OSError | None = None

    def write(self, path: Path, data: bytes) -> None:
        with self._lock:
            self.in_flight[path] = self.in_flight.get(path, 0) + 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight[path])
        self.started.set()
        self.open.wait(5)
        with self._lock:
            self.in_flight[path] -= 1
            if self.fail_with is not None:
                raise self.fail_with
            self.written.append((path, data))


async def wait_started(disk: GatedDisk) -> None:
    await asyncio.to_thread(disk.started.wait, 5)


async def test_the_latest_value_replaces_pending_ones_and_none_is_written_after_a_newer_one(tmp_path):
    disk = GatedDisk()
    disk.open.clear()
    writer = CheckpointWriter(lambda log_dir, error: None, write=disk.write)
    path = tmp_path / "hw"
    writer.submit(path, b"1", tmp_path)
    await wait_started(disk)  # "1" is in flight, held at the gate
    for value in (b"2", b"3", b"4"):
        writer.submit(path, value, tmp_path)
    disk.open.set()
    await writer.flush()
    assert disk.written == [(path, b"1"), (path, b"4")]
    assert disk.most_in_flight == 1
    assert writer.idle and writer.writes == 2
    await writer.close()


async def test_files_are_written_independently_and_flush_waits_for_all(tmp_path):
    disk = GatedDisk()
    writer = CheckpointWriter(lambda log_dir, error: None, write=disk.write)
    paths = [tmp_path / f"p{i}" for i in range(5)]
    for path in paths:
        writer.submit(path, path.name.encode(), tmp_path)
    await writer.flush()
    assert sorted(disk.written) == sorted((path, path.name.encode()) for path in paths)
    await writer.close()


async def test_the_event_loop_runs_while_a_write_waits_for_the_disk(tmp_path):
    disk = GatedDisk()
    disk.open.clear()
    writer = CheckpointWriter(lambda log_dir, error: None, write=disk.write)
    writer.submit(tmp_path / "slow", b"x", tmp_path)
    await wait_started(disk)
    ticks = 0
    for _ in range(10):  # the loop keeps turning while the disk holds the write
        await asyncio.sleep(0)
        ticks += 1
    assert ticks == 10 and disk.written == []
    disk.open.set()
    await writer.close()
    assert disk.written == [(tmp_path / "slow", b"x")]


async def test_write_now_waits_for_the_write_in_flight_and_supersedes_the_pending_one(tmp_path):
    disk = GatedDisk()
    disk.open.clear()
    writer = CheckpointWriter(lambda log_dir, error: None, write=disk.write)
    path = tmp_path / "leader-epoch-checkpoint"
    writer.submit(path, b"in flight", tmp_path)
    await wait_started(disk)
    writer.submit(path, b"pending", tmp_path)
    written_before_write_now_returned: list = []

    def clear_now() -> None:
        writer.write_now(path, b"cleared")
        written_before_write_now_returned.extend(disk.written)

    clearing = asyncio.create_task(asyncio.to_thread(clear_now))
    await wait_until(lambda: path not in writer._pending, "write_now to take the pending value", timeout_s=5)
    disk.open.set()
    await clearing
    await writer.flush()
    assert written_before_write_now_returned == [(path, b"in flight")]  # it waited for the older write
    assert disk.written == [(path, b"in flight")]  # and the pending one was dropped, not written after it
    assert path.read_bytes() == b"cleared"
    await writer.close()


async def test_a_failed_write_reports_its_log_dir(tmp_path):
    disk = GatedDisk()
    disk.fail_with = OSError(errno.EIO, "I/O error")
    failures: list[tuple[Path, OSError]] = []
    writer = CheckpointWriter(lambda log_dir, error: failures.append((log_dir, error)), write=disk.write)
    writer.submit(tmp_path / "d" / "t-0" / "leader-epoch-checkpoint", b"x", tmp_path / "d")
    await writer.flush()
    assert [(log_dir, error.errno) for log_dir, error in failures] == [(tmp_path / "d", errno.EIO)]
    assert writer.writes == 0
    await writer.close()


async def test_no_write_recreates_a_partition_directory_being_deleted(tmp_path):
    gate = threading.Event()
    started = threading.Event()

    def gated_write(path: Path, data: bytes) -> None:
        started.set()
        gate.wait(5)
        write_if_directory_exists(path, data)

    writer = CheckpointWriter(lambda log_dir, error: None, write=gated_write)
    busy, deleted = tmp_path / "t-0", tmp_path / "t-1"
    busy.mkdir()
    deleted.mkdir()
    writer.submit(busy / "leader-epoch-checkpoint", b"a", tmp_path)
    await asyncio.to_thread(started.wait, 5)  # the single worker is busy: t-1's write waits behind it
    writer.submit(deleted / "leader-epoch-checkpoint", b"b", tmp_path)
    gate.set()

    def delete() -> None:
        with writer.deleting(deleted):
            shutil.rmtree(deleted)

    await asyncio.to_thread(delete)
    await writer.close()
    assert (busy / "leader-epoch-checkpoint").read_bytes() == b"a"
    assert not deleted.exists()  # t-1's write was dropped, or ran after the deletion and found no directory


def test_a_write_into_a_directory_that_is_gone_is_skipped(tmp_path, monkeypatch):
    write_if_directory_exists(tmp_path / "gone" / "leader-epoch-checkpoint", b"x")
    assert not (tmp_path / "gone").exists()
    (tmp_path / "gone").mkdir()

    def deleted_meanwhile(path, data):
        path.parent.rmdir()
        raise FileNotFoundError(path)

    monkeypatch.setattr(checkpoint_writer, "write_atomically", deleted_meanwhile)
    write_if_directory_exists(tmp_path / "gone" / "leader-epoch-checkpoint", b"x")  # not a disk failure
    monkeypatch.undo()
    assert not (tmp_path / "gone").exists()
    write_if_directory_exists(tmp_path / "leader-epoch-checkpoint", b"x")
    assert (tmp_path / "leader-epoch-checkpoint").read_bytes() == b"x"
