"""`replog reassign`: Kafka's kafka-reassign-partitions.sh, with its flags, JSON files and messages.

--generate proposes an assignment of whole topics over a broker list; --execute starts the reassignments of a
reassignment file (with --throttle, replication of the moving partitions is limited, as Kafka's tool does it:
the rate on every broker involved, the throttled replicas on each topic); --verify reports each partition and,
once all are done, removes the throttles; --cancel reverts the reassignments in progress.
"""

import argparse
import asyncio
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from kio.schema.errors import ErrorCode

from replog.client import cluster_admin
from replog.client.admin import Admin
from replog.client.cluster import ClusterSnapshot
from replog.client.errors import KafkaError, error_name
from replog.controller.assignment import assign_replicas
from replog.controller.cluster import ControllerError

Assignment = dict[tuple[str, int], tuple[int, ...]]
LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
LEADER_REPLICAS, FOLLOWER_REPLICAS = "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"


def parse_reassignment(text: str, source: str) -> Assignment:
    """{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}.
    Only "any" log dirs are supported: replog brokers choose the directory of each log themselves."""
    try:
        document = json.loads(text)
        assignment: Assignment = {}
        for p in document["partitions"]:
            key = (str(p["topic"]), int(p["partition"]))
            if key in assignment:
                raise ValueError(f"partition {key[0]}-{key[1]} appears twice")
            replicas = tuple(int(r) for r in p["replicas"])
            log_dirs = p.get("log_dirs", ["any"] * len(replicas))
            if len(log_dirs) != len(replicas):
                raise ValueError(f"{key[0]}-{key[1]}: log_dirs and replicas differ in length")
            if any(d != "any" for d in log_dirs):
                raise ValueError(f"{key[0]}-{key[1]}: only \"any\" log dirs are supported")
            assignment[key] = replicas
    except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as e:
        raise ValueError(f"{source}: not a kafka-reassign-partitions file ({e!r})") from e
    if not assignment:
        raise ValueError(f"{source}: no partitions to reassign")
    return assignment


def format_reassignment(assignment: Mapping[tuple[str, int], Sequence[int]]) -> str:
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())]}, separators=(",", ":"))


def propose(current: Assignment, brokers: Sequence[int], racks: Mapping[int, str | None]) -> Assignment:
    """--generate: each topic's partitions spread over `brokers` with its replication factor (Kafka's
    AdminUtils.assignReplicasToBrokers, rack-aware when racks are set)."""
    proposed: Assignment = {}
    for topic in sorted({t for t, _ in current}):
        partitions = sorted(p for t, p in current if t == topic)
        factor = len(current[(topic, partitions[0])])
        try:
            spread = assign_replicas(list(brokers), len(partitions), factor, racks=racks)
        except ControllerError as e:
            raise ValueError(f"topic {topic}: {str(e).split(': ', 1)[-1]}") from e
        proposed.update({(topic, p): spread[i] for i, p in enumerate(partitions)})
    return proposed


def throttled_replicas(current: Assignment, target: Assignment) -> dict[str, dict[str, str]]:
    """Per topic, the throttled-replicas configs Kafka's tool sets: the leader side on the current replicas
    (any of them may lead the move), the follower side on the replicas being added."""
    configs: dict[str, dict[str, list[str]]] = {}
    for (topic, partition), replicas in sorted(target.items()):
        now = current[(topic, partition)]
        side = configs.setdefault(topic, {LEADER_REPLICAS: [], FOLLOWER_REPLICAS: []})
        side[LEADER_REPLICAS] += [f"{partition}:{b}" for b in now]
        side[FOLLOWER_REPLICAS] += [f"{partition}:{b}" for b in replicas if b not in now]
    return {topic: {k: ",".join(v) for k, v in side.items() if v} for topic, side in configs.items()}


def _current(snapshot: ClusterSnapshot, keys: Iterable[tuple[str, int]]) -> Assignment:
    current = {}
    for topic, partition in keys:
        info = snapshot.topics.get(topic)
        if info is None or partition not in info.partitions:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"partition {topic}-{partition} does not exist")
        current[(topic, partition)] = info.partitions[partition].replicas
    return current


async def _generate(args: argparse.Namespace) -> int:
    if not args.topics_to_move_json_file or not args.broker_list:
        raise ValueError("--generate needs --topics-to-move-json-file and --broker-list")
    try:
        topics = [str(t["topic"]) for t in json.loads(Path(args.topics_to_move_json_file).read_text())["topics"]]
        brokers = [int(b) for b in args.broker_list.split(",")]
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"--topics-to-move-json-file or --broker-list: {e!r}") from e
    async with Admin(args.bootstrap_server) as admin:
        snapshot = await admin.cluster.refresh(set(topics))
        keys = [(t, p) for t in topics for p in (snapshot.topics[t].partitions if t in snapshot.topics else [0])]
        current = _current(snapshot, keys)
        unknown = [b for b in brokers if b not in snapshot.brokers]
        if unknown:
            raise ValueError(f"brokers {unknown} in --broker-list are not in the cluster")
        racks = {b: snapshot.brokers[b].rack for b in brokers}
    print(f"Current partition replica assignment\n{format_reassignment(current)}\n")
    print(f"Proposed partition reassignment configuration\n{format_reassignment(propose(current, brokers, racks))}")
    return 0


async def _execute(args: argparse.Namespace) -> int:
    target = parse_reassignment(Path(args.reassignment_json_file).read_text(), args.reassignment_json_file)
    if args.throttle is not None and args.throttle <= 0:
        raise ValueError("--throttle must be a positive number of bytes per second")
    async with Admin(args.bootstrap_server) as admin:
        if not args.additional and await cluster_admin.list_partition_reassignments(admin):
            raise ValueError("Cannot execute because there is an existing partition assignment.  Use --additional "
                             "to override this and create a new partition assignment in addition to the existing "
                             "one.")
        current = _current(await admin.cluster.refresh({t for t, _ in target}), target)
        print(f"Current partition replica assignment\n\n{format_reassignment(current)}\n\n"
              "Save this to use as the --reassignment-json-file option during rollback")
        if args.throttle is not None:
            await _set_throttles(admin, current, target, args.throttle)
        answers = await cluster_admin.alter_partition_reassignments(
            admin, target, allow_replication_factor_change=not args.disallow_replication_factor_change)
    return _report(answers, "start", "started")


async def _set_throttles(admin: Admin, current: Assignment, target: Assignment, rate: int) -> None:
    for topic, configs in throttled_replicas(current, target).items():
        await cluster_admin.alter_configs(admin, cluster_admin.TOPIC, topic, set_configs=configs, delete_configs=())
    brokers = sorted({b for r in current.values() for b in r} | {b for r in target.values() for b in r})
    for broker in brokers:
        await cluster_admin.alter_configs(admin, cluster_admin.BROKER, str(broker),
                                          set_configs={LEADER_RATE: str(rate), FOLLOWER_RATE: str(rate)},
                                          delete_configs=())
    print("Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle "
          "is removed.")
    print(f"The inter-broker throttle limit was set to {rate} B/s")


async def _clear_throttles(admin: Admin, topics: Iterable[str], brokers: Iterable[int]) -> None:
    brokers = sorted(brokers)
    for broker in brokers:
        await cluster_admin.alter_configs(admin, cluster_admin.BROKER, str(broker), set_configs={},
                                          delete_configs=(LEADER_RATE, FOLLOWER_RATE))
    print("Clearing broker-level throttles on brokers " + ",".join(str(b) for b in brokers))
    for topic in sorted(set(topics)):
        await cluster_admin.alter_configs(admin, cluster_admin.TOPIC, topic, set_configs={},
                                          delete_configs=(LEADER_REPLICAS, FOLLOWER_REPLICAS))
        print(f"Clearing topic-level throttles on topic {topic}")


async def _verify(args: argparse.Namespace) -> int:
    target = parse_reassignment(Path(args.reassignment_json_file).read_text(), args.reassignment_json_file)
    async with Admin(args.bootstrap_server) as admin:
        ongoing = await cluster_admin.list_partition_reassignments(admin, sorted(target))
        snapshot = await admin.cluster.refresh({t for t, _ in target})
        current = _current(snapshot, target)
        print("Status of partition reassignment:")
        pending = 0
        for (topic, partition), replicas in sorted(target.items()):
            name = f"{topic}-{partition}"
            if (topic, partition) in ongoing:
                pending += 1
                print(f"Reassignment of partition {name} is still in progress.")
            elif current[(topic, partition)] == replicas:
                print(f"Reassignment of partition {name} is completed.")
            else:
                print(f"There is no active reassignment of partition {name}, but replica set is "
                      f"{list(current[(topic, partition)])} rather than {list(replicas)}.")
        if not pending:  # Kafka's tool clears the throttles once nothing it moved is moving
            await _clear_throttles(admin, (t for t, _ in target), snapshot.brokers)
    return 0


async def _cancel(args: argparse.Namespace) -> int:
    target = parse_reassignment(Path(args.reassignment_json_file).read_text(), args.reassignment_json_file)
    async with Admin(args.bootstrap_server) as admin:
        answers = await cluster_admin.alter_partition_reassignments(admin, dict.fromkeys(target))
        if not args.preserve_throttles:
            snapshot = await admin.cluster.refresh({t for t, _ in target})
            await _clear_throttles(admin, (t for t, _ in target), snapshot.brokers)
    return _report(answers, "cancel", "cancelled")


def _report(answers: Mapping[tuple[str, int], tuple[int, str | None]], verb: str, done: str) -> int:
    failed = {k: v for k, v in answers.items() if v[0] != 0}
    succeeded = sorted(k for k in answers if k not in failed)
    if succeeded:
        print(f"Successfully {done} partition reassignments for " + ",".join(f"{t}-{p}" for t, p in succeeded))
    for (topic, partition), (code, message) in sorted(failed.items()):
        print(f"Failed to {verb} the reassignment of {topic}-{partition}: {error_name(code)}"
              f"{': ' + message if message else ''}")
    if failed:
        raise KafkaError(next(iter(failed.values()))[0], f"{len(failed)} partition reassignment(s) failed")
    return 0


def add_reassign_command(commands, bootstrap) -> None:
    """Register `reassign` on the CLI's subparsers; bootstrap(parser) adds --bootstrap-server."""
    reassign = commands.add_parser("reassign", help="move partitions between brokers",
                                   description="Move partition replicas between brokers, as "
                                               "kafka-reassign-partitions.sh.")
    bootstrap(reassign)
    action = reassign.add_mutually_exclusive_group(required=True)
    action.add_argument("--generate", action="store_true",
                        help="propose an assignment of --topics-to-move-json-file over --broker-list (one of the four "
                             "actions is required)")
    action.add_argument("--execute", action="store_true",
                        help="start the reassignment of --reassignment-json-file (one action is required)")
    action.add_argument("--verify", action="store_true",
                        help="report the reassignment of --reassignment-json-file; clear throttles once done (one "
                             "action is required)")
    action.add_argument("--cancel", action="store_true",
                        help="revert the reassignments in progress of --reassignment-json-file (one action is required)")
    reassign.add_argument("--topics-to-move-json-file",
                          help='--generate: {"topics": [{"topic": "t"}], "version": 1} (default: none)')
    reassign.add_argument("--broker-list", help="--generate: the brokers to spread over, as 1,2,3 (default: none)")
    reassign.add_argument("--reassignment-json-file",
                          help='{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2], '
                               '"log_dirs": ["any", "any"]}]} (required but with --generate)')
    reassign.add_argument("--throttle", type=int, metavar="BYTES/S",
                          help="--execute: limit the moving replicas' replication to this rate (default: none)")
    reassign.add_argument("--disallow-replication-factor-change", action="store_true",
                          help="--execute: refuse a partition whose target changes its replica count (KIP-860; "
                               "default: off)")
    reassign.add_argument("--additional", action="store_true",
                          help="--execute: start even while other reassignments are in progress (default: off)")
    reassign.add_argument("--preserve-throttles", action="store_true",
                          help="--cancel: leave the throttles in place (default: off)")

    def run(args: argparse.Namespace) -> int:
        if args.generate:
            return asyncio.run(_generate(args))
        if not args.reassignment_json_file:
            raise ValueError("--reassignment-json-file is required")
        step = _execute if args.execute else _verify if args.verify else _cancel
        return asyncio.run(step(args))

    reassign.set_defaults(func=run)
