"""The crash-safe swap of cleaned segments into a log, with Kafka's file protocol (LocalLog.replaceSegments
and LogLoader's recovery of `.cleaned` and `.swap` files).

The cleaner writes `<base>.log.cleaned` (and `.index.cleaned`, `.timeindex.cleaned`), fsynced. The swap:
1. renames the `.cleaned` files to `.swap`, the log file last, and fsyncs the directory: the log file's
   rename commits the swap;
2. deletes the old segments (unlink only: an in-flight read keeps its open file);
3. renames the `.swap` files to the real names and fsyncs the directory.

A crash before step 1 completes leaves `.cleaned` files: they are deleted and the old segments stand. A
crash after it leaves `<base>.log.swap`: the swap is completed at start-up, every old segment whose base
lies in the swapped segment's offset range is deleted and the `.swap` files take the real names. Stray
index `.swap` files without their log `.swap` are deleted (the segment rebuilds its indexes).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from replog.log.checkpoint import fsync_directory
from replog.log.segment import LogSegment
from replog.log.segment_files import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    SegmentFileOps,
    segment_file_name,
)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
# The log file goes last: its presence under a name says every index before it got there too.
_SEGMENT_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX)


def _path(directory: Path, base_offset: int, suffix: str, state: str = "") -> Path:
    return directory / segment_file_name(base_offset, suffix + state)


def discard_cleaned(directory: Path, base_offset: int) -> None:
    """Delete a cleaned segment that will not be swapped in (cleaning aborted, or a stale leftover)."""
    for suffix in _SEGMENT_SUFFIXES:
        _path(directory, base_offset, suffix, CLEANED_SUFFIX).unlink(missing_ok=True)


def commit_cleaned(directory: Path, base_offset: int, ops: SegmentFileOps) -> None:
    """Step 1: `.cleaned` -> `.swap`. Once this returns, a crash completes the swap instead of undoing it."""
    for suffix in _SEGMENT_SUFFIXES:
        ops.rename(_path(directory, base_offset, suffix, CLEANED_SUFFIX),
                   _path(directory, base_offset, suffix, SWAP_SUFFIX))
    fsync_directory(directory)


def finish_swap(directory: Path, base_offset: int, ops: SegmentFileOps) -> None:
    """Step 3: `.swap` -> the real names, once the old segments' files are gone."""
    for suffix in _SEGMENT_SUFFIXES:
        swapped = _path(directory, base_offset, suffix, SWAP_SUFFIX)
        if swapped.exists():
            ops.rename(swapped, _path(directory, base_offset, suffix))
    fsync_directory(directory)


def _delete_segment_files(directory: Path, base_offset: int) -> None:
    for suffix in _SEGMENT_SUFFIXES:
        _path(directory, base_offset, suffix).unlink(missing_ok=True)


def _base_offset_of(path: Path) -> int | None:
    """The base offset a segment file is named by, or None for a file that is not a segment's."""
    digits = path.name[:20]
    return int(digits) if len(digits) == 20 and digits.isdigit() and path.name[20:21] == "." else None


def recover_interrupted_swaps(
    directory: Path, open_swap_segment: Callable[[int], LogSegment], max_message_bytes: int, ops: SegmentFileOps
) -> int:
    """Before a log's segments open: drop `.cleaned` files, complete every committed swap. Returns the
    number of swaps completed."""
    for path in directory.glob("*" + CLEANED_SUFFIX):
        path.unlink()
    swap_bases = sorted(base for path in directory.glob("*" + LOG_SUFFIX + SWAP_SUFFIX)
                        if (base := _base_offset_of(path)) is not None)
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        for path in directory.glob("*" + suffix + SWAP_SUFFIX):
            if _base_offset_of(path) not in swap_bases:
                path.unlink()
    segment_bases = sorted(int(path.stem) for path in directory.glob("*" + LOG_SUFFIX) if path.stem.isdigit())
    for base in swap_bases:
        swapped = open_swap_segment(base)
        try:
            # Written and fsynced before the commit, but validated like any segment a crash may have hit.
            swapped.recover(max_message_bytes, lambda _header: None)
            next_offset = swapped.next_offset
        finally:
            swapped.close()
        for old_base in segment_bases:
            if old_base == base or base <= old_base < next_offset:
                _delete_segment_files(directory, old_base)
        finish_swap(directory, base, ops)
    return len(swap_bases)
