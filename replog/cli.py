"""The `replog` command line: broker, topics, produce, consume and log tools, with Kafka's flag names."""

import argparse
import asyncio
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from .analytics import job as analyze_job
from .cli_admin import add_admin_commands
from .client import cluster_admin, group_admin
from .client.admin import Admin, NewTopic, TopicDescription
from .client.cluster import Cluster
from .client.consumer import Consumer
from .client.errors import KafkaError
from .client.producer import Producer

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
MAX_LINE_BYTES = 16 * 1024 * 1024  # one stdin line becomes one record; bound it like a max message size


def _properties(pairs: Sequence[str] | None) -> dict[str, str]:
    out = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"expected key=value, got {pair!r}")
        out[key.strip()] = value
    return out


def _flag(props: dict[str, str], name: str) -> bool:
    return props.get(name, "false").lower() == "true"


# broker


def cmd_broker_start(args: argparse.Namespace) -> int:
    from .broker.server import run_broker  # imported lazily: client commands should not load the broker

    return _refusing_a_used_directory("broker", run_broker, args)


def cmd_controller_start(args: argparse.Namespace) -> int:
    from .controller.process import run_controller  # imported lazily, as the broker is

    return _refusing_a_used_directory("controller", run_controller, args)


def _refusing_a_used_directory(role: str, run: Callable[[Path | None, list[str]], int],
                               args: argparse.Namespace) -> int:
    from .log.dir_lock import DirectoryInUseError

    try:
        return run(args.config, args.override or [])
    except DirectoryInUseError as exc:
        print(f"replog {role}: refusing to start: {exc}", file=sys.stderr)
        return 1


# topics


async def _topics(args: argparse.Namespace) -> int:
    async with Admin(args.bootstrap_server) as admin:
        if args.action == "create":
            _require(args.topic, "--topic")
            configs = _properties(args.config)
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
            for description in described.values():
                overrides = {c.name: c.value for c in await cluster_admin.describe_configs(
                    admin, cluster_admin.TOPIC, description.name) if c.source == cluster_admin.DYNAMIC_TOPIC_CONFIG}
                text = _format_description(description, args, overrides)
                if text:
                    print(text)
    return EXIT_OK


def _require(value: object, flag: str) -> None:
    if value is None:
        raise ValueError(f"{flag} is required")


def _format_description(d: TopicDescription, args: argparse.Namespace,
                        overrides: dict[str, str | None] | None = None) -> str:
    """As kafka-topics --describe: a header line per topic with its non-default configs, then its partitions;
    with a partition filter (--under-replicated-partitions, --unavailable-partitions) only the partitions that
    match, no header."""
    replication = len(d.partitions[0].replicas) if d.partitions else 0
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
            + (f"\tOffline: {_ids(p.offline)}" if p.offline else "")
        )
    return "\n".join(lines)


def _ids(ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in ids)


# consumer groups


async def _consumer_groups(args: argparse.Namespace) -> int:
    if (args.describe or args.delete) and not args.group:
        raise ValueError("--describe and --delete need --group")
    cluster = Cluster(args.bootstrap_server, client_id="replog-consumer-groups")
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
    async with Consumer(bootstrap) as consumer:
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


async def _produce(args: argparse.Namespace) -> int:
    props = _properties(args.property)
    parse_key = _flag(props, "parse.key")
    separator = props.get("key.separator", "\t").encode()
    producer = Producer(args.bootstrap_server, acks=args.acks, compression=args.compression_type)
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


async def _consume(args: argparse.Namespace) -> int:
    props = _properties(args.property)
    print_key = _flag(props, "print.key")
    separator = props.get("key.separator", "\t").encode()
    if args.group is not None and (args.partition is not None or args.offset is not None):
        raise ValueError("--group lets the group assign partitions: drop --partition and --offset")
    # In a group, each partition starts at the group's committed offset; without one, where
    # --from-beginning says (kafka-console-consumer's auto.offset.reset).
    reset = "earliest" if args.from_beginning else "latest"
    async with Consumer(args.bootstrap_server, group_id=args.group, auto_offset_reset=reset) as consumer:
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


# log


def cmd_log_dump(args: argparse.Namespace) -> int:
    from .log.dump import dump_log_file, format_dump  # imported lazily: only this command needs it

    print(format_dump(dump_log_file(args.path)))
    return EXIT_OK


# cluster


def cmd_cluster(args: argparse.Namespace) -> int:
    from . import cluster_control as control  # imported lazily: only these commands manage processes
    from .cluster_nodes.manifest import ClusterError

    try:
        if args.cluster_command == "up":
            manifest = control.cluster_up(
                args.data_dir,
                args.brokers,
                base_port=args.base_port,
                broker_overrides=_properties(args.override),
                controller_overrides=_properties(args.controller_override),
            )
            print(manifest.bootstrap)
            print(control.format_nodes(manifest))
        elif args.cluster_command == "status":
            status = control.cluster_status(args.data_dir)
            print(control.format_status(status))
            return EXIT_OK if status.all_up else EXIT_ERROR
        elif args.cluster_command == "down":
            print(control.format_outcomes(control.cluster_down(args.data_dir)))
        elif args.cluster_command == "stop-node":
            print(f"node {args.node_id}: {control.stop_node(args.data_dir, args.node_id)}")
        elif args.cluster_command == "kill-node":
            print(f"node {args.node_id}: {control.kill_node(args.data_dir, args.node_id)}")
        else:
            node = control.start_node(args.data_dir, args.node_id)
            print(f"node {node.id}: started (pid {node.pid}), serving on port {node.port}")
    except ClusterError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


# bench


def cmd_bench(args: argparse.Namespace) -> int:
    if args.report:
        from benchmarks.compare import compare_runs
        from benchmarks.markdown_table import markdown_table

        match args.report:
            case ["compare", before, after]:
                show = lambda: compare_runs(Path(before), Path(after))  # noqa: E731
            case ["table", run]:
                show = lambda: markdown_table(Path(run))  # noqa: E731
            case _:
                print("error: usage: replog bench compare BEFORE.json AFTER.json | replog bench table RUN.json",
                      file=sys.stderr)
                return EXIT_ERROR
        try:
            print(show())
        except (OSError, ValueError) as e:
            print(f"error: {e}", file=sys.stderr)
            return EXIT_ERROR
        return EXIT_OK
    from benchmarks.__main__ import main as run_benchmarks

    options = (["--quick"] if args.quick else []) + [f"--only={name}" for name in args.only or []]
    if args.results_dir is not None:
        options.append(f"--results-dir={args.results_dir}")
    return run_benchmarks(options)


# chaos


def cmd_chaos(args: argparse.Namespace) -> int:
    from .chaos import runner  # imported lazily: only this command needs confluent-kafka

    return runner.main(duration=args.duration, nemesis_faults=args.nemesis, seed=args.seed, data_dir=args.data_dir)


def cmd_crash_loop(args: argparse.Namespace) -> int:
    from .chaos import crash_loop  # imported lazily: only this command needs confluent-kafka

    return crash_loop.main(restarts=args.restarts, seed=args.seed, data_dir=args.data_dir,
                           torn_fraction=args.torn_fraction)


# analyze


def cmd_analyze(args: argparse.Namespace) -> int:
    return analyze_job.run(args)  # imports PySpark itself, only now


# parser and entry point


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="replog", description="replog: a Kafka-compatible replicated log broker, its tools and its test rigs. "
        "`replog COMMAND --help` describes each command.")
    commands = parser.add_subparsers(dest="command", required=True)

    broker = commands.add_parser("broker", help="run a broker", description="Run a broker.").add_subparsers(
        dest="broker_command", required=True
    )
    start = broker.add_parser(
        "start", help="start a broker in the foreground; SIGTERM stops it cleanly",
        description="Start a broker in the foreground with Kafka's config keys (docs/configuration.md). "
        "SIGTERM or Ctrl-C stops it cleanly.")
    start.add_argument("--config", help="a server.properties-style file of config keys (default: none, every key "
                       "at its default)")
    start.add_argument("--override", action="append", metavar="KEY=VALUE",
                       help="set one config key, over the file's value; repeatable (default: none)")
    start.set_defaults(func=cmd_broker_start)

    controller = commands.add_parser(
        "controller", help="run the cluster's controller", description="Run the cluster's controller."
    ).add_subparsers(dest="controller_command", required=True)
    start_controller = controller.add_parser(
        "start", help="start the controller in the foreground; SIGTERM stops it cleanly",
        description="Start the controller in the foreground; it needs metadata.log.dir and inter.broker.secret "
        "(docs/configuration.md). SIGTERM or Ctrl-C stops it cleanly.")
    start_controller.add_argument("--config", help="a properties file of controller config keys (default: none)")
    start_controller.add_argument("--override", action="append", metavar="KEY=VALUE",
                                  help="set one config key, over the file's value; repeatable (default: none)")
    start_controller.set_defaults(func=cmd_controller_start)

    topics = commands.add_parser("topics", help="create, delete, list or describe topics",
                                 description="Create, delete, list or describe topics, as kafka-topics.sh does.")
    topics.add_argument("action", choices=["create", "delete", "list", "describe", "alter"],
                        help="what to do; alter adds partitions (--partitions: the new total)")
    _bootstrap(topics)
    topics.add_argument("--topic", help="the topic; required by create and delete (default for describe: "
                        "every topic)")
    topics.add_argument("--partitions", type=int, default=1,
                        help="create: partitions; alter: the new partition count (default: %(default)s)")
    topics.add_argument("--replication-factor", type=int, default=1,
                        help="create: replicas of each partition (default: %(default)s)")
    topics.add_argument("--config", action="append", metavar="KEY=VALUE",
                        help="create: a topic config, e.g. min.insync.replicas=2; repeatable (default: none)")
    topics.add_argument("--under-replicated-partitions", action="store_true",
                        help="describe: only partitions whose ISR is smaller than their replicas (default: off)")
    topics.add_argument("--unavailable-partitions", action="store_true",
                        help="describe: only partitions without a leader (default: off)")
    topics.set_defaults(func=lambda a: asyncio.run(_topics(a)))

    produce = commands.add_parser("produce", help="produce lines from stdin, one record per line",
                                  description="Produce each line of stdin as one record with the bundled "
                                  "producer (idempotent with acks=all); exit 1 if any record failed.")
    produce.add_argument("topic", help="the topic to write to")
    _bootstrap(produce)
    produce.add_argument("--acks", default="all", choices=["all", "-1", "0", "1"],
                         help="when a record counts as written: 0 sent, 1 on the leader, all (-1) on the whole "
                         "ISR (default: %(default)s)")
    produce.add_argument(
        "--compression-type", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"],
        help="batch compression (default: %(default)s)"
    )
    produce.add_argument("--property", action="append", metavar="KEY=VALUE",
                         help="parse.key=true splits each line at key.separator (a tab unless set) into key and "
                         "value; repeatable (default: none)")
    produce.set_defaults(func=lambda a: asyncio.run(_produce(a)))

    consume = commands.add_parser("consume", help="print record values, one per line",
                                  description="Print record values, one per line, from every partition of a "
                                  "topic or from one; runs until Ctrl-C unless a limit below ends it.")
    consume.add_argument("topic", help="the topic to read")
    _bootstrap(consume)
    consume.add_argument("--from-beginning", action="store_true",
                         help="start at each partition's first offset, not its end (default: off)")
    consume.add_argument("--max-messages", type=int, help="exit after this many records (default: no limit)")
    consume.add_argument("--partition", type=int, help="read only this partition (default: all)")
    consume.add_argument(
        "--offset", type=_offset_arg,
        help="an offset, earliest or latest to start at; needs --partition (default: latest, or earliest with "
        "--from-beginning)"
    )
    consume.add_argument("--group", help="consume as a member of this consumer group, committing its offsets "
                         "(default: none, every partition, nothing committed)")
    consume.add_argument("--timeout-ms", type=int, help="exit after this long without a message (default: never)")
    consume.add_argument("--property", action="append", metavar="KEY=VALUE",
                         help="print.key=true prints the key, key.separator (a tab unless set), then the value; "
                         "repeatable (default: none)")
    consume.set_defaults(func=lambda a: asyncio.run(_consume(a)))

    groups = commands.add_parser(
        "consumer-groups", help="list, describe (with lag) or delete consumer groups",
        description="List consumer groups, describe one (per partition: committed offset, log end offset, lag, "
        "member and host), or delete an empty one, as kafka-consumer-groups does.")
    _bootstrap(groups)
    action = groups.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list every group of the cluster (one of --list, "
                        "--describe, --delete is required)")
    action.add_argument("--describe", action="store_true", help="describe the group named by --group (default: off)")
    action.add_argument("--delete", action="store_true", help="delete the group named by --group, which must "
                        "have no members (default: off)")
    groups.add_argument("--group", help="the group to describe or delete (default: none)")
    groups.set_defaults(func=lambda a: asyncio.run(_consumer_groups(a)))

    log = commands.add_parser("log", help="inspect log files", description="Inspect log files.").add_subparsers(
        dest="log_command", required=True
    )
    dump = log.add_parser("dump", help="print each batch of a segment: offsets, epoch, count, CRC, size",
                          description="Print each batch of a segment file, or of every segment in a partition "
                          "directory, as kafka-dump-log.sh does; a torn or corrupt tail is reported, not fatal.")
    dump.add_argument("path", help="a segment's .log file, or a partition directory such as DATA/events-0")
    dump.set_defaults(func=cmd_log_dump)

    cluster = commands.add_parser(
        "cluster", help="a local cluster: a controller and brokers as background processes",
        description="A local cluster on 127.0.0.1: a controller and brokers as background processes that outlive "
        "the command, described by DATA_DIR/cluster.json (docs/operations.md)."
    ).add_subparsers(dest="cluster_command", required=True)
    up = cluster.add_parser("up", help="start a controller and N brokers; writes DATA_DIR/cluster.json")
    up.add_argument("--brokers", type=int, default=3, help="how many brokers (default: %(default)s)")
    up.add_argument(
        "--base-port", type=int, help="controller on this port, broker i on port+i (default: free ports)"
    )
    up.add_argument("--override", action="append", metavar="KEY=VALUE",
                    help="a config key for every broker; repeatable (default: none)")
    up.add_argument(
        "--controller-override", action="append", metavar="KEY=VALUE",
        help="a config key for the controller; repeatable (default: none)"
    )
    cluster.add_parser("status", help="which nodes run and serve; exit 1 unless all do")
    cluster.add_parser("down", help="SIGTERM the brokers, then the controller; idempotent")
    for action, what in [("stop-node", "SIGTERM a node and wait until it exits"), ("kill-node", "SIGKILL a node"),
                         ("start-node", "start a stopped node again with its id, port and data")]:  # fmt: skip
        cluster.add_parser(action, help=what).add_argument(
            "node_id", type=int, metavar="ID", help="a broker id (1..N) or the controller's (3000)")
    for action_parser in cluster.choices.values():
        action_parser.add_argument("--data-dir", required=True,
                                   help="the cluster's directory, holding cluster.json (required)")
        action_parser.set_defaults(func=cmd_cluster)

    add_admin_commands(commands, _bootstrap)

    analyze = commands.add_parser("analyze", help="analyse metrics dumps with PySpark: tables, plots, report",
                                  description="Analyse metrics dumps (docs/metrics-dumps.md) with PySpark: "
                                  "Parquet and CSV tables, PNG plots, report.html.")
    analyze_job.add_arguments(analyze)
    analyze.set_defaults(func=cmd_analyze)

    bench = commands.add_parser(
        "bench", help="run the benchmark suite, or `bench compare A.json B.json`, `bench table RUN.json`",
        description="Run the benchmark suite (docs/benchmarks.md), or report on runs already saved.")
    bench.add_argument("--quick", action="store_true", help="smaller volumes and fewer repeats (default: off, "
                       "the full suite)")
    bench.add_argument("--only", action="append", metavar="NAME",
                       help="run only this benchmark; repeatable (default: all)")
    bench.add_argument("--results-dir", metavar="DIR", help="where the JSON and plots go (default: bench-results)")
    bench.add_argument("report", nargs="*", metavar="compare BEFORE.json AFTER.json | table RUN.json",
                       help="show what changed between two runs' JSON files, or one run as a Markdown table "
                       "(default: none, run the suite)")
    bench.set_defaults(func=cmd_bench)

    chaos = commands.add_parser("chaos", help="a Jepsen-style run: faults under idempotent acks=all load, then "
                                "check that no acknowledged record is lost or duplicated",
                                description="A Jepsen-style run on a local three-broker cluster; exit 1 on any "
                                "anomaly (docs/fault-testing.md).")
    chaos.add_argument("--duration", type=float, default=60.0, help="seconds of faults and load (default 60)")
    chaos.add_argument("--nemesis", default="kill,pause,partition,controller", metavar="FAULT[,FAULT...]",
                       help="faults to inject: kill, pause, partition, controller (default: all)")
    chaos.add_argument("--seed", type=int, help="seed of the fault schedule (default: random, printed)")
    chaos.add_argument("--data-dir", type=Path, help="cluster directory, kept (default: a temporary one, "
                       "removed unless the run fails)")
    chaos.set_defaults(func=cmd_chaos)

    crash = commands.add_parser("crash-loop", help="SIGKILL brokers over and over under heavy writes, tearing "
                                "unflushed data, and verify every recovery on disk and through the clients",
                                description="Kill and restart brokers under load, damage unflushed data, and "
                                "verify each recovery; exit 1 on any problem (docs/fault-testing.md).")
    crash.add_argument("--restarts", type=int, default=20, help="kill and restart rounds (default 20)")
    crash.add_argument("--seed", type=int, help="seed of the loop (default: random, printed)")
    crash.add_argument("--torn-fraction", type=float, default=0.5, metavar="P",
                       help="share of rounds that also damage the killed broker's unflushed data (default 0.5)")
    crash.add_argument("--data-dir", type=Path, help="cluster directory, kept (default: a temporary one, "
                       "removed unless the run fails)")
    crash.set_defaults(func=cmd_crash_loop)
    return parser


def _bootstrap(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT...]",
                        help="brokers to ask for the cluster's metadata first (required)")


def _offset_arg(text: str) -> str | int:
    if text in ("earliest", "latest"):
        return text
    offset = int(text)
    if offset < 0:
        raise argparse.ArgumentTypeError("offset must be >= 0, earliest or latest")
    return offset


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KafkaError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE if isinstance(e, ValueError) else EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
