"""One follower fetch loop per (leader broker, fetcher id): Kafka's AbstractFetcherThread as an asyncio task.

Each round truncates the partitions that need it (OffsetForLeaderEpoch), then sends one Fetch for the
partitions ready to fetch and executes what `decisions` says about each partition of the answer.

Everything runs on one event loop, so the only interleavings are at awaits. After every await an answer is
checked against the partition's current state (`decisions.is_current`) and applied to the log with no await
in between: the check and the mutation are atomic. That holds for the append too: its write runs inline, on
the loop (follower_append_steps.py says why not in a thread).

A round's work follows what changed, not how many partitions are followed: each round re-plans only the
partitions whose state changed (fetch_plan.py), and in a fetch session (KIP-227) looks only at the partitions
the leader answered, those with news.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Iterable

from replog.fetcher import decisions
from replog.fetcher.config import FetcherConfig, FetchObserver, InitialFetchState
from replog.fetcher.fetch_plan import FetchPlan, FollowedPartition
from replog.fetcher.fetch_state import PartitionFetchState
from replog.fetcher.follower_append_steps import PARTITION_FAILURES, FollowerAppendSteps
from replog.fetcher.leader_endpoint import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    LeaderEndpoint,
    LeaderEndpointError,
)
from replog.fetcher.replication_quota import ReplicationQuota
from replog.log.partition_log import TopicPartition
from replog.protocol.fetch import FetchPartitionResult
from replog.protocol.records import CorruptRecordError

logger = logging.getLogger(__name__)


class ReplicaFetcher(FollowerAppendSteps):
    def __init__(
        self,
        leader_id: int,
        fetcher_id: int,
        endpoint: LeaderEndpoint,
        config: FetcherConfig,
        clock_ms: Callable[[], int],
        on_fetched: FetchObserver | None = None,
        quota: ReplicationQuota | None = None,
    ) -> None:
        assert 0 <= fetcher_id < config.num_fetchers
        self.leader_id = leader_id
        self.fetcher_id = fetcher_id
        self._endpoint = endpoint
        self._config = config
        self._clock_ms = clock_ms
        self._on_fetched = on_fetched
        self._quota = quota  # the follower-side replication throttle (None: none)
        self._partitions: dict[TopicPartition, FollowedPartition] = {}
        self._plan = FetchPlan(config.partition_max_bytes)
        self._failed: set[TopicPartition] = set()
        self._generations = itertools.count()
        self._changed = asyncio.Event()
        # The rounds in flight, if any: a partition that starts (or starts over) meanwhile cancels them rather
        # than wait them out (see _rounds_unless_started).
        self._round: asyncio.Task | None = None
        self._stopping = False
        self._task: asyncio.Task | None = None

    def __repr__(self) -> str:
        return f"<ReplicaFetcher leader={self.leader_id} id={self.fetcher_id} partitions={len(self._partitions)}>"

    # ----------------------------------------------------------- partitions

    def add_partitions(self, partitions: dict[TopicPartition, InitialFetchState]) -> None:
        """Follow these partitions. One already followed at the same leader epoch keeps its state; otherwise
        it starts over from the initial state (Kafka's AbstractFetcherThread.addPartitions)."""
        for tp, initial in partitions.items():
            assert initial.leader.broker_id == self.leader_id, (tp, initial.leader, self.leader_id)
            assert initial.log.topic_partition == tp, (tp, initial.log)
            current = self._partitions.get(tp)
            if (
                current is not None
                and current.log is initial.log
                and current.state.current_leader_epoch == initial.current_leader_epoch
            ):
                continue
            log = initial.log
            state = decisions.initial_fetch_state(
                initial.topic_id,
                initial.current_leader_epoch,
                log_end_offset=log.log_end_offset,
                high_watermark=log.high_watermark,
                latest_epoch=log.epoch_cache.latest_epoch,
                generation=next(self._generations),
            )
            self._partitions[tp] = FollowedPartition(tp, state, log, self._plan)
            self._failed.discard(tp)
            if self._round is not None:
                self._round.cancel()
        self._changed.set()

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, PartitionFetchState]:
        """Stop following; returns the states of those that were followed. An answer in flight is dropped."""
        removed = {}
        for tp in tps:
            followed = self._partitions.pop(tp, None)
            if followed is not None:
                removed[tp] = followed.state
                self._plan.mark(tp)
            self._failed.discard(tp)
        return removed

    @property
    def partition_count(self) -> int:
        return len(self._partitions)

    @property
    def partitions_planned(self) -> int:
        """How many partitions the rounds have re-planned so far: the per-round work that scales."""
        return self._plan.partitions_planned

    @property
    def failed_partitions(self) -> frozenset[TopicPartition]:
        """Partitions this fetcher gave up on; they stay out until added again."""
        return frozenset(self._failed)

    def fetch_state(self, tp: TopicPartition) -> PartitionFetchState | None:
        followed = self._partitions.get(tp)
        return None if followed is None else followed.state

    # ------------------------------------------------------------ lifecycle

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        assert self._task is None, "a fetcher starts once"
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"replica-fetcher-{self.leader_id}-{self.fetcher_id}"
        )

    async def stop(self) -> None:
        """Cancel the loop and close the endpoint. A loop that died of a bug re-raises its error here."""
        task = self._task
        # The flag ends the loop even if a cancellation is swallowed: on Python 3.11, asyncio.wait_for (used
        # by the connection) returns a result that arrives together with the cancel and drops the cancel.
        self._stopping = True
        self._changed.set()
        try:
            if task is not None and not task.done():
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    if not task.cancelled():
                        raise  # our caller is being cancelled, not just the fetcher
            elif task is not None and not task.cancelled():
                task.result()
        finally:
            await self._endpoint.close()

    async def _run(self) -> None:
        try:
            while not self._stopping:
                # Cleared before looking at any state: a change made while a round awaits sets it again, so
                # the idle wait below cannot miss it.
                self._changed.clear()
                if not await self._rounds_unless_started():
                    await self._wait_for_work()
        except Exception:
            logger.exception("%r stopped by an unexpected error", self)
            raise

    async def _rounds_unless_started(self) -> bool:
        """do_work() rounds until one finds nothing to do, abandoned if a partition starts (or starts over)
        before they end; returns whether they were abandoned (the next round then follows at once).

        A fetch with nothing new to read parks at the leader for up to replica.fetch.wait.max.ms, and the
        leader answers a connection's requests in order, so a partition added meanwhile (this broker just
        became its follower: a failover, a reassignment) would wait that long for its first fetch, and the
        acks=all produces on its new leader with it. Kafka's fetcher thread waits it out; here the round is
        abandoned and the connection closed (the next request opens another). A round applies an answer only
        right after it arrives, with no await in between, so what is abandoned is an unanswered request: the
        next round asks again from the same state.

        One task runs the rounds back to back, not one task per round: a task starts a loop turn after it is
        made and its awaiter hears of its end a turn after that, two turns between a follower's append and
        its next fetch, the RF=3 acks=all path (docs/profiles/rf3.md)."""
        self._round = work = asyncio.ensure_future(self._rounds())
        try:
            await work
            return False
        except asyncio.CancelledError:
            if asyncio.current_task().cancelling():  # stop() cancels this task, and the rounds with it
                raise
        finally:
            self._round = None
        # Only the rounds were cancelled, and they have ended: their request is off the connection before
        # that closes.
        logger.info("%r: request abandoned: a partition started while it waited at the leader", self)
        await self._endpoint.close()
        return True

    async def _rounds(self) -> None:
        while await self.do_work() and not self._stopping:
            # As in _run: cleared before the next round looks at any state, so the idle wait that follows
            # the last round cannot miss a change made meanwhile.
            self._changed.clear()

    async def do_work(self) -> bool:
        """One round (Kafka's AbstractFetcherThread.doWork): truncate the partitions that need it, then fetch
        for those ready to. Returns whether there was anything to do. The run loop repeats it until stopped;
        a deterministic simulation steps it by hand."""
        truncated = await self._truncate_round()
        fetched = await self._fetch_round()
        return truncated or fetched

    async def _wait_for_work(self) -> None:
        """Sleep until a partition is added or updated, or the earliest back-off ends; no polling.

        Every partition counts, also one whose back-off ended since the rounds looked at the clock: left
        out, it would be ready with nothing left to wake the loop, which then slept until the next
        metadata change (a follower out of the ISR for good; found by `replog chaos --nemesis partition`)."""
        now = self._clock_ms()
        self._plan.update(now, self._partitions)
        if self._plan.requests or self._plan.truncating:
            return  # ready since the round looked
        deadline = self._plan.next_deadline_ms
        timeout = max(0, deadline - now) / 1000 if deadline is not None else None
        try:
            async with asyncio.timeout(timeout):  # unlike wait_for, never swallows a cancellation
                await self._changed.wait()
        except TimeoutError:
            pass

    # ------------------------------------------------------------ truncation

    async def _truncate_round(self) -> bool:
        """Kafka's maybeTruncate. Returns whether any partition was due to truncate."""
        now = self._clock_ms()
        sent: dict[TopicPartition, PartitionFetchState] = {}
        queries: dict[TopicPartition, tuple[int, int]] = {}
        truncated_locally = False
        self._plan.update(now, self._partitions)
        for tp in sorted(self._plan.truncating):
            followed = self._partitions[tp]
            step = decisions.truncating_step(followed.state, followed.log.epoch_cache.latest_epoch)
            if isinstance(step, decisions.OffsetTruncation):
                self._truncate(tp, followed, step)
                truncated_locally = True
            else:
                sent[tp] = followed.state
                queries[tp] = (followed.state.current_leader_epoch, step.epoch)
        if not queries:
            return truncated_locally
        try:
            answers = await self._endpoint.offsets_for_leader_epoch(queries)
        except LeaderEndpointError as exc:
            logger.warning("%r: OffsetForLeaderEpoch failed, backing off: %s", self, exc)
            self._back_off_all()
            return True
        for tp, sent_state in sent.items():
            answer = answers.get(tp)
            if answer is None:
                self._back_off_if_current(tp, sent_state, "OffsetForLeaderEpoch answer lacks it")
                continue
            followed = self._partitions.get(tp)
            action = decisions.on_epoch_answer(
                sent_state,
                followed.state if followed else None,
                answer.error_code,
                answer.leader_epoch,
                answer.end_offset,
            )
            self._execute(tp, action)
        return True

    # ------------------------------------------------------------------ fetch

    async def _fetch_round(self) -> bool:
        """Kafka's maybeFetch + processFetchRequest. Returns whether a fetch was sent."""
        now = self._clock_ms()
        plan = self._plan
        plan.update(now, self._partitions)
        # Only while the throttle's rate is over its bound can a partition be held back: asked once a round,
        # not per partition planned (333 a round per leader at 1,000 partitions RF=3, docs/profiles/
        # partition-scaling.md, session 13).
        if self._quota is not None and self._quota.is_quota_exceeded():
            for tp in [tp for tp in plan.requests if self._throttled_out(tp, self._partitions[tp])]:
                # Kafka leaves it out and waits replica.fetch.backoff.ms; here no longer than until the rate
                # is back under the bound, or a partition alone in its fetcher replicates well below the rate.
                followed = self._partitions[tp]
                followed.state = followed.state.delayed(now, min(self._config.backoff_ms,
                                                                 self._quota.ms_until_under()))
                plan.leave_out(tp)
        if not plan.requests:
            return False
        # The states the request is built from, as sent: a partition's state may change meanwhile, but the
        # plan's record of it only at the next update (FetchPlan.take_request).
        sent, updates = plan.states, plan.updates
        try:
            results = await self._endpoint.fetch(plan.take_request())
        except LeaderEndpointError as exc:
            logger.warning("%r: fetch failed, backing off: %s", self, exc)
            self._back_off_all()
            return True
        assert plan.updates == updates, "the plan changed while its fetch was in flight"
        out_of_range = []
        # Only the partitions answered: in a fetch session (KIP-227) one without news is left out, and its
        # state stays as it is (it is fetched again).
        for tp, result in results.items():
            sent_state = sent.get(tp)
            if sent_state is None:
                continue
            action = self._decide_fetch_result(tp, sent_state, result)
            if isinstance(action, decisions.ResolveOutOfRange):
                out_of_range.append((tp, sent_state))
            else:
                self._execute(tp, action)
        # Resolving takes ListOffsets round trips; each partition is re-checked after them.
        for tp, sent_state in out_of_range:
            await self._resolve_out_of_range(tp, sent_state)
        return True

    def _throttled_out(self, tp: TopicPartition, followed: FollowedPartition) -> bool:
        return self._quota is not None and self._quota.throttles(*tp, in_sync=followed.in_sync)

    def _decide_fetch_result(
        self, tp: TopicPartition, sent: PartitionFetchState, result: FetchPartitionResult
    ) -> decisions.PartitionAction:
        followed = self._partitions.get(tp)
        try:
            return decisions.on_fetch_result(sent, followed.state if followed else None, result)
        except CorruptRecordError as exc:  # a batch header that does not parse
            logger.warning("%r: %s: corrupt fetched data: %s", self, tp, exc)
            return decisions.BackOff(int(exc.error_code))

    async def _resolve_out_of_range(self, tp: TopicPartition, sent: PartitionFetchState) -> None:
        """Kafka's handleOutOfRangeError / fetchOffsetAndTruncate, with the leader's offsets from ListOffsets.

        Earliest is asked first: the leader's log start can only have been at or below its end at that
        time, and its end only grows while it leads.
        """
        try:
            earliest = await self._endpoint.list_offset(tp, sent.current_leader_epoch, EARLIEST_TIMESTAMP)
            latest = None
            if earliest.error_code == 0:
                latest = await self._endpoint.list_offset(tp, sent.current_leader_epoch, LATEST_TIMESTAMP)
        except LeaderEndpointError as exc:
            self._back_off_if_current(tp, sent, f"ListOffsets failed: {exc}")
            return
        followed = self._partitions.get(tp)
        if not decisions.is_current(sent, followed.state if followed else None):
            return
        for answer in (earliest, latest):
            if answer is not None and answer.error_code != 0:
                self._execute(tp, decisions.on_error(answer.error_code))
                return
        assert latest is not None and followed is not None
        log = followed.log
        resolution = decisions.resolve_out_of_range(
            log_end_offset=log.log_end_offset,
            leader_log_end_offset=latest.offset,
            leader_log_start_offset=earliest.offset,
        )
        logger.info("%r: %s: fetch offset %d out of range: %s", self, tp, sent.fetch_offset, resolution)
        try:
            match resolution:
                case decisions.TruncateTo(offset):
                    log.truncate_to(offset)
                case decisions.TruncateFullyAndStartAt(offset):
                    log.truncate_fully_and_start_at(offset)
                case decisions.FetchFrom(offset):
                    assert offset == log.log_end_offset, (offset, log)
                case decisions.BackOff():
                    self._execute(tp, resolution)
                    return
        except PARTITION_FAILURES as exc:
            self._fail(tp, f"out-of-range truncation failed: {exc!r}")
            return
        latest_epoch = log.epoch_cache.latest_epoch
        state = followed.state.fetching_from(log.log_end_offset, None if latest_epoch < 0 else latest_epoch)
        if state == followed.state:
            # Nothing changed, so an immediate fetch would likely get the same answer: bound the retries.
            state = state.delayed(self._clock_ms(), self._config.backoff_ms)
        followed.state = state

    # ----------------------------------------------------------------- actions

    def _execute(self, tp: TopicPartition, action: decisions.PartitionAction) -> None:
        """Apply one decision; runs with no await, right after the decision was checked against the state."""
        followed = self._partitions.get(tp)
        match action:
            case decisions.Drop():
                return
            case decisions.BackOff(error_code):
                logger.info("%r: %s: error %d, backing off", self, tp, error_code)
                self._back_off(followed)
            case decisions.Fail(error_code):
                self._fail(tp, f"error {error_code}")
            case decisions.Diverged():
                assert followed is not None
                log = followed.log
                truncation = decisions.truncation_for(
                    action,
                    local_epoch_end=log.epoch_cache.end_offset_for(action.leader_epoch, log.log_end_offset),
                    log_end_offset=log.log_end_offset,
                    fetch_offset=followed.state.fetch_offset,
                )
                self._truncate(tp, followed, truncation)
            case decisions.Append():
                assert followed is not None
                self._append(tp, followed, action)
            case _:
                raise AssertionError(f"{tp}: cannot execute {action!r} here")

    def _truncate(
        self, tp: TopicPartition, followed: FollowedPartition, truncation: decisions.OffsetTruncation
    ) -> None:
        log = followed.log
        logger.info("%r: %s: truncating at LEO %d: %s", self, tp, log.log_end_offset, truncation)
        if truncation.offset < log.high_watermark:
            logger.warning(
                "%r: %s: truncating to %d, below the HW %d", self, tp, truncation.offset, log.high_watermark
            )
        try:
            log.truncate_to(truncation.offset)
        except PARTITION_FAILURES as exc:
            self._fail(tp, f"truncation to {truncation.offset} failed: {exc!r}")
            return
        followed.state = decisions.state_after_truncation(
            followed.state,
            truncation,
            log_end_offset=log.log_end_offset,
            latest_epoch=log.epoch_cache.latest_epoch,
        )

    def _fail(self, tp: TopicPartition, reason: str) -> None:
        logger.warning("%r: %s: stops fetching until it is added again: %s", self, tp, reason)
        self._partitions.pop(tp, None)
        self._plan.mark(tp)  # out of the next request
        self._failed.add(tp)

    def _back_off(self, followed: FollowedPartition | None, now_ms: int | None = None) -> None:
        if followed is not None:
            now_ms = self._clock_ms() if now_ms is None else now_ms
            followed.state = followed.state.delayed(now_ms, self._config.backoff_ms)

    def _back_off_if_current(self, tp: TopicPartition, sent: PartitionFetchState, reason: str) -> None:
        followed = self._partitions.get(tp)
        if decisions.is_current(sent, followed.state if followed else None):
            logger.info("%r: %s: %s, backing off", self, tp, reason)
            self._back_off(followed)

    def _back_off_all(self) -> None:
        # Kafka backs off every partition of the fetcher when a request fails as a whole.
        now = self._clock_ms()  # one deadline for all, so they resume in one request
        for followed in self._partitions.values():
            self._back_off(followed, now)
