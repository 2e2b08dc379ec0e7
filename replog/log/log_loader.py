"""Opening a partition log's segments from its directory (Kafka's LogLoader).

A cleaner's swap that a crash interrupted is first completed or undone (segment_swap.py). Orphaned indexes of deleted segments go; every segment opens; segments that a crash may have left torn
(from the recovery point on, after an unclean shutdown) or whose index is missing or corrupt are recovered,
and the first one cut short ends the log: every later segment is deleted. Producer state is rebuilt from
the batch headers of the last segments.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from replog.log.log_segments import LogSegments
from replog.log.producer_state import ProducerStateManager
from replog.log.segment import LogSegment
from replog.log.segment_files import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, SegmentFileOps
from replog.log.segment_swap import SWAP_SUFFIX, recover_interrupted_swaps
from replog.protocol.records import BatchHeader

# Without producer snapshots, producer state is rebuilt from the batch headers
# of this many trailing segments; producers idle for longer are forgotten.
PRODUCER_STATE_SCAN_SEGMENTS = 2


def load_segments(
    directory: Path, open_segment: Callable[[int, str], LogSegment], *, max_message_bytes: int,
    file_ops: SegmentFileOps,
) -> list[LogSegment]:
    """The segments on disk, in offset order; `open_segment(base, file_suffix)` opens one."""
    recover_interrupted_swaps(directory, lambda base: open_segment(base, SWAP_SUFFIX), max_message_bytes, file_ops)
    for path in sorted(directory.iterdir()):
        if path.suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX) and not path.with_suffix(LOG_SUFFIX).exists():
            path.unlink()  # orphaned index of a deleted segment
    bases = sorted(int(path.stem) for path in directory.glob("*" + LOG_SUFFIX) if path.stem.isdigit())
    return [open_segment(base_offset, "") for base_offset in bases]


def recover_segments(
    segments: LogSegments,
    *,
    recovery_point: int,
    clean_shutdown: bool,
    max_message_bytes: int,
    on_batch: Callable[[BatchHeader], None],
) -> None:
    """Recover segments from the recovery point on (after a crash) and any whose index was missing or
    corrupt; each valid batch's header goes to `on_batch`. A truncated segment ends the log."""
    first_unflushed = (segments.floor(recovery_point) or segments.first).base_offset
    for segment in list(segments):
        if not (segment.needs_recovery or (not clean_shutdown and segment.base_offset >= first_unflushed)):
            continue
        truncated = segment.recover(max_message_bytes, on_batch)
        if truncated:
            for later in list(segments.higher(segment.base_offset)):
                segments.remove(later.base_offset).delete()
            return


def rebuild_producer_state(segments: LogSegments, producer_state: ProducerStateManager) -> None:
    for segment in segments.values()[-PRODUCER_STATE_SCAN_SEGMENTS:]:
        for _, header in segment.scan_headers_from(segment.base_offset):
            producer_state.record(header)
