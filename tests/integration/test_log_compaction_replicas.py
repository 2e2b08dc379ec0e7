"""A compacted topic on a three-broker cluster: every replica cleans its own log, and a replica that was
down while the leader compacted catches up by fetching across the leader's offset gaps; afterwards every
replica holds the same latest value per key, at the leader's offsets."""

from pathlib import Path

from replog.chaos.log_verifier import verify_partition
from replog.client import Producer
from replog.harness.local_cluster import LocalCluster
from replog.log.checkpoint import OffsetCheckpointFile
from replog.log.config import LogConfig
from replog.log.partition_log import PartitionLog
from replog.protocol.records import decode_records, iter_batches

TOPIC = "compacted-replicas"
KEYS = 30
CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "16384", "min.cleanable.dirty.ratio": "0.1",
           "min.insync.replicas": "1"}


def _cleaned_up_to(cluster: LocalCluster, node: int) -> int:
    path = cluster.brokers[node].log_dir / "cleaner-offset-checkpoint"
    return OffsetCheckpointFile(path).read().get((TOPIC, 0), 0) if path.exists() else 0


def _at_rest(directory: Path) -> list[tuple[int, bytes, bytes]]:
    """The records of a stopped broker's replica, read with the log code itself."""
    log = PartitionLog.open(directory, LogConfig(), clock_ms=lambda: 0, clean_shutdown=True)
    try:
        records, offset = [], log.log_start_offset
        while offset < log.log_end_offset:
            data = log.read(offset, max_bytes=1 << 20, upper_bound=log.log_end_offset).slice.read_bytes()
            for batch in iter_batches(data):
                records += [(r.offset, r.key, r.value) for r in decode_records(batch)]
                offset = batch.next_offset
        return records
    finally:
        log.close()


async def test_a_replica_that_was_down_copies_the_compacted_log(tmp_path):
    cluster = LocalCluster(tmp_path, overrides={"log.cleaner.backoff.ms": "100"})
    try:
        await cluster.start()
        await cluster.controller.create_topic(TOPIC, {0: [1, 2, 3]}, CONFIGS)
        await cluster.kill(3)
        last = {}
        async with Producer(cluster.bootstrap, acks=1, enable_idempotence=False, linger_ms=2) as producer:
            for round_ in range(80):
                for key in range(KEYS):
                    last[b"k%d" % key] = b"v%d-" % round_ + b"x" * 150
                    await producer.send(TOPIC, last[b"k%d" % key], key=b"k%d" % key, partition=0)
            await producer.flush()
        await cluster.wait_for(lambda: _cleaned_up_to(cluster, 1) > 0, 60, "the leader to compact")
        await cluster.restart(3)
        await cluster.wait_for_isr(TOPIC, 0, {1, 2, 3}, timeout=60)
    finally:
        await cluster.stop()
    replicas = {node: _at_rest(cluster.log_dir(node, TOPIC, 0)) for node in (1, 2, 3)}
    for node, records in replicas.items():
        assert {key: value for _, key, value in records} == last, node
        offsets = [offset for offset, _, _ in records]
        assert offsets == sorted(set(offsets)), node
        assert verify_partition(cluster.log_dir(node, TOPIC, 0), compacted=True).problems == [], node
    # Broker 3 copied the leader's log after compaction: it holds fewer records than were produced.
    assert len(replicas[3]) < 80 * KEYS / 2
