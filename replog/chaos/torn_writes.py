"""Torn writes: what a power loss could take from a SIGKILLed broker's unflushed data, injected into its
stopped log dir (only past the recovery point of its checkpoint)."""

from __future__ import annotations

import os
import random
from pathlib import Path

from .crash_loop_config import TOPIC
from .log_verifier import (
    HIGH_WATERMARK_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    read_offset_checkpoint,
    verify_partition,
)

MAX_GARBAGE_BYTES = 4096

CUT_BATCH = "cut last batch"
GARBAGE_TAIL = "garbage after last batch"
CUT_INDEX = "cut offset or time index"
CORRUPT_CHECKPOINT = "corrupt checkpoint tail"
TORN_TMP_CHECKPOINT = "torn checkpoint .tmp"
DAMAGE_KINDS = (CUT_BATCH, GARBAGE_TAIL, CUT_INDEX, CORRUPT_CHECKPOINT, TORN_TMP_CHECKPOINT)
# Kafka resets these two when they do not parse (LogManager.loadLogs); a bad HW or leader-epoch checkpoint
# is a storage error there, and an atomic write (tmp, fsync, rename, fsync dir) never tears them.
RESETTABLE_CHECKPOINTS = (RECOVERY_POINT_CHECKPOINT, "log-start-offset-checkpoint")


def recovery_point(log_dir: Path, partition_dir: Path) -> int:
    """The partition's checkpointed recovery point (0 when absent or unreadable: everything is unflushed)."""
    return read_offset_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT, []).get(partition_dir.name, 0)


def last_segment(partition_dir: Path) -> Path:
    return max(partition_dir.glob("*.log"), key=lambda p: p.name)


def inject_damage(kind: str, log_dir: Path, rng: random.Random) -> str | None:
    """Damage the stopped broker's log dir as a power loss could; a description, or None if no partition
    has unflushed data of the kind to damage."""
    partition_dirs = sorted(d for d in log_dir.glob(f"{TOPIC}-*") if d.is_dir())
    rng.shuffle(partition_dirs)
    if kind == CORRUPT_CHECKPOINT:
        path = log_dir / rng.choice(RESETTABLE_CHECKPOINTS)
        if not path.exists() or path.stat().st_size == 0:
            return None
        data = path.read_bytes()
        cut = rng.randrange(data.rstrip(b"\n").rfind(b"\n") + 1, len(data))  # inside the last line
        path.write_bytes(data[:cut] + rng.choice([b"", b"\x00" * rng.randint(1, 8), b"x"]))
        return f"{path.name} cut at byte {cut} of {len(data)}"
    if kind == TORN_TMP_CHECKPOINT:
        names = [HIGH_WATERMARK_CHECKPOINT, RECOVERY_POINT_CHECKPOINT] + [
            f"{d.name}/{LEADER_EPOCH_CHECKPOINT}" for d in partition_dirs]
        path = log_dir / rng.choice(names)
        data = path.read_bytes() if path.exists() else b"0\n1\n"
        torn = data[:rng.randrange(len(data) + 1)]
        path.with_name(path.name + ".tmp").write_bytes(torn)
        return f"{path.relative_to(log_dir)}.tmp with {len(torn)} of {len(data)} bytes"
    for partition_dir in partition_dirs:
        flushed = recovery_point(log_dir, partition_dir)
        segment = last_segment(partition_dir)
        batches = [b for b in verify_partition(partition_dir, torn_tail=True).batches
                   if b.segment == int(segment.stem)]
        if not batches or batches[-1].base_offset < flushed:
            continue  # nothing unflushed in the active segment here
        last = batches[-1]
        where = f"{partition_dir.name}/{segment.name}"
        if kind == CUT_BATCH:
            cut = last.position + rng.randint(1, last.size - 1)
            os.truncate(segment, cut)
            return f"{where} cut at {cut}, inside the batch of offsets {last.base_offset}..{last.last_offset}"
        if kind == GARBAGE_TAIL:
            garbage = rng.randbytes(rng.randint(1, MAX_GARBAGE_BYTES))
            with open(segment, "r+b") as f:
                f.seek(last.position + last.size)
                f.truncate()
                f.write(garbage)
            return f"{where}: {len(garbage)} random bytes after offset {last.last_offset}"
        if kind == CUT_INDEX:
            index = segment.with_suffix(rng.choice([".index", ".timeindex"]))
            if not index.exists():
                continue
            used = len(index.read_bytes().rstrip(b"\0"))
            cut = rng.randint(0, used)
            os.truncate(index, cut)
            return f"{partition_dir.name}/{index.name} cut at {cut} of {used} used bytes"
        raise ValueError(f"unknown damage {kind!r}")
    return None
