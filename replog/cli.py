"""The `replog` command line: the parser, and the commands that run servers, clusters, benchmarks and tools;
the client commands are in cli_clients.py, the admin ones in cli_admin.py and cli_reassign.py. Kafka's flag
names throughout."""

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from . import cli_clients
from .analytics import job as analyze_job
from .cli_acls import add_acls_command
from .cli_admin import add_admin_commands
from .cli_clients import EXIT_ERROR, EXIT_OK, properties
from .cli_reassign import add_reassign_command
from .cli_reset_offsets import add_reset_arguments
from .client.errors import KafkaError
from .client.quorum_admin import describe_controller_cluster, describe_quorum, parse_controllers
from .client.security import add_command_config_argument, load_command_config
from .cluster_nodes.plan import DEFAULT_CONTROLLERS
from .cluster_nodes.quorum_report import format_quorum_replication, format_quorum_status
from .process_startup import end_quiet_start

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


# broker


def cmd_broker_start(args: argparse.Namespace) -> int:
    from .broker.process import run_broker  # imported lazily: client commands should not load the broker

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
                controllers=args.controllers,
                base_port=args.base_port,
                broker_overrides=properties(args.override),
                controller_overrides=properties(args.controller_override),
                security=args.security,
            )
            print(manifest.bootstrap)
            print(control.format_nodes(manifest))
        elif args.cluster_command == "status":
            status = control.cluster_status(args.data_dir)
            print(json.dumps(control.status_json(status)) if args.json else control.format_status(status))
            return EXIT_OK if status.all_up else EXIT_ERROR
        elif args.cluster_command == "down":
            print(control.format_outcomes(control.cluster_down(args.data_dir)))
        elif args.cluster_command == "stop-node":
            print(f"node {args.node_id}: {control.stop_node(args.data_dir, args.node_id)}")
        elif args.cluster_command == "kill-node":
            print(f"node {args.node_id}: {control.kill_node(args.data_dir, args.node_id)}")
        elif args.cluster_command == "add-broker":
            node = control.add_broker(args.data_dir)
            print(f"broker {node.id}: started (pid {node.pid}), serving on port {node.port}; every broker lists it")
        else:
            node = control.start_node(args.data_dir, args.node_id)
            print(f"node {node.id}: started (pid {node.pid}), serving on port {node.port}")
    except ClusterError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


# metadata-quorum


async def _metadata_quorum(args: argparse.Namespace) -> int:
    controllers = parse_controllers(args.bootstrap_controller)
    security = load_command_config(args.command_config)
    quorum = await describe_quorum(controllers, security=security)
    if args.status:
        cluster_id, _ = await describe_controller_cluster(controllers, security=security)
        print(format_quorum_status(quorum, cluster_id))
    else:
        print(format_quorum_replication(quorum, int(time.time() * 1000) if args.human_readable else None))
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

    return runner.main(duration=args.duration, nemesis_faults=args.nemesis, seed=args.seed, data_dir=args.data_dir,
                       controllers=args.controllers, security=args.security)


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
        description="Start the controller in the foreground; it needs metadata.log.dir and a way to log in "
        "to the other nodes: inter.broker.secret, inter.broker.sasl.username/password or mTLS "
        "(docs/configuration.md, docs/security.md). SIGTERM or Ctrl-C stops it cleanly.")
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
    topics.set_defaults(func=lambda a: asyncio.run(cli_clients.topics(a)))

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
    produce.set_defaults(func=lambda a: asyncio.run(cli_clients.produce(a)))

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
    consume.set_defaults(func=lambda a: asyncio.run(cli_clients.consume(a)))

    groups = commands.add_parser(
        "consumer-groups", help="list, describe (with lag), reset the offsets of or delete consumer groups",
        description="List consumer groups, describe one (per partition: committed offset, log end offset, lag, "
        "member and host), reset an inactive one's offsets, or delete an empty one, as kafka-consumer-groups does.")
    _bootstrap(groups)
    action = groups.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list every group of the cluster (one of --list, "
                        "--describe, --delete is required)")
    action.add_argument("--describe", action="store_true", help="describe the group named by --group (default: off)")
    action.add_argument("--delete", action="store_true", help="delete the group named by --group, which must "
                        "have no members (default: off)")
    action.add_argument("--reset-offsets", action="store_true",
                        help="reset the offsets of --group, which must have no active members, for --topic or "
                        "--all-topics with one --to-*/--shift-by/--by-duration mode (default: off)")
    groups.add_argument("--group", help="the group to describe, delete or reset (default: none)")
    add_reset_arguments(groups)
    groups.set_defaults(func=lambda a: asyncio.run(cli_clients.consumer_groups(a)))

    log = commands.add_parser("log", help="inspect log files", description="Inspect log files.").add_subparsers(
        dest="log_command", required=True
    )
    dump = log.add_parser("dump", help="print each batch of a segment: offsets, epoch, count, CRC, size",
                          description="Print each batch of a segment file, or of every segment in a partition "
                          "directory, as kafka-dump-log.sh does; a torn or corrupt tail is reported, not fatal.")
    dump.add_argument("path", help="a segment's .log file, or a partition directory such as DATA/events-0")
    dump.set_defaults(func=cmd_log_dump)

    cluster = commands.add_parser(
        "cluster", help="a local cluster: controllers and brokers as background processes",
        description="A local cluster on 127.0.0.1: a quorum of controllers and brokers as background processes "
        "that outlive the command, described by DATA_DIR/cluster.json (docs/operations.md)."
    ).add_subparsers(dest="cluster_command", required=True)
    up = cluster.add_parser("up", help="start N controllers and M brokers; writes DATA_DIR/cluster.json")
    up.add_argument("--controllers", type=int, default=DEFAULT_CONTROLLERS,
                    help="how many controllers, ids 3000, 3001, ...: the metadata quorum's voters (default: "
                    "%(default)s)")
    up.add_argument("--brokers", type=int, default=3, help="how many brokers (default: %(default)s)")
    up.add_argument("--base-port", type=int, help="controllers on this port and the next ones, then the brokers "
                    "(default: free ports)")
    up.add_argument("--override", action="append", metavar="KEY=VALUE",
                    help="a config key for every broker; repeatable (default: none)")
    up.add_argument(
        "--controller-override", action="append", metavar="KEY=VALUE",
        help="a config key for every controller; repeatable (default: none)"
    )
    up.add_argument("--security", choices=["plaintext", "sasl_ssl", "ssl"], default="plaintext",
                    help="sasl_ssl: TLS with a CA of the cluster's own and an admin SCRAM-SHA-512 user; ssl: mTLS "
                    "with an admin client certificate; either secures the controllers too, gives each node its own "
                    "login (no shared secret) and writes DATA_DIR/client.properties for kcat -F and "
                    "--command-config (default: %(default)s)")
    cluster.add_parser("status", help="which nodes run and serve, and the active controller; exit 1 unless all "
                       "do").add_argument("--json", action="store_true",
                                          help="print the nodes and the quorum as one JSON object (default: a table)")
    cluster.add_parser("down", help="SIGTERM the brokers, then the controllers; idempotent")
    cluster.add_parser("add-broker", help="start one more broker (the next id, configured as broker 1) that "
                       "joins the cluster; move partitions onto it with `replog reassign`")
    for action, what in [("stop-node", "SIGTERM a node and wait until it exits"), ("kill-node", "SIGKILL a node"),
                         ("start-node", "start a stopped node again with its id, port and data")]:  # fmt: skip
        cluster.add_parser(action, help=what).add_argument(
            "node_id", type=int, metavar="ID", help="a broker id (1..M) or a controller's (3000, 3001, ...)")
    for action_parser in cluster.choices.values():
        action_parser.add_argument("--data-dir", required=True,
                                   help="the cluster's directory, holding cluster.json (required)")
        action_parser.set_defaults(func=cmd_cluster)

    quorum = commands.add_parser(
        "metadata-quorum", help="describe the controllers' metadata quorum, like kafka-metadata-quorum",
        description="Ask the metadata quorum's leader (DescribeQuorum) for its state or its replication.")
    quorum.add_argument("--bootstrap-controller", required=True, metavar="HOST:PORT[,HOST:PORT...]",
                        help="controllers to ask, in turn, until the quorum's leader answers (required)")
    add_command_config_argument(quorum)
    describe = quorum.add_subparsers(dest="quorum_command", required=True).add_parser(
        "describe", help="print the quorum's leader, epoch and high watermark, or each replica's progress")
    shown = describe.add_mutually_exclusive_group(required=True)
    shown.add_argument("--status", action="store_true", help="leader, epoch, high watermark, follower lag, voters "
                       "and observers (one of --status, --replication is required)")
    shown.add_argument("--replication", action="store_true", help="a row per voter and observer: log end offset, "
                       "lag and fetch times (one of --status, --replication is required)")
    describe.add_argument("--human-readable", action="store_true",
                          help="--replication: timestamps as 'N ms ago' (default: ms since the epoch)")
    describe.set_defaults(func=lambda a: asyncio.run(_metadata_quorum(a)))

    add_admin_commands(commands, _bootstrap)
    add_reassign_command(commands, _bootstrap)
    add_acls_command(commands, _bootstrap)

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
                       help="run only this benchmark; repeatable, in the complete suite's order (default: all)")
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
    chaos.add_argument("--nemesis", metavar="FAULT[,FAULT...]",
                       help="faults to inject: kill, pause, partition, controller, and with --controllers 3 or "
                       "more controller-kill, controller-pause, controller-partition, controller-and-broker "
                       "(default: all that apply)")
    chaos.add_argument("--controllers", type=int, default=1, metavar="N",
                       help="controllers: 1 in this process (default), or N > 1 processes forming a Raft quorum")
    chaos.add_argument("--seed", type=int, help="seed of the fault schedule (default: random, printed)")
    chaos.add_argument("--data-dir", type=Path, help="cluster directory, kept (default: a temporary one, "
                       "removed unless the run fails)")
    chaos.add_argument("--security", choices=["plaintext", "sasl_ssl"], default="plaintext",
                       help="sasl_ssl: every link of the cluster over TLS (the controllers' too), each node "
                       "logging in as itself and the clients with SCRAM-SHA-512 (default: %(default)s)")
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
    """The options of every command that is a Kafka client: where the brokers are, and how to get in."""
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT...]",
                        help="brokers to ask for the cluster's metadata first (required)")
    add_command_config_argument(parser)


def _offset_arg(text: str) -> str | int:
    if text in ("earliest", "latest"):
        return text
    offset = int(text)
    if offset < 0:
        raise argparse.ArgumentTypeError("offset must be >= 0, earliest or latest")
    return offset


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.func not in (cmd_broker_start, cmd_controller_start):
        end_quiet_start()  # the servers end it once they serve, their logs loaded
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
