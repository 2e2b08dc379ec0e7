"""What a controller among several voters needs to hand over safely (KIP-631's active and standby controllers).

- The commit gate: the active controller applies a decision as soon as it appends its records, but a request
  telling the brokers (LeaderAndIsr, UpdateMetadata, StopReplica) leaves only once those records are
  committed, so no broker acts on a decision the next controller never saw.
- A copy of the metadata made through its snapshot records, the state a deposed controller falls back to.
"""

from __future__ import annotations

from replog.raft.shell import QuorumShell

from . import records
from .cluster import ClusterMetadata


class QuorumCommitGate:
    """channel.CommitGate over the quorum: the barrier is the log's end, committed once the high watermark
    reaches it."""

    def __init__(self, shell: QuorumShell) -> None:
        self._shell = shell

    def barrier(self) -> int:
        assert self._shell.node is not None
        return self._shell.node.log.end_offset

    async def wait(self, offset: int) -> None:
        await self._shell.wait_committed(offset)


def copy_metadata(metadata: ClusterMetadata, controller_epoch: int) -> ClusterMetadata:
    """An independent copy, rebuilt from the snapshot records (the same round trip snapshots make)."""
    copy = ClusterMetadata()
    records.replay(records.snapshot_records(controller_epoch, metadata), copy)
    return copy
