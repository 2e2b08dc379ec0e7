"""`replog configs`, `replog delete-records` and `replog leader-election`: Kafka's kafka-configs.sh,
kafka-delete-records.sh and kafka-leader-election.sh, with their flags, file formats and messages."""

import argparse
import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

from replog.client import cluster_admin, scram_admin
from replog.client.admin import Admin
from replog.client.errors import KafkaError, error_name
from replog.client.security import load_command_config

ELECTION_NOT_NEEDED = 84


def split_config_list(text: str) -> list[str]:
    """kafka-configs' list syntax: comma-separated, with [a,b] grouping a value that holds commas."""
    items, depth, current = [], 0, ""
    for char in text:
        if char == "," and depth == 0:
            items.append(current)
            current = ""
            continue
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth < 0:
            raise ValueError(f"unbalanced ']' in {text!r}")
        current += char
    if depth:
        raise ValueError(f"unbalanced '[' in {text!r}")
    items.append(current)
    return [item.strip() for item in items if item.strip()]


def parse_add_config(text: str) -> dict[str, str]:
    configs = {}
    for item in split_config_list(text):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--add-config needs key=value pairs, got {item!r}")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        configs[key.strip()] = value
    return configs


async def _configs(args: argparse.Namespace) -> int:
    if args.entity_type == "users":
        if args.entity_default or args.all:
            raise ValueError("--entity-default and --all apply to topics and brokers, not users")
        return await _user_configs(args)
    resource_type = cluster_admin.TOPIC if args.entity_type == "topics" else cluster_admin.BROKER
    name = "" if args.entity_default else args.entity_name
    if name is None:
        raise ValueError("--entity-name (or --entity-default for brokers) is required")
    if args.entity_default and resource_type == cluster_admin.TOPIC:
        raise ValueError("--entity-default applies to brokers only")
    async with Admin(args.bootstrap_server, security=load_command_config(args.command_config)) as admin:
        if args.alter:
            set_configs = parse_add_config(args.add_config) if args.add_config else {}
            deleted = split_config_list(args.delete_config) if args.delete_config else []
            if not set_configs and not deleted:
                raise ValueError("--alter needs --add-config or --delete-config")
            await cluster_admin.alter_configs(admin, resource_type, name, set_configs=set_configs,
                                              delete_configs=deleted)
            what = "topic" if resource_type == cluster_admin.TOPIC else "broker"
            print(f"Completed updating config for {what} {name}." if name else
                  "Completed updating default config for brokers in the cluster.")
            return 0
        configs = await cluster_admin.describe_configs(admin, resource_type, name)
    entity = f"topic {name}" if resource_type == cluster_admin.TOPIC else (
        f"broker {name}" if name else "the brokers' cluster-wide default")
    shown = [c for c in configs if args.all or c.source not in (4, 5)]  # static and default are not dynamic
    print(f"{'All' if args.all else 'Dynamic'} configs for {entity} are:")
    for c in shown:
        print(f"  {c.name}={'' if c.value is None else c.value} sensitive={str(c.sensitive).lower()}")
    return 0


def scram_changes(user: str, add_config: str | None, delete_config: str | None) -> list:
    """kafka-configs' SCRAM syntax: --add-config 'SCRAM-SHA-512=[iterations=8192,password=s],SCRAM-SHA-256=[...]'
    and --delete-config SCRAM-SHA-512,SCRAM-SHA-256."""
    changes: list = []
    for mechanism, value in (parse_add_config(add_config) if add_config else {}).items():
        fields = dict(part.partition("=")[::2] for part in split_config_list(value))
        if "password" not in fields:
            raise ValueError(f"{mechanism}: expected {mechanism}=[password=...] or [iterations=N,password=...]")
        iterations = int(fields.get("iterations", scram_admin.DEFAULT_ITERATIONS))
        scram_admin.mechanism_code(mechanism)  # a ValueError names an unknown mechanism before anything is sent
        changes.append(scram_admin.ScramUpsertion(user, mechanism.upper(), fields["password"], iterations))
    for mechanism in split_config_list(delete_config) if delete_config else []:
        scram_admin.mechanism_code(mechanism)
        changes.append(scram_admin.ScramDeletion(user, mechanism.upper()))
    return changes


async def _user_configs(args: argparse.Namespace) -> int:
    """kafka-configs --entity-type users: SCRAM credentials (KIP-554)."""
    async with Admin(args.bootstrap_server, security=load_command_config(args.command_config)) as admin:
        if args.alter:
            if not args.entity_name:
                raise ValueError("--alter --entity-type users needs --entity-name")
            changes = scram_changes(args.entity_name, args.add_config, args.delete_config)
            if not changes:
                raise ValueError("--alter needs --add-config or --delete-config")
            await scram_admin.alter_user_scram_credentials(admin, changes)
            print(f"Completed updating config for user {args.entity_name}.")
            return 0
        described = await scram_admin.describe_user_scram_credentials(
            admin, [args.entity_name] if args.entity_name else None)
    for user, credentials in sorted(described.items()):
        shown = ", ".join(f"{mechanism}=iterations={iterations}" for mechanism, iterations in credentials)
        print(f"SCRAM credential configs for user-principal '{user}' are {shown}")
    return 0


async def _delete_records(args: argparse.Namespace) -> int:
    """The offset JSON file of kafka-delete-records.sh:
    {"partitions": [{"topic": "t", "partition": 0, "offset": 10}], "version": 1}."""
    document = json.loads(Path(args.offset_json_file).read_text())
    try:
        offsets = {(p["topic"], int(p["partition"])): int(p["offset"]) for p in document["partitions"]}
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{args.offset_json_file}: not a kafka-delete-records offset file ({e!r})") from e
    async with Admin(args.bootstrap_server, security=load_command_config(args.command_config)) as admin:
        low_watermarks = await cluster_admin.delete_records(admin, offsets)
    print("Records delete operation completed:")
    for (topic, partition), low in sorted(low_watermarks.items()):
        print(f"partition: {topic}-{partition}\tlow_watermark: {low}")
    return 0


async def _leader_election(args: argparse.Namespace) -> int:
    election_type = cluster_admin.PREFERRED if args.election_type == "preferred" else cluster_admin.UNCLEAN
    if args.all_topic_partitions:
        partitions = None
    elif args.path_to_json_file:
        document = json.loads(Path(args.path_to_json_file).read_text())
        partitions = [(p["topic"], int(p["partition"])) for p in document["partitions"]]
    elif args.topic is not None and args.partition is not None:
        partitions = [(args.topic, args.partition)]
    else:
        raise ValueError("one of --all-topic-partitions, --path-to-json-file or --topic with --partition is needed")
    async with Admin(args.bootstrap_server, security=load_command_config(args.command_config)) as admin:
        answers = await cluster_admin.elect_leaders(admin, election_type, partitions)
    kind = args.election_type.upper()
    done = [k for k, (code, _) in answers.items() if code == 0]
    not_needed = [k for k, (code, _) in answers.items() if code == ELECTION_NOT_NEEDED]
    failed = {k: v for k, v in answers.items() if v[0] not in (0, ELECTION_NOT_NEEDED)}
    if done:
        print(f"Successfully completed leader election ({kind}) for partitions {_names(done)}")
    if not_needed:
        print(f"Valid replica already elected for partitions {_names(not_needed)}")
    for (topic, partition), (code, message) in sorted(failed.items()):
        print(f"Error completing leader election ({kind}) for partition: {topic}-{partition}: "
              f"{error_name(code)}{': ' + message if message else ''}")
    if failed:
        raise KafkaError(next(iter(failed.values()))[0], f"{len(failed)} replica(s) could not be elected")
    return 0


def _names(keys: Sequence[tuple[str, int]]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in sorted(keys))


def add_admin_commands(commands, bootstrap) -> None:
    """Register the three commands on the CLI's subparsers; bootstrap(parser) adds --bootstrap-server."""
    configs = commands.add_parser("configs", help="describe or alter topic and broker configs, and users' SCRAM "
                                  "credentials", description="Describe or alter topic and broker configs, and "
                                  "users' SCRAM credentials (KIP-554), as kafka-configs.sh.")
    bootstrap(configs)
    action = configs.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="print the entity's dynamic configs (this or --alter is required)")
    action.add_argument("--alter", action="store_true", help="change configs with --add-config, --delete-config (this or --describe is required)")
    configs.add_argument("--entity-type", choices=["topics", "brokers", "users"], required=True,
                         help="what to configure (required)")
    configs.add_argument("--entity-name", help="the topic name, broker id or user (required unless "
                         "--entity-default; users --describe: every user without it)")
    configs.add_argument("--entity-default", action="store_true",
                         help="brokers: the cluster-wide default instead of one broker (default: off)")
    configs.add_argument("--add-config", metavar="K=V,...",
                         help="configs to set; a value with commas goes in brackets, k=[a,b]; users: "
                         "'SCRAM-SHA-512=[iterations=8192,password=...]' (default: none)")
    configs.add_argument("--delete-config", metavar="K,...", help="configs to reset to default; users: the "
                         "mechanisms to remove, e.g. SCRAM-SHA-512 (default: none)")
    configs.add_argument("--all", action="store_true",
                         help="describe: every config, static and default ones too (default: off)")
    configs.set_defaults(func=lambda a: asyncio.run(_configs(a)))

    delete = commands.add_parser("delete-records", help="delete records up to an offset",
                                 description="Move partitions' log start offsets, as kafka-delete-records.sh.")
    bootstrap(delete)
    delete.add_argument("--offset-json-file", required=True,
                        help='{"partitions": [{"topic": "t", "partition": 0, "offset": 10}], "version": 1}; '
                             "offset -1 is the high watermark (required)")
    delete.set_defaults(func=lambda a: asyncio.run(_delete_records(a)))

    election = commands.add_parser("leader-election", help="elect preferred or unclean leaders",
                                   description="Elect leaders, as kafka-leader-election.sh.")
    bootstrap(election)
    election.add_argument("--election-type", choices=["preferred", "unclean"], required=True,
                          help="preferred: hand leadership back to the first replica; unclean: elect any live "
                               "replica of a partition without a leader (required)")
    election.add_argument("--topic", help="with --partition: the one partition to elect for (default: none)")
    election.add_argument("--partition", type=int, help="with --topic: the partition (default: none)")
    election.add_argument("--all-topic-partitions", action="store_true", help="every partition (default: off)")
    election.add_argument("--path-to-json-file",
                          help='the partitions, as {"partitions": [{"topic": "t", "partition": 0}]} (default: none)')
    election.set_defaults(func=lambda a: asyncio.run(_leader_election(a)))
