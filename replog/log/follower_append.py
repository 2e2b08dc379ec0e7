"""A follower's append with its write in another thread (PartitionLog.begin_follower_append).

A follower's fetcher receives on the event loop and would write 1 MB per answer there too; with the write in
the fetcher's own thread (os.write releases the GIL), the loop goes on receiving the other leaders' answers
meanwhile. The append keeps its meaning: validated and placed on the loop, written in the thread, published on
the loop (LEO, epoch cache, producer state). Until it is published its bytes lie past every end a reader of
the log uses, and every other change of the log first settles it (waits for the write, then publishes it or,
if the write failed, leaves the log as it was), as Kafka's removePartitions and truncation wait for the
fetcher thread's append under partitionMapLock.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future

from replog.log.append_info import AppendInfo
from replog.log.append_validation import check_follower_offsets, validate_batches
from replog.log.config import LogConfig
from replog.log.dir_failure import disk_io
from replog.log.segment import LogSegment, PreparedAppend
from replog.protocol.records import RecordBatch


class FollowerAppend:
    """One follower append whose write runs in a writer thread; its log settles it (see module doc)."""

    def __init__(
        self, segment: LogSegment, prepared: PreparedAppend, batches: list[RecordBatch], writer: Executor
    ) -> None:
        self.segment = segment
        self.prepared = prepared
        self.batches = batches
        self.info: AppendInfo | None = None  # set when published
        self.error: BaseException | None = None  # set when the write failed; nothing was published
        # Submitted here, so that an append that exists is always being written: settling never waits for a
        # write nobody will do.
        self.written: Future[None] = writer.submit(self._write)

    def _write(self) -> None:
        # In the writer thread: only the prepared file is touched (LogSegment.write_prepared).
        self.segment.write_prepared(self.prepared)

    def wait_for_write(self) -> BaseException | None:
        """Block until the write is done (one write of at most a fetch's bytes); its error, if any."""
        try:
            self.written.result()
        except BaseException as exc:  # noqa: BLE001 - handed to whoever finishes the append
            return exc
        return None


class FollowerAppends:
    """Mixed into PartitionLog, which provides the offsets, _prepare_append and _publish_append (the two
    halves of its own append around the write) and sets _follower_append to None."""

    _config: LogConfig
    _follower_append: FollowerAppend | None
    topic_partition: tuple[str, int]
    log_end_offset: int
    _prepare_append: Callable[[memoryview, list[RecordBatch]], tuple[LogSegment, PreparedAppend]]
    _publish_append: Callable[[LogSegment, PreparedAppend, list[RecordBatch]], AppendInfo]
    report_disk_failure: Callable[[OSError], None]

    @disk_io
    def begin_follower_append(self, records: memoryview, writer: Executor) -> FollowerAppend:
        """append_as_follower with its write handed to `writer` (a follower's fetcher thread): validated,
        checked and placed here, on the loop; finish_follower_append publishes it once written. Until then
        every other change of this log settles it first (follower_append.py)."""
        self.settle_follower_append()
        view, batches = validate_batches(records, leader=False, max_message_bytes=self._config.max_message_bytes)
        check_follower_offsets(batches, self.log_end_offset, str(self.topic_partition))
        segment, prepared = self._prepare_append(view, batches)
        self._follower_append = FollowerAppend(segment, prepared, batches, writer)
        return self._follower_append

    @disk_io
    def finish_follower_append(self, pending: FollowerAppend) -> AppendInfo:
        """Publish a follower append once its write is done (waiting for it if need be); raises the write's
        error, with nothing published, if it failed."""
        if self._follower_append is pending:
            self.settle_follower_append()
        if pending.error is not None:
            raise pending.error
        assert pending.info is not None
        return pending.info

    def settle_follower_append(self) -> None:
        """Wait for the follower append in flight, if any, and publish it (or drop it if its write failed):
        called before every other change of the log and before the fetchers read its end."""
        pending = self._follower_append
        if pending is None:
            return
        self._follower_append = None
        pending.error = pending.wait_for_write()
        if pending.error is None:
            pending.info = self._publish_append(pending.segment, pending.prepared, pending.batches)
        elif isinstance(pending.error, OSError):
            # The dir goes offline now, as after a failed write on the loop, even if no one finishes the
            # append (its fetcher was stopped meanwhile).
            self.report_disk_failure(pending.error)
