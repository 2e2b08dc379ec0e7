"""Metrics dump files: JSON lines appended to `metrics-<first ts_ms>.jsonl` in one directory, a new file when
the current one would pass max_bytes, the oldest deleted past max_files (docs/metrics-dumps.md).

DumpWriter does blocking file I/O; MetricsDumper runs it in a worker thread, one write at a time, so the
event loop only builds the snapshot (reading its own state, which must not change while it is read).
"""

import asyncio
import collections
import logging
import time
from collections.abc import Callable
from pathlib import Path

from .encoded_array import ArrayUpdate, encode_json

log = logging.getLogger(__name__)

DUMP_FORMAT_VERSION = 1
FILE_PREFIX, FILE_SUFFIX = "metrics-", ".jsonl"
# Events (ISR changes) waiting for the next write; past this they are dropped and counted, not queued forever.
MAX_PENDING_EVENTS = 100_000


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class DumpWriter:
    def __init__(self, directory: Path, *, max_bytes: int, max_files: int) -> None:
        assert max_bytes > 0 and max_files > 0
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.max_files = max_files
        self.directory.mkdir(parents=True, exist_ok=True)
        self._current: Path | None = None
        self._current_size = 0

    def write(self, lines: list[bytes], now_ms: int) -> None:
        """Append the lines (each ends with a newline), starting a new file first if they would not fit."""
        data = b"".join(lines)
        if self._current is None or (self._current_size and self._current_size + len(data) > self.max_bytes):
            self._start_file(now_ms)
        with open(self._current, "ab") as f:
            f.write(data)
        self._current_size += len(data)

    def _start_file(self, now_ms: int) -> None:
        path = self.directory / f"{FILE_PREFIX}{now_ms:013d}{FILE_SUFFIX}"
        while path.exists():  # two files in one millisecond, or a clock that stepped back
            now_ms += 1
            path = self.directory / f"{FILE_PREFIX}{now_ms:013d}{FILE_SUFFIX}"
        self._current, self._current_size = path, 0
        files = sorted(self.directory.glob(f"{FILE_PREFIX}*{FILE_SUFFIX}"))
        for old in files[: max(0, len(files) + 1 - self.max_files)]:
            old.unlink(missing_ok=True)

    def files(self) -> list[Path]:
        return sorted(self.directory.glob(f"{FILE_PREFIX}*{FILE_SUFFIX}"))


def encode_line(kind: str, node_id: int, ts_ms: int, fields: dict) -> bytes:
    """One JSON line; a field whose value is an ArrayUpdate is applied and encoded here (its changes only)."""
    line = {"v": DUMP_FORMAT_VERSION, "kind": kind, "ts_ms": ts_ms, "node_id": node_id, **fields}
    if not any(isinstance(value, ArrayUpdate) for value in fields.values()):
        return encode_json(line) + b"\n"
    members = [encode_json(key) + b":" + (value.encode() if isinstance(value, ArrayUpdate) else encode_json(value))
               for key, value in line.items()]
    return b"{" + b",".join(members) + b"}\n"


class MetricsDumper:
    """Every interval: take a snapshot on the loop, then write it and the queued events in a worker thread."""

    def __init__(self, writer: DumpWriter, *, node_id: int, role: str, interval_ms: int,
                 snapshot: Callable[[int], tuple[str, dict]]) -> None:
        assert interval_ms > 0
        self.writer = writer
        self.node_id = node_id
        self.interval_ms = interval_ms
        self._snapshot = snapshot
        self._events: collections.deque[bytes] = collections.deque()
        self.dropped_events = 0
        self.started_ms = wall_clock_ms()
        self.event("start", {"role": role}, ts_ms=self.started_ms)
        self._task: asyncio.Task | None = None
        # The write in the worker thread, which outlives a cancelled dump: the next one waits for it, so the
        # writes (and the encoded arrays they update) go one at a time, in order.
        self._writing: asyncio.Future | None = None

    def event(self, kind: str, fields: dict, *, ts_ms: int | None = None) -> None:
        """Queue one event line for the next write."""
        if len(self._events) >= MAX_PENDING_EVENTS:
            self.dropped_events += 1
            return
        self._events.append(encode_line(kind, self.node_id, wall_clock_ms() if ts_ms is None else ts_ms, fields))

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Stop the periodic dumps and write a last snapshot, so a clean stop leaves the final state."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        await self.dump_once()

    async def _run(self) -> None:
        # The first dump right away: the start line is on disk even if the process dies within a tick.
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            try:
                await self.dump_once()
            except Exception:
                log.exception("writing the metrics dump to %s failed", self.writer.directory)
            next_at += self.interval_ms / 1000
            if loop.time() > next_at:
                next_at = loop.time()  # fell behind (a slow disk): skip the missed ticks, do not burst
            await asyncio.sleep(max(0.0, next_at - loop.time()))

    async def dump_once(self) -> None:
        if self._writing is not None:
            await asyncio.wait([self._writing])
        now_ms = wall_clock_ms()
        kind, fields = self._snapshot(now_ms)
        fields = {"started_ms": self.started_ms, "dropped_events_total": self.dropped_events, **fields}
        lines = list(self._events)
        self._events.clear()
        # Encoding a thousand partitions takes milliseconds: it goes to the thread with the write.
        self._writing = asyncio.ensure_future(asyncio.to_thread(self._encode_and_write, lines, kind, fields, now_ms))
        await asyncio.shield(self._writing)

    def _encode_and_write(self, events: list[bytes], kind: str, fields: dict, now_ms: int) -> None:
        self.writer.write([*events, encode_line(kind, self.node_id, now_ms, fields)], now_ms)
