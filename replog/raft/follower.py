"""FollowerRole: a follower's side of RaftNode: fetching from the leader, downloading its snapshot when the
leader answers with one (KIP-630), and an observer's probe for a leader. It holds what only a node that does
not lead needs (the backoff after an error answer, the download, when the leader was last heard, the high
watermark the leader last told); RaftNode holds it as it holds a LeaderRole while leading, checks that an
answer comes from the current leader in the current epoch, and keeps the quorum state.
"""

from __future__ import annotations

import random
from dataclasses import replace

from kio.schema.errors import ErrorCode

from replog.raft import messages as m
from replog.raft.commits import CommitQueue
from replog.raft.config import QuorumConfig
from replog.raft.raft_log import RaftLog, truncation_offset
from replog.raft.requests import RequestChannel
from replog.raft.snapshots import MAX_SNAPSHOT_CHUNK_BYTES, SnapshotDownload
from replog.raft.states import Follower, QuorumState


class FollowerRole:
    def __init__(self, node_id: int, cluster_id: str, config: QuorumConfig, log: RaftLog, channel: RequestChannel,
                 commits: CommitQueue, rng: random.Random) -> None:
        self.node_id, self.cluster_id, self.config, self.log = node_id, cluster_id, config, log
        self._channel, self._commits, self._rng = channel, commits, rng
        self.retry_at_ms = 0  # a follower backs off after an error answer
        self.heard_from_leader_ms: int | None = None  # the last good Fetch answer of this epoch's leader
        self.high_watermark: int | None = None  # unknown after a start until the leader says (KRaft keeps none)
        self._download: SnapshotDownload | None = None

    def new_role_or_epoch(self) -> None:
        """The node changed role or epoch: no backoff, and a snapshot of the old leader's may not exist on the
        new one."""
        self.retry_at_ms = 0
        self._download = None

    def on_fetch_response(self, state: Follower, response: m.FetchResponse, fetch_offset: int,
                          now_ms: int) -> Follower:
        """A Fetch answer from `state`'s leader in its epoch; returns the state with the fetch timer reset if
        the answer was good."""
        if response.error_code != ErrorCode.none:
            self.retry_at_ms = now_ms + self.config.retry_backoff_ms
            return state
        state = replace(state, fetch_deadline_ms=now_ms + self.config.fetch_timeout_ms)
        self.heard_from_leader_ms = now_ms
        if response.diverging_epoch is not None:
            offset = truncation_offset(self.log, response.diverging_epoch)
            assert self.high_watermark is None or offset >= min(self.high_watermark, self.log.end_offset), (
                f"node {self.node_id}: truncation to {offset} below the high watermark {self.high_watermark}")
            self.log.truncate_to(max(offset, self.log.start_offset))
        elif response.snapshot_id is not None:
            self._download = SnapshotDownload(response.snapshot_id)
        elif fetch_offset == self.log.end_offset:
            if response.records:
                self.log.append(response.records)
                self.log.flush()  # a follower acknowledges (by its next fetch offset) only what is durable
            if response.high_watermark >= 0:
                self._raise_high_watermark(min(response.high_watermark, self.log.end_offset))
        self.maybe_fetch(state, now_ms)
        return state

    def on_fetch_snapshot_response(self, state: Follower, response: m.FetchSnapshotResponse,
                                   now_ms: int) -> Follower:
        """A FetchSnapshot answer from `state`'s leader in its epoch; returns the state with the fetch timer
        reset if it was a good chunk of the snapshot being downloaded."""
        download = self._download
        if download is None:
            return state
        if response.error_code != ErrorCode.none or not download.accept(
                response.snapshot_id, response.size, response.position, response.unaligned_records):
            self._download = None  # start over from a fresh Fetch
            self.retry_at_ms = now_ms + self.config.retry_backoff_ms
            return state
        state = replace(state, fetch_deadline_ms=now_ms + self.config.fetch_timeout_ms)
        if download.complete:
            self.log.install_snapshot(download.snapshot_id, bytes(download.received))
            self._download = None
            self._commits.snapshot_installed(download.snapshot_id)
            self._raise_high_watermark(download.snapshot_id.offset)
        self.maybe_fetch(state, now_ms)
        return state

    def _raise_high_watermark(self, offset: int) -> None:
        if self.high_watermark is None or offset > self.high_watermark:
            self.high_watermark = offset

    def maybe_fetch(self, state: QuorumState, now_ms: int) -> None:
        """A follower with nothing in flight and no backoff asks its leader for what comes next."""
        if (not isinstance(state, Follower) or self._channel.is_waiting_for(state.leader_id)
                or now_ms < self.retry_at_ms):
            return
        if self._download is not None:
            request = m.FetchSnapshotRequest(self.cluster_id, self.node_id, state.epoch, self._download.snapshot_id,
                                             self._download.position, MAX_SNAPSHOT_CHUNK_BYTES)
            self._channel.send(state.leader_id, request, now_ms)
            return
        last = self.log.last_offset_and_epoch()
        fetch = m.FetchRequest(self.cluster_id, self.node_id, state.epoch, last.offset, last.epoch,
                               self.config.fetch_max_wait_ms)
        self._channel.send(state.leader_id, fetch, now_ms, fetch_offset=last.offset)

    def probe_for_leader(self, epoch: int, voters: frozenset[int], now_ms: int) -> None:
        """An observer without a leader asks a random voter; any answer names the leader it knows."""
        last = self.log.last_offset_and_epoch()
        voter = self._rng.choice(sorted(voters))
        fetch = m.FetchRequest(self.cluster_id, self.node_id, epoch, last.offset, last.epoch, 0)
        self._channel.send(voter, fetch, now_ms, fetch_offset=last.offset)
        self.retry_at_ms = now_ms + self.config.retry_backoff_ms
