"""The safety properties of the quorum, checked by the simulation after every event.

- At most one leader per epoch.
- Log matching: two logs holding an entry at the same offset with the same epoch agree on it and on the epoch
  of the entry before it, hence (by induction) on everything before it.
- Committed entries are never lost or changed: every node agrees with the one committed sequence below its
  high watermark, and a node elected in epoch L holds every entry committed in an epoch below L.
- A node's high watermark never goes down while it runs (it is not persisted, so a restart starts over).
- Every node's applied state machine is a prefix of the committed sequence.
"""

from __future__ import annotations

import bisect

from replog.raft.messages import LogEntry
from replog.raft.node import RaftNode
from replog.raft.raft_log import MemoryRaftLog
from replog.raft.states import Role


class InvariantViolation(AssertionError):
    pass


class QuorumInvariants:
    def __init__(self) -> None:
        self.leaders: dict[int, int] = {}  # epoch -> leader id
        self.entries: dict[tuple[int, int], tuple[bytes, int]] = {}  # (offset, epoch) -> (value, previous epoch)
        self.committed: list[LogEntry] = []  # the one committed sequence, offset = index
        # (epoch, committed end) observed by nodes in that epoch; committed ends only grow with epochs.
        self._commit_marks: list[tuple[int, int]] = []
        self._high_watermarks: dict[tuple[int, int], int] = {}  # (node, incarnation) -> last HW seen
        self._checked: dict[int, tuple[int, int]] = {}  # node -> (log end, committed end) checked last time
        self._elected_checked: set[int] = set()  # epochs whose leader was checked at its election

    def check_node(self, node: RaftNode, incarnation: int) -> None:
        """After `node` acted. Its log changes in one event by an append, a truncation or a snapshot only, so
        the entries below what was checked last time (and still there) need no second look."""
        log = node.log
        assert isinstance(log, MemoryRaftLog)
        matched_end, committed_end = self._checked.get(node.node_id, (0, 0))
        self._check_log_matching(node.node_id, log, max(log.start_offset, min(matched_end, log.end_offset)))
        hw = node.high_watermark
        if hw is not None:
            key = (node.node_id, incarnation)
            if hw < self._high_watermarks.get(key, 0):
                raise InvariantViolation(f"node {node.node_id}: high watermark went down "
                                         f"{self._high_watermarks[key]} -> {hw}")
            self._high_watermarks[key] = hw
            if hw > log.end_offset:
                raise InvariantViolation(f"node {node.node_id}: high watermark {hw} above its log end {log.end_offset}")
            # A node may know a high watermark below its own snapshot (learned before it loaded one).
            first = max(log.start_offset, min(committed_end, hw))
            for offset, entry in enumerate(log.read(first, max(0, hw - first)), start=first):
                self._agree(node.node_id, offset, entry, "committed")
            committed_end = hw
            self._mark_commit(node.epoch, hw)
        self._checked[node.node_id] = (log.end_offset, committed_end)
        if node.role is Role.LEADER:
            self._check_leader(node)

    def _check_log_matching(self, node_id: int, log: MemoryRaftLog, first: int) -> None:
        before = log.epoch_at(first - 1) if first > log.start_offset else log.start_epoch
        for offset, entry in enumerate(log.read(first, log.end_offset - first), start=first):
            seen = self.entries.setdefault((offset, entry.epoch), (entry.value, before))
            if seen != (entry.value, before):
                raise InvariantViolation(
                    f"log matching: node {node_id} has ({offset}, epoch {entry.epoch}) = {entry.value!r} after "
                    f"epoch {before}, another log has {seen[0]!r} after epoch {seen[1]}")
            before = entry.epoch

    def _agree(self, node_id: int, offset: int, entry: LogEntry, what: str) -> None:
        if offset < len(self.committed):
            if self.committed[offset] != entry:
                raise InvariantViolation(f"{what} entry changed: node {node_id} has {entry} at offset {offset}, "
                                         f"committed was {self.committed[offset]}")
        elif offset == len(self.committed):
            self.committed.append(entry)
        else:
            raise InvariantViolation(f"node {node_id}: {what} offset {offset} beyond the known committed "
                                     f"prefix {len(self.committed)} (a gap)")

    def _mark_commit(self, epoch: int, end: int) -> None:
        index = bisect.bisect_left(self._commit_marks, (epoch, -1))
        if index < len(self._commit_marks) and self._commit_marks[index][0] == epoch:
            if end <= self._commit_marks[index][1]:
                return
            self._commit_marks[index] = (epoch, end)
        else:
            self._commit_marks.insert(index, (epoch, end))

    def _committed_before_epoch(self, epoch: int) -> int:
        index = bisect.bisect_left(self._commit_marks, (epoch, -1))
        return max((end for _, end in self._commit_marks[:index]), default=0)

    def _check_leader(self, node: RaftNode) -> None:
        """One leader per epoch, and at its election it holds everything committed in earlier epochs (a
        leader only appends afterwards, and the other checks see its log)."""
        leader = self.leaders.setdefault(node.epoch, node.node_id)
        if leader != node.node_id:
            raise InvariantViolation(f"two leaders in epoch {node.epoch}: nodes {leader} and {node.node_id}")
        if node.epoch in self._elected_checked:
            return
        self._elected_checked.add(node.epoch)
        required = min(self._committed_before_epoch(node.epoch), len(self.committed))
        log = node.log
        if log.end_offset < required:
            raise InvariantViolation(f"leader {node.node_id} of epoch {node.epoch} ends at {log.end_offset}, "
                                     f"missing committed entries up to {required}")
        for offset in range(log.start_offset, required):
            if log.read(offset, 1)[0] != self.committed[offset]:
                raise InvariantViolation(f"leader {node.node_id} of epoch {node.epoch} lost committed "
                                         f"offset {offset}")

    def check_applied(self, node_id: int, applied: list[LogEntry], first_new: int) -> None:
        """A state machine's applied entries (offset = index) must be a prefix of the committed sequence."""
        for offset in range(first_new, len(applied)):
            self._agree(node_id, offset, applied[offset], "applied")
