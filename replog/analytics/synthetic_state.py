"""The state of the simulated cluster behind a synthetic metrics dump: each partition's replicas, leader, ISR
and log end offsets, and each broker process's counters since it started."""

from dataclasses import dataclass, field


@dataclass
class PartitionState:
    k: int
    replicas: list[int]
    leader: int
    isr: list[int]
    leader_epoch: int = 0
    partition_epoch: int = 0
    leo: dict[int, int] = field(default_factory=dict)  # log end offset of every replica
    last_caught_up_ms: dict[int, int] = field(default_factory=dict)
    last_fetch_ms: dict[int, int] = field(default_factory=dict)


class BrokerProcess:
    """A broker's counters since its process started."""

    COUNTERS = (
        "bytes_in_total",
        "messages_in_total",
        "bytes_out_total",
        "replication_bytes_in_total",
        "replication_bytes_out_total",
        "isr_shrinks_total",
        "isr_expands_total",
    )

    def __init__(self, broker_id: int, started_ms: int):
        self.broker_id = broker_id
        self.started_ms = started_ms
        self.totals = dict.fromkeys(self.COUNTERS, 0)
        self.per_partition: dict[int, list[int]] = {}  # k -> [bytes in, messages in, replication bytes in]

    def partition_counters(self, k: int) -> list[int]:
        return self.per_partition.setdefault(k, [0, 0, 0])
