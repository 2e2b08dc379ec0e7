"""The chaos run's topic and load, its clients' configurations and its time bounds
(replog/chaos/runner.py)."""

TOPIC = "chaos"
BROKERS = (1, 2, 3)  # LocalCluster's node ids
ASSIGNMENT = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}  # each broker leads one partition at first
TOPIC_CONFIGS = {"min.insync.replicas": "2", "unclean.leader.election.enable": "false"}
PRODUCERS = 3
RECORDS_PER_SECOND = 100  # per producer: load that 2 cores carry while brokers restart
PRODUCER_CONFIG = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
    # One request in flight, and messages that outlive the run (librdkafka's default 300 s), as the crash
    # loop's writers (crash_loop_config.py): a pipelined request refused OUT_OF_ORDER behind a failed one, or a
    # message timing out, makes librdkafka bump its producer epoch and renumber other partitions' possibly
    # written batches from sequence 0, which writes them twice (librdkafka issue 4953, docs/fault-testing.md):
    # a client duplicate the checker would report as the brokers'. With one in flight an OUT_OF_ORDER answer
    # is fatal to the producer instead, and the run reports it.
    "max.in.flight.requests.per.connection": 1,
    # A request to a paused leader must give up well before the message does, so the message can be
    # retried at the new leader; a message outlives any single fault of the schedule.
    "request.timeout.ms": 5_000,
    "message.timeout.ms": 300_000,
    "topic.metadata.refresh.interval.ms": 1_000,
    "log_level": 2,  # connections refused and reset are the point of the run, not news
}
# After healing: a healed cluster answers within seconds; a write still unreported then counts as
# indeterminate (it may or may not have been written), as the checker treats any unknown outcome.
FLUSH_TIMEOUT_S = 70.0
CONVERGENCE_TIMEOUT_S = 60.0
CONSUME_TIMEOUT_S = 60.0
REPLICAS_TIMEOUT_S = 30.0
WATERMARK_TIMEOUT_S = 10.0
CONSUME_BATCH = 1_000
CONSUME_POLL_S = 0.5
# Before a fault: the last one's broker has rejoined every ISR (replica.lag.time.max.ms is 2 s; a restarted
# broker must also recover its log and catch up) well within this, on a loaded 2-core machine.
ISR_WHOLE_TIMEOUT_S = 30.0
# The stated bound: with the ISRs whole and no more writes, followers fetch every replica.fetch.wait.max.ms
# (200 ms) and learn the leader's HW on the next fetch; HWs are checkpointed every 500 ms.
HW_CATCH_UP_BOUND_S = 10.0
FILE_POLL_INTERVAL_S = 0.2  # between scans of the replicas' files
CONSUMER_CONFIG = {
    "enable.auto.commit": False, "log_level": 2,
    # A fetch from a blackholed leader gives up after this, so the reader moves on to the next leader.
    "socket.timeout.ms": 5_000,
}
