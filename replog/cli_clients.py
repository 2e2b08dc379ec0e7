"""`replog topics`, `produce`, `consume` and `consumer-groups`: the commands that are Kafka clients, with the
flags, output and exit codes of kafka-topics, kafka-console-producer/consumer and kafka-consumer-groups."""

import argparse
import asyncio
import sys
from collections.abc import Mapping, Sequence

from .cli_reset_offsets import reset_offsets
from .client import cluster_admin, group_admin
from .client.admin import Admin, NewTopic, TopicDescription
from .client.cluster import Cluster
from .client.consumer import Consumer
from .client.errors import CLUSTER_AUTHORIZATION_FAILED, UNSUPPORTED_VERSION, KafkaError
from .client.producer import Producer
from .client.security import load_command_config

EXIT_OK = 0
EXIT_ERROR = 1
MAX_LINE_BYTES = 16 * 1024 * 1024  # one stdin line becomes one record; bound it like a max message size


def properties(pairs: Sequence[str] | None) -> dict[str, str]:
    out = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"expected key=value, got {pair!r}")
        out[key.strip()] = value
    return out


def flag(props: dict[str, str], name: str) -> bool:
    return props.get(name, "false").lower() == "true"


# topics


async def topics(args: argparse.Namespace) -> int:
    async with Admin(args.bootstrap_server, security=load_command_config(args.command_config)) as admin:
        if args.action == "create":
            _require(args.topic, "--topic")
            configs = properties(args.config)
            topic = NewTopic(args.topic, args.partitions, args.replication_factor, configs)
            await admin.create_topics([topic])
            print(f"Created topic {args.topic}.")
        elif args.action == "delete":
            _require(args.topic, "--topic")
            await admin.delete_topics([args.topic])
            print(f"Deleted topic {args.topic}.")
        elif args.action == "alter":
            _require(args.topic, "--topic")
            await cluster_admin.create_partitions(admin, args.topic, args.partitions)
            print(f"Topic {args.topic} now has {args.partitions} partitions.")
        elif args.action == "list":
            for name in await admin.list_topics():
                print(name)
        else:
            described = await admin.describe_topics(None if args.topic is None else [args.topic])
            reassignments = await _reassignments_if_allowed(admin)
            for description in described.values():
                overrides = {c.name: c.value for c in await cluster_admin.describe_configs(
                    admin, cluster_admin.TOPIC, description.name) if c.source == cluster_admin.DYNAMIC_TOPIC_CONFIG}
                text = format_description(description, args, overrides, reassignments)
                if text:
                    print(text)
    return EXIT_OK


def _require(value: object, flag: str) -> None:
    if value is None:
        raise ValueError(f"{flag} is required")


async def _reassignments_if_allowed(admin: Admin) -> dict[tuple[str, int], cluster_admin.OngoingReassignment]:
    """The reassignments in progress, or none when the principal may not list them (no DESCRIBE on the
    cluster) or the broker cannot: kafka-topics describes the topics without them then."""
    try:
        return await cluster_admin.list_partition_reassignments(admin)
    except KafkaError as e:
        if e.code in (CLUSTER_AUTHORIZATION_FAILED, UNSUPPORTED_VERSION):
            return {}
        raise


def format_description(d: TopicDescription, args: argparse.Namespace,
                        overrides: dict[str, str | None] | None = None,
                        reassignments: Mapping[tuple[str, int], cluster_admin.OngoingReassignment] | None = None
                        ) -> str:
    """As kafka-topics --describe: a header line per topic with its non-default configs, then its partitions,
    with the replicas being added and removed of those a reassignment moves; with a partition filter
    (--under-replicated-partitions, --unavailable-partitions) only the partitions that match, no header."""
    reassignments = reassignments or {}
    first = reassignments.get((d.name, d.partitions[0].partition)) if d.partitions else None
    # As kafka-topics: the replication factor the topic has once a reassignment ends, not counting additions.
    replication = (len(set(d.partitions[0].replicas) - set(first.adding)) if first
                   else len(d.partitions[0].replicas) if d.partitions else 0)
    filtered = args.under_replicated_partitions or args.unavailable_partitions
    configs = ",".join(f"{k}={v}" for k, v in sorted((overrides or {}).items()))
    lines = [] if filtered else [
        f"Topic: {d.name}\tPartitionCount: {len(d.partitions)}\tReplicationFactor: {replication}"
        + (f"\tConfigs: {configs}" if configs else "")]
    for p in d.partitions:
        if args.under_replicated_partitions and not p.under_replicated:
            continue
        if args.unavailable_partitions and not p.unavailable:
            continue
        lines.append(
            f"\tTopic: {d.name}\tPartition: {p.partition}\tLeader: {p.leader if p.leader >= 0 else 'none'}"
            f"\tReplicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}"
            + (f"\tAdding Replicas: {_ids(moving.adding)}\tRemoving Replicas: {_ids(moving.removing)}"
               if (moving := reassignments.get((d.name, p.partition))) else "")
            + (f"\tOffline: {_ids(p.offline)}" if p.offline else "")
        )
    return "\n".join(lines)


def _ids(ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in ids)


# consumer groups


async def consumer_groups(args: argparse.Namespace) -> int:
    if (args.describe or args.delete or args.reset_offsets) and not args.group:
        raise ValueError("--describe, --delete and --reset-offsets need --group")
    if args.reset_offsets:
        return await reset_offsets(args)
    security = load_command_config(args.command_config)
    cluster = Cluster(args.bootstrap_server, client_id="replog-consumer-groups", security=security)
    try:
        if args.list:
            for listing in await group_admin.list_groups(cluster):
                print(listing.group_id)
        elif args.delete:
            await group_admin.delete_group(cluster, args.group)
            print(f"Deletion of requested consumer group ({args.group!r}) was successful.")
        else:
            print(await _describe_group_lag(cluster, args.bootstrap_server, args.group))
    finally:
        await cluster.close()
    return EXIT_OK


async def _describe_group_lag(cluster: Cluster, bootstrap: str, group_id: str) -> str:
    """kafka-consumer-groups --describe: per partition its committed offset, log end offset, lag, and the
    member assigned to it ("-" where there is none)."""
    description = await group_admin.describe_group(cluster, group_id)
    committed = await group_admin.committed_offsets(cluster, group_id)
    owners = {tp: m for m in description.members for tp in m.assignment}
    partitions = sorted(set(committed) | set(owners))
    async with Consumer(bootstrap, security=cluster.security) as consumer:
        ends = await consumer.end_offsets(partitions) if partitions else {}
    header = f"Consumer group '{group_id}': state {description.state}, {len(description.members)} member(s)"
    rows = [("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
             "CLIENT-ID")]
    for tp in partitions:
        current, end, member = committed.get(tp), ends.get(tp), owners.get(tp)
        lag = end - current if current is not None and end is not None else None
        rows.append((group_id, tp[0], str(tp[1]), _or_dash(current), _or_dash(end), _or_dash(lag),
                     member.member_id if member else "-", member.host if member else "-",
                     member.client_id if member else "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    table = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join([header, "", *table])


def _or_dash(value: int | None) -> str:
    return "-" if value is None else str(value)


# produce


async def produce(args: argparse.Namespace) -> int:
    props = properties(args.property)
    parse_key = flag(props, "parse.key")
    separator = props.get("key.separator", "\t").encode()
    producer = Producer(args.bootstrap_server, acks=args.acks, compression=args.compression_type,
                        security=load_command_config(args.command_config))
    deliveries = []
    try:
        for line in iter(lambda: sys.stdin.buffer.readline(MAX_LINE_BYTES), b""):
            value = line.rstrip(b"\r\n")
            key = None
            if parse_key:
                key, sep, value = value.partition(separator)
                if not sep:
                    raise ValueError(f"line without key separator {separator!r}: {line[:80]!r}")
            deliveries.append(await producer.send(args.topic, value, key=key))
        await producer.flush()
    finally:
        await producer.close()
    failures = [d.exception() for d in deliveries if d.done() and not d.cancelled() and d.exception()]
    if failures:
        print(f"error: {len(failures)} of {len(deliveries)} records failed: {failures[0]}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


# consume


async def consume(args: argparse.Namespace) -> int:
    props = properties(args.property)
    print_key = flag(props, "print.key")
    separator = props.get("key.separator", "\t").encode()
    if args.group is not None and (args.partition is not None or args.offset is not None):
        raise ValueError("--group lets the group assign partitions: drop --partition and --offset")
    # In a group, each partition starts at the group's committed offset; without one, where
    # --from-beginning says (kafka-console-consumer's auto.offset.reset).
    reset = "earliest" if args.from_beginning else "latest"
    async with Consumer(args.bootstrap_server, group_id=args.group, auto_offset_reset=reset,
                        security=load_command_config(args.command_config)) as consumer:
        if args.group is not None:
            consumer.subscribe([args.topic])
        else:
            await _assign(consumer, args)
        printed = 0
        out = sys.stdout.buffer
        loop = asyncio.get_running_loop()
        idle_since = loop.time()
        while args.max_messages is None or printed < args.max_messages:
            wait_ms = 1000 if args.timeout_ms is None else max(1, min(1000, args.timeout_ms))
            # No more than are still wanted: a group commits the position, which must not pass what was printed.
            remaining = None if args.max_messages is None else args.max_messages - printed
            fetched = await consumer.getmany(wait_ms, max_records=remaining)
            for records in fetched.values():
                for r in records:
                    value = r.value if r.value is not None else b"null"
                    out.write((r.key or b"null") + separator + value + b"\n" if print_key else value + b"\n")
                    printed += 1
            out.flush()
            if fetched:
                idle_since = loop.time()
            elif args.timeout_ms is not None and (loop.time() - idle_since) * 1000 >= args.timeout_ms:
                break
    print(f"Processed a total of {printed} messages", file=sys.stderr)
    return EXIT_OK


async def _assign(consumer: Consumer, args: argparse.Namespace) -> None:
    if args.offset is not None and args.partition is None:
        raise ValueError("--offset needs --partition")
    partitions = await consumer.cluster.partitions_for(args.topic)
    if args.partition is not None:
        if args.partition not in partitions:
            raise ValueError(f"topic {args.topic} has no partition {args.partition}")
        partitions = [args.partition]
    tps = [(args.topic, p) for p in partitions]
    consumer.assign(tps)
    if args.offset in (None, "latest"):
        if args.from_beginning:
            consumer.seek_to_beginning(*tps)
        else:
            consumer.seek_to_end(*tps)
    elif args.offset == "earliest":
        consumer.seek_to_beginning(*tps)
    else:
        await _seek_or_say_why_not(consumer, tps[0], args.offset)


async def _seek_or_say_why_not(consumer: Consumer, tp: tuple[str, int], offset: int) -> None:
    """An offset outside the log starts at the end, as kafka-console-consumer's auto.offset.reset=latest
    does, and says so rather than silently reading from somewhere else."""
    start = (await consumer.beginning_offsets([tp]))[tp]
    end = (await consumer.end_offsets([tp]))[tp]
    if start <= offset <= end:
        consumer.seek(tp, offset)
        return
    print(f"offset {offset} is out of range for {tp[0]}-{tp[1]} (log start {start}, end {end}); "
          f"starting at the end ({end})", file=sys.stderr)
    consumer.seek(tp, end)
