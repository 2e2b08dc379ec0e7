"""The crash loop's topic, cluster settings, writers and time bounds (replog/chaos/crash_loop.py)."""

TOPIC = "crash"
BROKERS = (1, 2, 3)  # LocalCluster's node ids
PARTITIONS = 4
ASSIGNMENT = {p: [BROKERS[(p + i) % len(BROKERS)] for i in range(len(BROKERS))] for p in range(PARTITIONS)}
SEGMENT_BYTES = 256 * 1024
INDEX_INTERVAL_BYTES = 512
TOPIC_CONFIGS = {"min.insync.replicas": "2", "unclean.leader.election.enable": "false",
                 "segment.bytes": str(SEGMENT_BYTES), "index.interval.bytes": str(INDEX_INTERVAL_BYTES)}
# Checkpoints every second, so that torn-write rounds find recovery points and HWs on disk to respect.
BROKER_OVERRIDES = {"log.flush.offset.checkpoint.interval.ms": "1000"}
SESSION_TIMEOUT_MS = 2_000  # a killed broker's old session must expire before it may register again
VALUE_BYTES = 200
ACKS_ALL_WRITERS = 2
RECORDS_PER_SECOND = 250  # per writer: heavy for 2 shared cores running three Python brokers
WRITER_CONFIG = {
    "linger.ms": 5,
    "request.timeout.ms": 5_000,
    "message.timeout.ms": 60_000,
    "topic.metadata.refresh.interval.ms": 1_000,
    "log_level": 2,  # refused and reset connections are the point of the run
}
# One request in flight per connection: librdkafka answers OUT_OF_ORDER_SEQUENCE_NUMBER on a request behind a
# failed one (correct, Kafka's brokers refuse the gap too) by bumping the producer epoch and renumbering from 0
# every partition's unacknowledged messages, including ones a leader killed a moment before had written, which
# are then written again (librdkafka issue 4953, docs/fault-testing.md). With one in flight every request is the
# head of its partition's line, that bump cannot happen, and an OUT_OF_ORDER answer is fatal, so seen. A message
# timing out bumps the epoch the same way, so messages live longer than any run (librdkafka's default).
ACKS_ALL_CONFIG = {**WRITER_CONFIG, "acks": "all", "enable.idempotence": True,
                   "max.in.flight.requests.per.connection": 1, "message.timeout.ms": 300_000}
# No retries: an acks=1 retry could write a value twice, which the exactly-once check would count.
ACKS_ONE_CONFIG = {**WRITER_CONFIG, "acks": "1", "enable.idempotence": False, "message.send.max.retries": 0}
ACKS_ONE_PREFIX = "one"
MIN_KILL_DELAY_S = 0.2
MAX_KILL_DELAY_S = 2.0
KILL_AGAIN_CHANCE = 0.2  # the broker just restarted, before it caught up
KILL_LEADER_CHANCE = 0.4
CATCH_UP_TIMEOUT_S = 90.0  # loaded machine: a restarted broker copies what it missed, plus what it lost
UNFENCE_TIMEOUT_S = 30.0
CONSUME_TIMEOUT_S = 120.0
CONSUME_BATCH = 1_000
CONSUME_POLL_S = 0.5
LIVE_RECHECK_S = 1.0  # a live log is read twice; only a problem seen both times is real (not a racing append)
LIVE_READS = 5  # bound on reads of a live log dir whose files a truncation keeps removing under the reader
