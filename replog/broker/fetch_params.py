"""What a Fetch asks for, decoded: who fetches, how long to wait, how many bytes, which partitions."""

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FollowerFetch:
    """Who is fetching: a follower broker (replica_id >= 0) reads to the LEO and reports its progress."""

    replica_id: int
    log_start_offset: int = -1

    @property
    def is_follower(self) -> bool:
        return self.replica_id >= 0


CONSUMER = FollowerFetch(-1)


@dataclass(slots=True)
class FetchPartitionParams:
    topic: str
    partition: int
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int
    max_bytes: int

    def fetcher(self, replica_id: int) -> FollowerFetch:
        return FollowerFetch(replica_id, self.log_start_offset) if replica_id >= 0 else CONSUMER


@dataclass(slots=True)
class FetchParams:
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    partitions: list[FetchPartitionParams]

    @property
    def from_follower(self) -> bool:
        return self.replica_id >= 0
