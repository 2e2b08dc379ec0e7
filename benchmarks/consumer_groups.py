"""Consumer groups (issue 15, item 8): how long a group of 1, 10 and 50 members takes to form, how fast and
how quickly offsets are committed, and what consuming through a group costs against assign(), on one
broker (commits also on a 3-broker cluster, where __consumer_offsets has 3 replicas; full mode only).

Rebalance: N bundled members (replog.client.group_member) send JoinGroup at once for a topic of N
partitions; each rejoins as soon as its heartbeat (every 100 ms here) says the group rebalances, as the
consumer does on its next poll; the figure is the time until all N hold their partitions in one
generation. Measured with group.initial.rebalance.delay.ms=0, where members arriving a few ms apart cost
extra rounds, and with Kafka's default 3000, which waits for them and dominates the figure. The baseline is
one member alone, delay 0.

Commits: OffsetCommit of one partition through the bundled consumer, one in flight (latency p50/p99 and
rate), and 16 committers of 16 groups at once (rate); a commit is answered once the offsets record is
replicated, so the baselines are acks=all produces of one record: one in flight, and 16 producers at once.

Consume: a backlog of 1 KiB records over 4 partitions read to the end by the bundled consumer, once through
a group (subscribe, from joining to the last record, with auto-commit as shipped) and once through assign()
and seek_to_beginning, alternating; the assign() figure is the baseline.
"""

import asyncio
import os
import time
from pathlib import Path

from replog.client import Admin, Consumer, NewTopic, Producer
from replog.client.cluster import Cluster
from replog.client.group_member import GroupMember
from replog.harness.broker_process import BrokerProcess

from .harness import MiB, Result, Stats, percentile, replicated_cluster

NAME = "groups"
NO_DELAY = {"group.initial.rebalance.delay.ms": "0"}
HEARTBEAT_MS = 100
REJOIN_CHECK_S = 0.005  # how often a settled member looks at what its heartbeat found
PARALLEL_COMMITTERS = 16
BACKLOG_TOPIC = "group-backlog"
BACKLOG_PARTITIONS = 4
VALUE_BYTES = 1024


async def create_topic(bootstrap: str, topic: str, partitions: int, replication: int = 1) -> None:
    async with Admin(bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, partitions, replication)])


# rebalance


async def _member_until_stable(member: GroupMember, index: int, synced: dict, expected: int,
                               stable: asyncio.Event) -> None:
    """Join, and rejoin whenever the heartbeat asks, until every member holds partitions of one generation."""
    while True:
        assigned = await member.join()
        synced[index] = (member.generation, assigned)
        generations = {generation for generation, _ in synced.values()}
        if len(synced) == expected and len(generations) == 1:
            stable.set()
        while not (stable.is_set() or member.needs_rejoin):
            await asyncio.sleep(REJOIN_CHECK_S)
        if stable.is_set():
            return


async def form_group(bootstrap: str, topic: str, group_id: str, members: int) -> float:
    """Seconds from N JoinGroups sent at once until the group is stable with all N."""
    clusters = [Cluster(bootstrap, client_id=f"bench-member-{i}") for i in range(members)]
    group = [GroupMember(c, group_id, [topic], heartbeat_interval_ms=HEARTBEAT_MS, session_timeout_ms=10_000)
             for c in clusters]
    try:
        await asyncio.gather(*(c.refresh([topic]) for c in clusters))  # connections outside the timed region
        synced: dict[int, tuple[int, list]] = {}
        stable = asyncio.Event()
        started = time.perf_counter()
        await asyncio.gather(*(_member_until_stable(m, i, synced, members, stable) for i, m in enumerate(group)))
        seconds = time.perf_counter() - started
        owned = sorted(tp for _, assigned in synced.values() for tp in assigned)
        assert owned == [(topic, p) for p in range(members)], owned
        return seconds
    finally:
        await asyncio.gather(*(m.leave() for m in group))
        await asyncio.gather(*(c.close() for c in clusters))


def rebalance_results(workdir: Path, plan: dict[str, tuple[tuple[int, ...], int]]) -> list[Result]:
    """plan: initial delay (ms) -> (group sizes, repeats); the first case must be one member, delay 0."""
    results = []
    baseline = None
    for delay, (sizes, repeats) in plan.items():
        overrides = {"group.initial.rebalance.delay.ms": delay}
        broker = BrokerProcess(workdir / f"groups-rebalance-{delay}", output=workdir / f"groups-rebalance-{delay}.out",
                               overrides=overrides)
        broker.start()
        try:
            # Untimed: the first group creates __consumer_offsets (50 partitions), which no later one pays.
            asyncio.run(create_topic(broker.bootstrap, "warm-up", 1))
            asyncio.run(form_group(broker.bootstrap, "warm-up", "warm-up", 1))
            for members in sizes:
                topic = f"rebalance-{members}"
                asyncio.run(create_topic(broker.bootstrap, topic, members))
                samples = [asyncio.run(form_group(broker.bootstrap, topic, f"rebalance-{members}-{i}", members))
                           for i in range(repeats)]
                stats = Stats.of([s * 1e6 for s in samples])
                if baseline is None:  # the first case: one member, delay 0
                    assert members == 1 and delay == "0"
                    baseline = stats.median
                results.append(Result(NAME, f"group of {members} formed, initial delay {delay} ms", "us", stats,
                                      "1 member, delay 0", baseline, {"heartbeat_interval_ms": HEARTBEAT_MS}))
        finally:
            broker.stop()
    return results


# commits


async def commit_latencies(bootstrap: str, topic: str, group_id: str, count: int) -> list[float]:
    async with Consumer(bootstrap, group_id=group_id, enable_auto_commit=False) as consumer:
        await consumer.commit({(topic, 0): 0})  # the coordinator lookup, and the offsets topic, untimed
        latencies = []
        for offset in range(1, count + 1):
            started = time.perf_counter()
            await consumer.commit({(topic, 0): offset})
            latencies.append((time.perf_counter() - started) * 1e6)
        return latencies


async def produce_latencies(bootstrap: str, topic: str, partition: int, count: int) -> list[float]:
    async with Producer(bootstrap, acks="all", linger_ms=0) as producer:
        await (await producer.send(topic, b"warm", partition=partition))
        latencies = []
        for _ in range(count):
            started = time.perf_counter()
            await (await producer.send(topic, b"x" * 64, partition=partition))
            latencies.append((time.perf_counter() - started) * 1e6)
        return latencies


async def parallel_rate(one, count: int) -> float:
    """Operations per second of PARALLEL_COMMITTERS tasks, each `one(index, count)` returning latencies."""
    started = time.perf_counter()
    await asyncio.gather(*(one(i, count) for i in range(PARALLEL_COMMITTERS)))
    return PARALLEL_COMMITTERS * count / (time.perf_counter() - started)


async def commit_results(bootstrap: str, label: str, count: int, repeats: int, replication: int) -> list[Result]:
    topic = f"commits-{label}".replace("=", "")
    await create_topic(bootstrap, topic, PARALLEL_COMMITTERS, replication)
    p50, p99, rates, base_p50, base_p99, base_rates, parallel, base_parallel = ([] for _ in range(8))
    for repeat in range(repeats):  # alternating, so a slow patch of a shared machine hits both alike
        commits = sorted(await commit_latencies(bootstrap, topic, f"committer-{label}-{repeat}", count))
        produces = sorted(await produce_latencies(bootstrap, topic, 0, count))
        p50.append(percentile(commits, 0.5))
        p99.append(percentile(commits, 0.99))
        rates.append(len(commits) / (sum(commits) / 1e6))
        base_p50.append(percentile(produces, 0.5))
        base_p99.append(percentile(produces, 0.99))
        base_rates.append(len(produces) / (sum(produces) / 1e6))

        async def one_group_committing(index: int, n: int, repeat: int = repeat) -> list[float]:
            return await commit_latencies(bootstrap, topic, f"parallel-{label}-{repeat}-{index}", n)

        async def one_producer(index: int, n: int) -> list[float]:
            return await produce_latencies(bootstrap, topic, index, n)  # each on its own partition

        parallel.append(await parallel_rate(one_group_committing, count))
        base_parallel.append(await parallel_rate(one_producer, count))
    extra = {"commits": count, "offsets_topic_replication": replication}
    return [
        Result(NAME, f"commit latency p50, {label}", "us", Stats.of(p50), "acks=all produce p50",
               Stats.of(base_p50).median, extra),
        Result(NAME, f"commit latency p99, {label}", "us", Stats.of(p99), "acks=all produce p99",
               Stats.of(base_p99).median, extra),
        Result(NAME, f"commits/s, 1 in flight, {label}", "op/s", Stats.of(rates),
               "acks=all produces/s, 1 in flight", Stats.of(base_rates).median, extra),
        Result(NAME, f"commits/s, {PARALLEL_COMMITTERS} groups at once, {label}", "op/s", Stats.of(parallel),
               f"acks=all produces/s, {PARALLEL_COMMITTERS} producers", Stats.of(base_parallel).median, extra),
    ]


async def replicated_commit_results(workdir: Path, count: int, repeats: int) -> list[Result]:
    async with replicated_cluster(workdir / "groups-rf3") as cluster:
        return await commit_results(cluster.bootstrap, "RF=3", count, repeats, replication=3)


# consume through a group against assign()


async def fill_backlog(bootstrap: str, volume: int) -> int:
    await create_topic(bootstrap, BACKLOG_TOPIC, BACKLOG_PARTITIONS)
    value = os.urandom(VALUE_BYTES)
    count = volume // VALUE_BYTES
    async with Producer(bootstrap, acks=1, linger_ms=5, batch_size=1_000_000) as producer:
        for i in range(count):
            await producer.send(BACKLOG_TOPIC, value, partition=i % BACKLOG_PARTITIONS)
        await producer.flush()
    return count


async def read_backlog(bootstrap: str, count: int, group_id: str | None) -> float:
    """Bytes per second reading `count` records from the start, through a group or through assign()."""
    async with Consumer(bootstrap, group_id=group_id, auto_offset_reset="earliest") as consumer:
        await consumer.cluster.refresh([BACKLOG_TOPIC])  # the connection outside the timed region
        started = time.perf_counter()
        if group_id is None:
            consumer.assign([(BACKLOG_TOPIC, p) for p in range(BACKLOG_PARTITIONS)])
            consumer.seek_to_beginning()
        else:
            consumer.subscribe([BACKLOG_TOPIC])
        read = 0
        while read < count:
            read += sum(len(records) for records in (await consumer.getmany(1000)).values())
        return count * VALUE_BYTES / (time.perf_counter() - started)


def consume_results(bootstrap: str, volume: int, repeats: int) -> list[Result]:
    count = asyncio.run(fill_backlog(bootstrap, volume))
    through_group, through_assign = [], []
    for repeat in range(repeats):
        through_assign.append(asyncio.run(read_backlog(bootstrap, count, None)))
        through_group.append(asyncio.run(read_backlog(bootstrap, count, f"reader-{repeat}")))
    assign = Stats.of(through_assign)
    return [Result(NAME, f"consume {volume // MiB} MiB through a group", "B/s", Stats.of(through_group),
                   "the same through assign()", assign.median, {"records": count, "assign": assign.samples})]


def run(quick: bool, workdir: Path) -> list[Result]:
    if quick:
        results = rebalance_results(workdir, {"0": ((1, 10), 2), "3000": ((10,), 1)})
    else:
        results = rebalance_results(workdir, {"0": ((1, 10, 50), 3), "3000": ((1, 10, 50), 2)})
    commits, repeats = (200, 2) if quick else (2_000, 3)
    broker = BrokerProcess(workdir / "groups-logs", output=workdir / "groups-broker.out", overrides=NO_DELAY)
    broker.start()
    try:
        results += asyncio.run(commit_results(broker.bootstrap, "RF=1", commits, repeats, replication=1))
        results += consume_results(broker.bootstrap, (8 if quick else 256) * MiB, repeats)
    finally:
        broker.stop()
    if not quick:
        results += asyncio.run(replicated_commit_results(workdir, commits, repeats))
    return results
