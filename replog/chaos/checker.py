"""A Jepsen-style queue checker for a replicated log, pure and sans-IO.

It takes what the producers attempted, what the brokers acknowledged (value -> (partition, offset) from
delivery reports), which writes failed and with what error, what a consumer read back from every partition
after healing (offset, value in read order), and what another consumer read while the faults went on, and
counts each class of anomaly:

- lost: an acknowledged value that was never read;
- duplicated: a value read at more than one (partition, offset);
- divergent offset: one (partition, offset) with two different values, from reads or acknowledgements
  (an acknowledged value read somewhere else than where it was acknowledged is one too);
- non-monotonic: a partition read whose offsets do not strictly increase;
- unexpected: a value read that no producer attempted;
- unstable read: a value read during the faults that the final read does not hold at the same offset
  (a consumer saw committed data that was later lost or replaced), or a read during the faults whose
  offsets did not strictly increase;
- failed write read: a value whose write failed definitely (DEFINITE_FAILURES: the broker refused it
  before appending, and the client does not retry such errors) and that was read all the same.

Other failed writes (timed out, or a retriable error at the last of several attempts) and writes never
reported are indeterminate: they may or may not be read, as in Jepsen.
"""

from collections import defaultdict
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field

LOST = "lost"
DUPLICATED = "duplicated"
DIVERGENT_OFFSET = "divergent offset"
NON_MONOTONIC = "non-monotonic offsets"
UNEXPECTED = "unexpected"
UNSTABLE_READ = "unstable read"
FAILED_WRITE_READ = "failed write read"
ANOMALY_CLASSES = (LOST, DUPLICATED, DIVERGENT_OFFSET, NON_MONOTONIC, UNEXPECTED, UNSTABLE_READ,
                   FAILED_WRITE_READ)
# librdkafka error names (KafkaError.name()) that mean the record was never appended: rejected as invalid or
# unauthorised before the append (Kafka's ReplicaManager.appendRecords validates first), or never sent.
# Retriable errors (NOT_ENOUGH_REPLICAS, ...) are indeterminate: an earlier attempt may have been appended.
DEFINITE_FAILURES = frozenset({
    "MSG_SIZE_TOO_LARGE", "_MSG_SIZE_TOO_LARGE", "INVALID_RECORD", "CORRUPT_MESSAGE", "RECORD_LIST_TOO_LARGE",
    "INVALID_REQUIRED_ACKS", "TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED", "_UNKNOWN_TOPIC",
    "_UNKNOWN_PARTITION", "_INVALID_ARG",
})
MAX_EXAMPLES = 5  # per class: enough to start an investigation, short enough to print


@dataclass(frozen=True)
class History:
    attempted: Set[str]
    # value -> (partition, offset); offset None when the client acknowledged without one: librdkafka's
    # "implicit acks" (librdkafka PR 2081) report a request that timed out as delivered once a later request
    # of the same idempotent producer succeeds, which the sequence checks make sure it could not have without.
    acknowledged: Mapping[str, tuple[int, int | None]]
    read: Mapping[int, Sequence[tuple[int, str]]]  # partition -> (offset, value) in the order read
    failed: Mapping[str, str] = field(default_factory=dict)  # value -> the error its write failed with
    read_during_faults: Mapping[int, Sequence[tuple[int, str]]] = field(default_factory=dict)

    def definitely_failed(self) -> set[str]:
        return {value for value, error in self.failed.items() if error in DEFINITE_FAILURES}


@dataclass
class CheckResult:
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ANOMALY_CLASSES, 0))
    examples: dict[str, list[str]] = field(default_factory=lambda: {c: [] for c in ANOMALY_CLASSES})

    @property
    def ok(self) -> bool:
        return not any(self.counts.values())

    def add(self, anomaly: str, example: str) -> None:
        self.counts[anomaly] += 1
        if len(self.examples[anomaly]) < MAX_EXAMPLES:
            self.examples[anomaly].append(example)


def check(history: History) -> CheckResult:
    result = CheckResult()
    positions: dict[str, set[tuple[int, int]]] = defaultdict(set)  # value -> where it was read
    values_at: dict[tuple[int, int], set[str]] = defaultdict(set)  # (partition, offset) -> values seen there
    for partition, records in sorted(history.read.items()):
        previous = None
        for offset, value in records:
            if previous is not None and offset <= previous:
                result.add(NON_MONOTONIC, f"partition {partition}: offset {offset} read after {previous}")
            previous = offset
            positions[value].add((partition, offset))
            values_at[partition, offset].add(value)
            if value not in history.attempted:
                result.add(UNEXPECTED, f"{value!r} at {partition}/{offset}")
    for value, position in history.acknowledged.items():
        if position[1] is not None:
            values_at[position].add(value)
        if value not in positions:
            result.add(LOST, f"{value!r} acknowledged at {position[0]}/{position[1]}")
    for value, where in sorted(positions.items()):
        if len(where) > 1:
            result.add(DUPLICATED, f"{value!r} at {', '.join(f'{p}/{o}' for p, o in sorted(where))}")
    for (partition, offset), values in sorted(values_at.items()):
        if len(values) > 1:
            result.add(DIVERGENT_OFFSET, f"{partition}/{offset} holds {sorted(values)}")
    for value in sorted(history.definitely_failed() & positions.keys()):
        result.add(FAILED_WRITE_READ, f"{value!r} failed with {history.failed[value]} but is at "
                   + ", ".join(f"{p}/{o}" for p, o in sorted(positions[value])))
    check_reads_during_faults(history, result)
    return result


def check_reads_during_faults(history: History, result: CheckResult) -> None:
    """What was read while the faults went on must be at the same offsets in the final read."""
    final_values_at: dict[tuple[int, int], set[str]] = defaultdict(set)
    for partition, records in history.read.items():
        for offset, value in records:
            final_values_at[partition, offset].add(value)
    for partition, records in sorted(history.read_during_faults.items()):
        previous = None
        for offset, value in records:
            if previous is not None and offset <= previous:
                result.add(UNSTABLE_READ, f"during the faults, partition {partition}: offset {offset} read "
                           f"after {previous}")
            previous = offset
            if value not in history.attempted:
                result.add(UNEXPECTED, f"{value!r} at {partition}/{offset}, read during the faults")
            final = final_values_at.get((partition, offset), set())
            if value not in final:
                result.add(UNSTABLE_READ, f"{value!r} read at {partition}/{offset} during the faults; at the end "
                           + (f"that offset holds {sorted(final)}" if final else "nothing is there"))
