"""Log compaction throughput: MB/s of dirty log the cleaner gets through (offset map, then the rewrite into
`.cleaned` segments, fsynced), in process, against a raw copy of the same segment files (read, write,
fsync) measured in the same run on the same files.

A compacted log of VOLUME bytes is written once: KEYS keys updated round-robin, RECORDS_PER_BATCH records a
batch, VALUE_BYTES random values, one case uncompressed and one with lz4 (each batch decompressed and, when some
records go, recompressed). Every repeat copies that pristine log to a fresh directory (not timed), then
times one full cleaning of it (everything below the active segment is dirty; the swap, a few renames on
the event loop, is not part of the cleaning and not timed). The baseline copies the segment files of the
same log with shutil.copyfile plus an fsync per file, the floor any rewrite of those bytes pays.
"""

import os
import shutil
import time
from pathlib import Path

from replog.log.cleaner import clean_log
from replog.log.cleaner_manager import LogCleanerManager
from replog.log.cleaner_rules import OffsetMap
from replog.log.config import LogConfig
from replog.log.log_manager import LogManager
from replog.protocol.records import Compression, build_batch

from .harness import MiB, Result, Stats

NAME = "log_cleaning"
KEYS = 10_000
VALUE_BYTES = 100
RECORDS_PER_BATCH = 50
CONFIG = LogConfig(segment_bytes=64 * MiB, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)
CLOCK_MS = 1_700_000_000_000


def write_log(root: Path, volume: int, compression: Compression) -> Path:
    log_manager = LogManager([root], CONFIG, clock_ms=lambda: CLOCK_MS)
    log = log_manager.get_or_create_log("bench", 0, CONFIG)
    sequence = 0
    while log.size_in_bytes < volume:
        # Random values: a codec gets no more out of them than out of typical payloads, so a MiB of log
        # holds about as many records with or without compression.
        records = [(b"key-%d" % ((sequence + i) % KEYS), os.urandom(VALUE_BYTES), [], CLOCK_MS - 60_000)
                   for i in range(RECORDS_PER_BATCH)]
        sequence += RECORDS_PER_BATCH
        log.append_as_leader(memoryview(bytearray(build_batch(records, compression=compression))), leader_epoch=0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    log_manager.shutdown()
    return root


def dirty_bytes(log_dir: Path) -> int:
    return sum(path.stat().st_size for path in (log_dir / "bench-0").glob("*.log"))


def time_cleaning(pristine: Path, work: Path) -> tuple[float, dict]:
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(pristine, work)
    log_manager = LogManager([work], CONFIG, clock_ms=lambda: CLOCK_MS)
    try:
        cleaner = LogCleanerManager(log_manager, lambda: CLOCK_MS)
        log, job = cleaner.grab_filthiest()
        started = time.perf_counter()
        result = clean_log(job, OffsetMap(128 * MiB))
        seconds = time.perf_counter() - started
        assert cleaner.complete(log, job, result)
        return seconds, {"bytes_in": result.bytes_read, "bytes_out": result.bytes_written,
                         "records_in": result.records_read, "records_out": result.records_kept}
    finally:
        log_manager.shutdown()


def time_copy(pristine: Path, work: Path) -> float:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    sources = sorted((pristine / "bench-0").glob("*.log"))
    started = time.perf_counter()
    for source in sources:
        target = work / source.name
        shutil.copyfile(source, target)
        fd = os.open(target, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return time.perf_counter() - started


def run(quick: bool, workdir: Path) -> list[Result]:
    volume = (16 if quick else 256) * MiB
    repeats = 2 if quick else 3
    results = []
    for compression in (Compression.NONE, Compression.LZ4):
        pristine = write_log(workdir / f"cleaning-pristine-{compression.name.lower()}", volume, compression)
        size = dirty_bytes(pristine)
        cleanings, copies, extra, record_rates = [], [], {}, []
        for _ in range(repeats):  # alternating, so a slow patch of a shared VM hits both alike
            seconds, extra = time_cleaning(pristine, workdir / "cleaning-work")
            cleanings.append(size / seconds)
            record_rates.append(extra["records_in"] / seconds)
            copies.append(size / time_copy(pristine, workdir / "cleaning-copy"))
        baseline = Stats.of(copies)
        results.append(Result(NAME, f"clean {size // MiB} MiB, {compression.name.lower()}, {KEYS} keys", "B/s",
                              Stats.of(cleanings), "raw file copy + fsync", baseline.median,
                              extra | {"copy": baseline.samples, "records_per_s": record_rates}))
        shutil.rmtree(pristine, ignore_errors=True)
    shutil.rmtree(workdir / "cleaning-work", ignore_errors=True)
    shutil.rmtree(workdir / "cleaning-copy", ignore_errors=True)
    return results
