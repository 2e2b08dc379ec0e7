"""DelayedFetch: a Fetch parked until enough data is available or its max wait passes (facts §5), and the read
it answers with."""

from kio.schema.errors import ErrorCode

from replog.log.errors import OffsetOutOfRangeError
from replog.log.offset_metadata import LogOffsetMetadata
from replog.protocol.fetch import FetchPartitionResult
from replog.server.completion import Completion

from .delayed_fetch_rules import (
    ParkedPartition,
    bytes_available,
    delayed_fetch_can_complete,
    parked_partition_bytes,
)
from .fetch_params import FetchParams, FetchPartitionParams
from .fetch_sessions import FetchSession
from .purgatory import DelayedOperation


def read_all(
    replica_manager, params: FetchParams, *, update_fetch_state: bool = True
) -> tuple[list[FetchPartitionResult], list[LogOffsetMetadata | None], int, bool]:
    """(results, where each partition's read started (None if it did not read), bytes read, whether to
    answer now: an error or a diverging epoch). A follower's position is recorded unless
    `update_fetch_state` is False (the re-read of a parked fetch)."""
    results, fetch_offsets, total, respond_now = [], [], 0, False
    for p in params.partitions:
        budget = params.max_bytes - total
        read = replica_manager.read_partition(
            p.topic, p.partition, p.fetch_offset, current_leader_epoch=p.current_leader_epoch,
            last_fetched_epoch=p.last_fetched_epoch, max_bytes=max(0, min(budget, p.max_bytes)),
            fetcher=p.fetcher(params.replica_id), min_one_batch=total == 0, update_fetch_state=update_fetch_state)
        file_slice = read.result.slice if read.result is not None else None
        # Kafka sends an empty record set, never null: librdkafka rejects a null one as malformed.
        result = FetchPartitionResult(p.partition, read.error_code, read.high_watermark, read.high_watermark,
                                      read.log_start_offset, records=file_slice if file_slice is not None else b"",
                                      diverging_epoch=read.diverging_epoch)
        total += file_slice.length if file_slice is not None else 0
        respond_now = respond_now or read.error_code != ErrorCode.none or read.diverging_epoch is not None
        results.append(result)
        fetch_offsets.append(read.result.fetch_offset_metadata if read.result is not None else None)
    return results, fetch_offsets, total, respond_now


class DelayedFetch(DelayedOperation):
    """Completes early on Kafka's conditions (facts §5) without reading data: leadership lost or partition
    gone (A-C), fenced epoch (E), fetch offset past the end or on an older segment (F), min_bytes of data
    available, counted from log positions (G), or a diverging epoch (H). Then it reads afresh."""

    def __init__(self, replica_manager, params: FetchParams, fetch_offsets: list[LogOffsetMetadata | None],
                 session: FetchSession | None = None, *, just_read: bool = False) -> None:
        super().__init__(params.max_wait_ms)
        assert len(fetch_offsets) == len(params.partitions)
        assert None not in fetch_offsets, "a partition that did not read answers at once, it never parks"
        self._replica_manager = replica_manager
        self._params = params
        self._from_follower = params.from_follower  # asked at every check of every partition
        self._fetch_offsets = fetch_offsets
        # A fetch session's quiet partitions were not read (fetch_sessions.py): the session tells this fetch
        # of each one that changes while it waits (take_in), and only then is it watched and checked.
        self._session = session
        if session is not None:
            session.waiters.add(self.take_in)
        self._shares: list[int] | None = None  # each partition's bytes at its last check (case G)
        self._accumulated = 0
        self._positions: dict[tuple[str, int], list[int]] | None = None  # built at the first wake-up
        # Built by the read that found too little (ReplicaManager.fetch_messages), in the same call: that read
        # has just checked leadership, epochs and divergence (cases A-E, H) and answered at once on any of
        # them, so the purgatory's first check only counts bytes (cases F, G).
        self._just_read = just_read
        self.future = Completion()  # the handler's encoding runs in the call that completes the fetch

    def take_in(self, p: FetchPartitionParams, position: LogOffsetMetadata) -> None:
        """A quiet partition of the session changed: it joins params.partitions, so the answer reads it too,
        and the purgatory's check of its key, which follows, counts its share."""
        key = (p.topic, p.partition)
        if self.completed or key in self.keys:
            return
        self._params.partitions.append(p)
        self._fetch_offsets.append(position)
        if self._shares is not None:
            self._shares.append(0)  # counted from nothing: try_complete_for counts it
        if self._positions is not None:
            self._positions.setdefault(key, []).append(len(self._params.partitions) - 1)
        self._replica_manager.fetch_purgatory.watch(self, key)

    def try_complete(self) -> bool:
        # Cached state only (see delayed_fetch_rules): a wake-up from an append cannot fail on the disk.
        # Each partition's bytes are kept, so a later wake-up re-counts only the partition it is for.
        if self._just_read:
            self._just_read = False
            return self._count_after_read()
        parked = [self._parked(p, fetch_offset)
                  for p, fetch_offset in zip(self._params.partitions, self._fetch_offsets, strict=True)]
        if delayed_fetch_can_complete(parked, self._params.min_bytes):
            return self.force_complete()
        self._shares = [parked_partition_bytes(partition) for partition in parked]  # none must answer now
        self._accumulated = sum(self._shares)
        return False

    def try_complete_for(self, key) -> bool:
        # Whatever changes a partition's share (an append, a HW move, a roll, leadership, a new epoch)
        # wakes its key, so the other partitions' shares stand: a HW move on each of 1,000 partitions
        # no longer re-checks all 1,000 each time. (A leader throttle lifting wakes nothing: a held-back
        # partition counts again at its next append, or the fetch answers at its max wait.)
        if self._shares is None:
            return self.try_complete()
        if self._positions is None:
            self._positions = {}
            for i, p in enumerate(self._params.partitions):
                self._positions.setdefault((p.topic, p.partition), []).append(i)
        for i in self._positions.get(key, ()):
            available = parked_partition_bytes(self._parked(self._params.partitions[i], self._fetch_offsets[i]))
            if available is None:
                return self.force_complete()
            self._accumulated += available - self._shares[i]
            self._shares[i] = available
        return self._accumulated >= self._params.min_bytes and self.force_complete()

    def _count_after_read(self) -> bool:
        """try_complete right after the read: each partition's share from the cached positions alone."""
        shares = []
        for p, fetch_offset in zip(self._params.partitions, self._fetch_offsets, strict=True):
            partition = self._replica_manager.get_partition(p.topic, p.partition)
            available = bytes_available(fetch_offset, partition.end_offset_metadata_for_fetch(self._from_follower),
                                        self._max_bytes(partition, p))
            if available is None:
                return self.force_complete()
            shares.append(available)
        self._shares, self._accumulated = shares, sum(shares)
        return self._accumulated >= self._params.min_bytes and self.force_complete()

    def _max_bytes(self, partition, p: FetchPartitionParams) -> int:
        # Bytes the leader throttle holds back do not count towards min_bytes (Kafka's DelayedFetch),
        # or a throttled follower's fetch would answer empty at once, over and over.
        if self._from_follower and self._replica_manager.holds_back(partition, self._params.replica_id):
            return 0
        return p.max_bytes

    def _parked(self, p: FetchPartitionParams, fetch_offset: LogOffsetMetadata) -> ParkedPartition:
        partition = self._replica_manager.get_partition(p.topic, p.partition)
        if partition is None:  # deleted: the fresh read answers UNKNOWN_TOPIC_OR_PARTITION
            return ParkedPartition(leads=False, epoch_matches=False, diverges=False, fetch_offset=fetch_offset,
                                   end_offset=fetch_offset, max_bytes=p.max_bytes)
        return ParkedPartition(
            leads=partition.is_leader,
            epoch_matches=partition.check_leader_epoch(p.current_leader_epoch) == ErrorCode.none,
            diverges=self._diverges(partition, p),
            fetch_offset=fetch_offset,
            end_offset=partition.end_offset_metadata_for_fetch(self._from_follower),
            max_bytes=self._max_bytes(partition, p),
        )

    @staticmethod
    def _diverges(partition, p: FetchPartitionParams) -> bool:
        try:
            return partition.diverging_epoch(p.fetch_offset, p.last_fetched_epoch) is not None
        except OffsetOutOfRangeError:
            return True

    def on_complete(self) -> None:
        if self._session is not None:
            self._session.waiters.discard(self.take_in)
        # The follower's position was recorded when the fetch arrived (Kafka's DelayedFetch.onComplete).
        results, _, _, _ = read_all(self._replica_manager, self._params, update_fetch_state=False)
        if not self.future.done():
            self.future.set_result(results)
