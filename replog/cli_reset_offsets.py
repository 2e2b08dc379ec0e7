"""`replog consumer-groups --reset-offsets`: kafka-consumer-groups' offset reset, with its scopes (--topic T,
T:0,1, --all-topics), modes (--to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by,
--by-duration), plan table, messages, and refusal while the group has active members."""

import argparse
import sys
import time

from .client import group_admin
from .client.consumer import Consumer
from .client.consumer_records import TopicPartition
from .client.offset_reset import (
    ResetSpec,
    ResetTo,
    parse_datetime_ms,
    parse_duration_ms,
    parse_topic_argument,
    plan_reset,
)
from .client.security import load_command_config

EXIT_OK = 0
EXIT_ERROR = 1
INACTIVE_STATES = ("Empty", "Dead")  # Dead: the group does not exist yet; a reset creates its offsets
NO_EXECUTE_WARNING = ("WARN: No action will be performed as the --execute option is missing. Add --dry-run "
                      "explicitly if you are scripting this command.")


def add_reset_arguments(groups: argparse.ArgumentParser) -> None:
    """The reset's scope, mode and --dry-run/--execute; --reset-offsets itself is in the action group."""
    groups.add_argument("--topic", action="append", metavar="TOPIC[:P,P]",
                        help="reset: a topic, or some of its partitions as T:0,1; repeatable (default: none)")
    groups.add_argument("--all-topics", action="store_true",
                        help="reset: every partition the group has committed an offset for (default: off)")
    mode = groups.add_mutually_exclusive_group()
    mode.add_argument("--to-earliest", action="store_true", help="reset to the log start offset (default: off)")
    mode.add_argument("--to-latest", action="store_true", help="reset to the log end offset (default: off)")
    mode.add_argument("--to-offset", type=int, metavar="N", help="reset to offset N, clamped into the log (default: none)")
    mode.add_argument("--to-datetime", metavar="ISO",
                      help="reset to the first record at or after YYYY-MM-DDTHH:mm:SS.sss (local time unless a "
                           "zone such as Z or +02:00 follows; default: none)")
    mode.add_argument("--shift-by", type=int, metavar="N",
                      help="move each committed offset by N (negative: back), clamped into the log "
                           "(default: none)")
    mode.add_argument("--by-duration", metavar="PnDTnHnM",
                      help="reset to the first record at or after now minus this ISO-8601 duration "
                           "(default: none)")
    run = groups.add_mutually_exclusive_group()
    run.add_argument("--dry-run", action="store_true", help="reset: print the plan only (the default without --execute)")
    run.add_argument("--execute", action="store_true", help="reset: commit the plan's offsets for the group (default: off)")


def reset_spec(args: argparse.Namespace) -> ResetSpec:
    if args.to_earliest:
        return ResetSpec(ResetTo.EARLIEST)
    if args.to_latest:
        return ResetSpec(ResetTo.LATEST)
    if args.to_offset is not None:
        return ResetSpec(ResetTo.OFFSET, args.to_offset)
    if args.shift_by is not None:
        return ResetSpec(ResetTo.SHIFT, args.shift_by)
    if args.to_datetime is not None:
        return ResetSpec(ResetTo.TIMESTAMP, parse_datetime_ms(args.to_datetime))
    if args.by_duration is not None:
        return ResetSpec(ResetTo.TIMESTAMP, int(time.time() * 1000) - parse_duration_ms(args.by_duration))
    raise ValueError("--reset-offsets needs one of --to-earliest, --to-latest, --to-offset, --to-datetime, "
                     "--shift-by, --by-duration")


async def reset_offsets(args: argparse.Namespace) -> int:
    spec = reset_spec(args)
    if bool(args.topic) == args.all_topics:
        raise ValueError("One of the reset scopes should be defined: --all-topics, --topic.")
    if not (args.dry_run or args.execute):
        print(NO_EXECUTE_WARNING, file=sys.stderr)
    async with Consumer(args.bootstrap_server, client_id="replog-consumer-groups",
                        security=load_command_config(args.command_config)) as consumer:
        cluster = consumer.cluster
        state = (await group_admin.describe_group(cluster, args.group)).state
        if state not in INACTIVE_STATES:
            print(f"Error: Assignments can only be reset if the group '{args.group}' is inactive, but the current "
                  f"state is {state}.", file=sys.stderr)
            return EXIT_ERROR
        committed = await group_admin.committed_offsets(cluster, args.group)
        partitions = sorted(committed) if args.all_topics else await _named_partitions(consumer, args.topic)
        offsets, warnings = await plan_reset(consumer, partitions, spec, committed) if partitions else ({}, [])
        for warning in warnings:
            print(f"Warn: {warning}", file=sys.stderr)
        if args.execute and offsets:
            await group_admin.alter_offsets(cluster, args.group, offsets)
    print(format_plan(args.group, offsets))
    return EXIT_OK


async def _named_partitions(consumer: Consumer, topic_arguments: list[str]) -> list[TopicPartition]:
    partitions = set()
    for argument in topic_arguments:
        topic, numbers = parse_topic_argument(argument)
        existing = await consumer.cluster.partitions_for(topic)
        for number in numbers if numbers is not None else existing:
            if number not in existing:
                raise ValueError(f"topic {topic} has no partition {number}")
            partitions.add((topic, number))
    return sorted(partitions)


def format_plan(group_id: str, offsets: dict[TopicPartition, int]) -> str:
    rows = [("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")]
    rows += [(group_id, topic, str(partition), str(offset)) for (topic, partition), offset in sorted(offsets.items())]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)
