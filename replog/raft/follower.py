"""A follower's side of RaftNode: fetching from the leader, downloading its snapshot when the leader answers
with one (KIP-630), and an observer's probe for a leader. Split out of node.py, which mixes it in; the
election, the request handlers and the state transitions stay there.
"""

from __future__ import annotations

import random
from dataclasses import replace

from kio.schema.errors import ErrorCode

from replog.raft import messages as m
from replog.raft.commits import CommitQueue
from replog.raft.config import QuorumConfig
from replog.raft.messages import Envelope
from replog.raft.raft_log import RaftLog, truncation_offset
from replog.raft.requests import RequestChannel
from replog.raft.snapshots import MAX_SNAPSHOT_CHUNK_BYTES, SnapshotDownload
from replog.raft.states import Follower, QuorumState


class FollowerFetching:
    """Mixed into RaftNode, which sets these attributes and provides epoch, high_watermark and _observe."""

    node_id: int
    cluster_id: str
    config: QuorumConfig
    voters: frozenset[int]
    log: RaftLog
    state: QuorumState
    _rng: random.Random
    _channel: RequestChannel
    _commits: CommitQueue
    _retry_at_ms: int
    _heard_from_leader_ms: int | None
    _high_watermark: int | None
    _download: SnapshotDownload | None

    def _on_fetch_response(self, envelope: Envelope, response: m.FetchResponse, fetch_offset: int,
                           now_ms: int) -> None:
        if self._observe(response.leader_epoch, response.leader_id, now_ms):
            return
        state = self.state
        if not isinstance(state, Follower) or envelope.source != state.leader_id or response.leader_epoch != state.epoch:
            return
        if response.error_code != ErrorCode.none:
            self._retry_at_ms = now_ms + self.config.retry_backoff_ms
            return
        self.state = replace(state, fetch_deadline_ms=now_ms + self.config.fetch_timeout_ms)
        self._heard_from_leader_ms = now_ms
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
        self._maybe_fetch(now_ms)

    def _on_fetch_snapshot_response(self, response: m.FetchSnapshotResponse, now_ms: int) -> None:
        if self._observe(response.leader_epoch, response.leader_id, now_ms):
            return
        download = self._download
        if download is None or not isinstance(self.state, Follower) or response.leader_epoch != self.epoch:
            return
        if response.error_code != ErrorCode.none or not download.accept(
                response.snapshot_id, response.size, response.position, response.unaligned_records):
            self._download = None  # start over from a fresh Fetch
            self._retry_at_ms = now_ms + self.config.retry_backoff_ms
            return
        self.state = replace(self.state, fetch_deadline_ms=now_ms + self.config.fetch_timeout_ms)
        if download.complete:
            self.log.install_snapshot(download.snapshot_id, bytes(download.received))
            self._download = None
            self._commits.snapshot_installed(download.snapshot_id)
            self._raise_high_watermark(download.snapshot_id.offset)
        self._maybe_fetch(now_ms)

    def _raise_high_watermark(self, offset: int) -> None:
        if self._high_watermark is None or offset > self._high_watermark:
            self._high_watermark = offset

    def _maybe_fetch(self, now_ms: int) -> None:
        state = self.state
        if (not isinstance(state, Follower) or self._channel.is_waiting_for(state.leader_id)
                or now_ms < self._retry_at_ms):
            return
        if self._download is not None:
            request = m.FetchSnapshotRequest(self.cluster_id, self.node_id, self.epoch, self._download.snapshot_id,
                                             self._download.position, MAX_SNAPSHOT_CHUNK_BYTES)
            self._channel.send(state.leader_id, request, now_ms)
            return
        last = self.log.last_offset_and_epoch()
        fetch = m.FetchRequest(self.cluster_id, self.node_id, self.epoch, last.offset, last.epoch,
                               self.config.fetch_max_wait_ms)
        self._channel.send(state.leader_id, fetch, now_ms, fetch_offset=last.offset)

    def _probe_for_leader(self, now_ms: int) -> None:
        """An observer without a leader asks a random voter; any answer names the leader it knows."""
        last = self.log.last_offset_and_epoch()
        voter = self._rng.choice(sorted(self.voters))
        fetch = m.FetchRequest(self.cluster_id, self.node_id, self.epoch, last.offset, last.epoch, 0)
        self._channel.send(voter, fetch, now_ms, fetch_offset=last.offset)
        self._retry_at_ms = now_ms + self.config.retry_backoff_ms
