"""What an append did, as PartitionLog's appends report it (beside the log, so that the modules of its
append steps can name it without importing the log)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time: int
    log_start_offset: int
    duplicate: bool
    # What this call appended: 0 and 0 for a duplicate.
    num_batches: int
    num_bytes: int
