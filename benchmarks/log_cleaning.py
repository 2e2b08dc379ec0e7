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

import asyncio
import os
import shutil
import time
from pathlib import Path

from replog.log.cleaner import clean_log
from replog.log.cleaner_manager import LogCleanerManager
from replog.log.cleaner_rules import OffsetMap
from replog.log.config import CleanerConfig, LogConfig
from replog.log.log_cleaner import LogCleaner
from replog.log.log_manager import LogManager
from replog.protocol.records import Compression, build_batch

from .harness import MiB, Result, Stats, percentile

NAME = "log-cleaning"
KEYS = 10_000
VALUE_BYTES = 100
RECORDS_PER_BATCH = 50
CONFIG = LogConfig(segment_bytes=64 * MiB, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)
CLOCK_MS = 1_700_000_000_000
LOOP_TICK_S = 0.001
LOOP_IDLE_S = 2.0


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


async def _loop_lateness(stop: asyncio.Event) -> list[float]:
    """How late each 1 ms sleep wakes up, in µs, until `stop`."""
    late = []
    while not stop.is_set():
        started = time.perf_counter()
        await asyncio.sleep(LOOP_TICK_S)
        late.append((time.perf_counter() - started - LOOP_TICK_S) * 1e6)
    return late


async def _lateness_idle_and_cleaning(log_dir: Path) -> tuple[list[float], list[float]]:
    log_manager = LogManager([log_dir], CONFIG, clock_ms=lambda: CLOCK_MS)
    cleaner = LogCleaner(log_manager, CleanerConfig(), clock_ms=lambda: CLOCK_MS)
    try:
        stop = asyncio.Event()
        ticking = asyncio.create_task(_loop_lateness(stop))
        await asyncio.sleep(LOOP_IDLE_S)
        stop.set()
        idle = await ticking
        stop = asyncio.Event()
        ticking = asyncio.create_task(_loop_lateness(stop))
        assert await cleaner.clean_filthiest()
        stop.set()
        return idle, await ticking
    finally:
        await cleaner.stop()
        log_manager.shutdown()


def measure_loop_lateness(pristine: Path, work: Path) -> Result:
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(pristine, work)
    idle, cleaning = asyncio.run(_lateness_idle_and_cleaning(work))
    idle_p99 = percentile(sorted(idle), 0.99)
    cleaning_p99 = percentile(sorted(cleaning), 0.99)
    return Result(NAME, "event-loop lateness p99 while cleaning", "us", Stats.of([cleaning_p99]),
                  "idle loop p99", idle_p99, {"cleaning_max_us": max(cleaning), "idle_max_us": max(idle),
                                              "ticks_cleaning": len(cleaning), "ticks_idle": len(idle)})


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
        if compression == Compression.NONE:
            results.append(measure_loop_lateness(pristine, workdir / "cleaning-work"))
        shutil.rmtree(pristine, ignore_errors=True)
    shutil.rmtree(workdir / "cleaning-work", ignore_errors=True)
    shutil.rmtree(workdir / "cleaning-copy", ignore_errors=True)
    return results
