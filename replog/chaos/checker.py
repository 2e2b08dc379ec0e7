"""A Jepsen-style queue checker for a replicated log, pure and sans-IO.

It takes what the producers attempted, what the brokers acknowledged (value -> (partition, offset) from
delivery reports) and what a consumer read back from every partition (offset, value in read order), and
counts each class of anomaly:

- lost: an acknowledged value that was never read;
- duplicated: a value read at more than one (partition, offset);
- divergent offset: one (partition, offset) with two different values, from reads or acknowledgements
  (an acknowledged value read somewhere else than where it was acknowledged is one too);
- non-monotonic: a partition read whose offsets do not strictly increase;
- unexpected: a value read that no producer attempted.

Attempted but unacknowledged values may or may not be read (their outcome is unknown), as in Jepsen.
"""

from collections import defaultdict
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field

LOST = "lost"
DUPLICATED = "duplicated"
DIVERGENT_OFFSET = "divergent offset"
NON_MONOTONIC = "non-monotonic offsets"
UNEXPECTED = "unexpected"
ANOMALY_CLASSES = (LOST, DUPLICATED, DIVERGENT_OFFSET, NON_MONOTONIC, UNEXPECTED)
MAX_EXAMPLES = 5  # per class: enough to start an investigation, short enough to print


@dataclass(frozen=True)
class History:
    attempted: Set[str]
    acknowledged: Mapping[str, tuple[int, int]]  # value -> (partition, offset)
    read: Mapping[int, Sequence[tuple[int, str]]]  # partition -> (offset, value) in the order read


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
        values_at[position].add(value)
        if value not in positions:
            result.add(LOST, f"{value!r} acknowledged at {position[0]}/{position[1]}")
    for value, where in sorted(positions.items()):
        if len(where) > 1:
            result.add(DUPLICATED, f"{value!r} at {', '.join(f'{p}/{o}' for p, o in sorted(where))}")
    for (partition, offset), values in sorted(values_at.items()):
        if len(values) > 1:
            result.add(DIVERGENT_OFFSET, f"{partition}/{offset} holds {sorted(values)}")
    return result
