"""The scenario of a synthetic metrics dump (replog/analytics/synthetic.py): the cluster's shape and load, and
when each broker restart and follower stall happens."""

from dataclasses import dataclass

CONTROLLER_ID = 3000
SESSION_TIMEOUT_MS = 6_500
REPLICA_LAG_TIME_MS = 10_000
STALL_MS = 30_000
STALL_AFTER_KILL_MS = 1_000
CATCH_UP_BASE_MS, CATCH_UP_STEP_MS = 1_500, 250
DEFAULT_START_MS = 1_700_000_000_000  # a multiple of any whole number of seconds up to 100 s
DEFAULT_MAX_FILE_BYTES = 64 << 20  # metrics.dump.max.bytes


@dataclass(frozen=True)
class Restart:
    broker_id: int
    killed_ms: int
    fenced_ms: int
    started_ms: int


@dataclass(frozen=True)
class Stall:
    partition_index: int
    follower_id: int
    begins_ms: int
    shrinks_ms: int
    ends_ms: int


@dataclass(frozen=True)
class Scenario:
    brokers: int
    partitions: int
    seconds: int
    interval_ms: int = 1000
    topics: int = 1
    replication_factor: int = 3
    min_isr: int = 2
    bytes_per_second: int = 10_000  # per partition
    record_bytes: int = 100
    restarts: int = 1
    stalls: int = 1
    downtime_s: int = 20
    seed: int = 0
    start_ms: int = DEFAULT_START_MS
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES

    def __post_init__(self) -> None:
        if not 1 <= self.replication_factor <= self.brokers:
            raise ValueError("the replication factor must be between 1 and the number of brokers")
        per_tick = self.bytes_per_second * self.interval_ms
        if per_tick % (1000 * self.record_bytes) or per_tick == 0:
            raise ValueError("a tick must append a whole, positive number of records")
        if self.downtime_s * 1000 <= SESSION_TIMEOUT_MS:
            raise ValueError(f"a restarted broker must stay down longer than {SESSION_TIMEOUT_MS} ms")
        settle_ms = max(
            self.downtime_s * 1000 + CATCH_UP_BASE_MS + 7 * CATCH_UP_STEP_MS, STALL_AFTER_KILL_MS + STALL_MS
        )
        if self.restarts and self.seconds * 1000 // (self.restarts + 1) <= settle_ms:
            raise ValueError(
                "restarts this close overlap: fewer restarts, more seconds or a shorter downtime"
            )

    @property
    def records_per_tick(self) -> int:
        return self.bytes_per_second * self.interval_ms // (1000 * self.record_bytes)

    @property
    def end_ms(self) -> int:
        return self.start_ms + self.seconds * 1000

    def topic(self, k: int) -> str:
        return f"topic-{k % self.topics}"

    def partition_number(self, k: int) -> int:
        return k // self.topics

    def replicas(self, k: int) -> list[int]:
        return [(k + j) % self.brokers + 1 for j in range(self.replication_factor)]

    def catch_up_ms(self, k: int) -> int:
        """How long after its restart a broker is back in partition k's ISR."""
        return CATCH_UP_BASE_MS + CATCH_UP_STEP_MS * (k % 8)

    def _tick_at_or_before(self, ms: int) -> int:
        return ms - (ms - self.start_ms) % self.interval_ms

    def restart_schedule(self) -> list[Restart]:
        schedule = []
        for r in range(self.restarts):
            killed = self._tick_at_or_before(
                self.start_ms + (r + 1) * self.seconds * 1000 // (self.restarts + 1)
            )
            schedule.append(
                Restart(
                    r % self.brokers + 1, killed, killed + SESSION_TIMEOUT_MS, killed + self.downtime_s * 1000
                )
            )
        return schedule

    def stall_schedule(self) -> list[Stall]:
        if self.replication_factor < 2:
            return []
        restarts = self.restart_schedule()
        schedule = []
        for s in range(self.stalls):
            overlapping = s < len(restarts) and self.replication_factor >= 3
            if overlapping:  # a partition the restarted broker follows (second replica); stall its third
                restart = restarts[s]
                k = (restart.broker_id - 2) % self.brokers
                follower, begins = self.replicas(k)[2], restart.killed_ms + STALL_AFTER_KILL_MS
            else:
                k = (7 * s) % self.partitions
                follower = self.replicas(k)[1]
                begins = self.start_ms + (s + 1) * self.seconds * 1000 // (self.stalls + 1)
            if k < self.partitions:
                schedule.append(Stall(k, follower, begins, begins + REPLICA_LAG_TIME_MS, begins + STALL_MS))
        return schedule
