"""A consumer group's offset reset, as kafka-consumer-groups --reset-offsets computes it: which partitions
(--topic T, T:0,1 or --all-topics), where each goes (earliest, latest, an offset, a shift of the committed
offset, the first record at or after a time), clamped into [log start, log end] with a warning, as Kafka's
checkOffsetsRange does. The parsing and clamping are pure; plan_reset asks the brokers through a Consumer."""

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from .consumer import Consumer
from .consumer_records import TopicPartition

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MILLIS = {"D": 86_400_000, "H": 3_600_000, "M": 60_000}
# java.time.Duration.parse's grammar: PnDTnHnMn.nS, each part optional and signed, a sign before the P too.
DURATION = re.compile(
    r"(?P<sign>[-+]?)P(?:(?P<D>[-+]?\d+)D)?"
    r"(?:T(?:(?P<H>[-+]?\d+)H)?(?:(?P<M>[-+]?\d+)M)?(?:(?P<S>[-+]?\d+(?:[.,]\d{1,9})?)S)?)?",
    re.IGNORECASE,
)


class ResetTo(StrEnum):
    EARLIEST = "earliest"
    LATEST = "latest"
    OFFSET = "offset"  # value: the offset, for every partition
    SHIFT = "shift"  # value: added to each partition's committed offset
    TIMESTAMP = "timestamp"  # value: epoch milliseconds (--to-datetime, --by-duration)


@dataclass(frozen=True, slots=True)
class ResetSpec:
    to: ResetTo
    value: int = 0


def parse_duration_ms(text: str) -> int:
    """ISO-8601 duration as java.time.Duration.parse reads it (kafka-consumer-groups --by-duration), in ms."""
    match = DURATION.fullmatch(text.strip())
    has_time_part = match is not None and any(match[unit] for unit in ("H", "M", "S"))
    if match is None or not (match["D"] or has_time_part) or (text.upper().rstrip().endswith("T")):
        raise ValueError(f"--by-duration needs an ISO-8601 duration such as PT1H30M or P1DT2H, got {text!r}")
    total = sum(int(match[unit]) * ms for unit, ms in MILLIS.items() if match[unit])
    if match["S"]:
        total += round(float(match["S"].replace(",", ".")) * 1000)
    return -total if match["sign"] == "-" else total


def parse_datetime_ms(text: str) -> int:
    """kafka-consumer-groups --to-datetime: 'YYYY-MM-DDTHH:mm:SS.sss', with an optional zone (Z, +hh:mm);
    without one, the local time zone, as Kafka's Utils.getDateTime reads it."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError as e:
        raise ValueError(f"--to-datetime needs YYYY-MM-DDTHH:mm:SS.sss with an optional zone, got {text!r}") from e
    if moment.tzinfo is None:
        moment = moment.astimezone()  # a naive time is local time
    return (moment - EPOCH) // timedelta(milliseconds=1)  # exact: float seconds * 1000 can land a ms short


def parse_topic_argument(text: str) -> tuple[str, list[int] | None]:
    """`T` (every partition of T) or `T:0,2` (those partitions), as kafka-consumer-groups' --topic."""
    topic, sep, partitions = text.partition(":")
    if not topic:
        raise ValueError(f"invalid --topic {text!r}: no topic name")
    if not sep:
        return topic, None
    try:
        numbers = [int(p) for p in partitions.split(",")]
    except ValueError as e:
        raise ValueError(f"invalid --topic {text!r}: expected topic name and partitions, as T:0,1") from e
    if not numbers or min(numbers) < 0:
        raise ValueError(f"invalid --topic {text!r}: partitions are numbers from 0")
    return topic, numbers


def clamp_offsets(
    requested: dict[TopicPartition, int], starts: dict[TopicPartition, int], ends: dict[TopicPartition, int]
) -> tuple[dict[TopicPartition, int], list[str]]:
    """Each offset moved into [log start, log end], with Kafka's warning for each one moved."""
    out, warnings = {}, []
    for tp, offset in sorted(requested.items()):
        name = f"{tp[0]}-{tp[1]}"
        if offset < starts[tp]:
            warnings.append(f"New offset ({offset}) is lower than earliest offset for topic partition {name}. "
                            f"Value will be set to {starts[tp]}")
            offset = starts[tp]
        elif offset > ends[tp]:
            warnings.append(f"New offset ({offset}) is higher than latest offset for topic partition {name}. "
                            f"Value will be set to {ends[tp]}")
            offset = ends[tp]
        out[tp] = offset
    return out, warnings


def shifted(committed: dict[TopicPartition, int], partitions: Iterable[TopicPartition], by: int
            ) -> dict[TopicPartition, int]:
    """--shift-by: a partition the group never committed has nothing to shift, which Kafka refuses."""
    out = {}
    for tp in partitions:
        if tp not in committed:
            raise ValueError(f"Cannot shift offset for partition {tp[0]}-{tp[1]} since there is no current "
                             "committed offset")
        out[tp] = committed[tp] + by
    return out


async def plan_reset(consumer: Consumer, partitions: list[TopicPartition], spec: ResetSpec,
                     committed: dict[TopicPartition, int]) -> tuple[dict[TopicPartition, int], list[str]]:
    """The new offset of each partition and the warnings to print, from ListOffsets at the leaders."""
    if spec.to is ResetTo.EARLIEST:
        return await consumer.beginning_offsets(partitions), []
    if spec.to is ResetTo.LATEST:
        return await consumer.end_offsets(partitions), []
    if spec.to is ResetTo.TIMESTAMP:
        found = await consumer.offsets_for_times(dict.fromkeys(partitions, max(0, spec.value)))
        # No record at or after the time: the log end, as Kafka falls back to the latest offset.
        past_end = sorted(tp for tp, at in found.items() if at is None)
        ends = await consumer.end_offsets(past_end) if past_end else {}
        warnings = [f"Partition {p} from topic {t} is empty. Falling back to latest known offset."
                    for t, p in past_end]
        return {tp: (ends[tp] if at is None else at.offset) for tp, at in found.items()}, warnings
    requested = (dict.fromkeys(partitions, spec.value) if spec.to is ResetTo.OFFSET
                 else shifted(committed, partitions, spec.value))
    starts = await consumer.beginning_offsets(partitions)
    ends = await consumer.end_offsets(partitions)
    return clamp_offsets(requested, starts, ends)
