"""The invariants a simulated run must keep (DESIGN.md, "Invariants worth asserting").

Checked after every simulated event that changed the state they read (World.state_summary):
- one leader per leader epoch: no two brokers ever lead a partition in the same epoch;
- the leader's HW never decreases while it leads (same broker process, same leader epoch);
- HW <= LEO on every replica;
- every replica's epoch cache is strictly increasing in epoch and in start offset;
- the ISR a leader holds contains the leader;
- every ISR member's LEO is at least the leader's HW (all it holds below the HW is checked at the end);
- every acknowledged record is on the current leader (the one the controller names, once it has applied its
  LeaderAndIsr), at its offset, with its value.
Checked once the heal phase has let the cluster settle: all replicas converge (same batches, byte for byte,
up to one LEO; HW == LEO everywhere; the controller's ISR holds every replica), and every acknowledged record
is on every replica.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from replog.log.partition_log import PartitionLog, TopicPartition
from replog.protocol.records import decode_records, iter_batches

if TYPE_CHECKING:
    from .simulation import World


class InvariantViolation(AssertionError):
    pass


def log_batches(log: PartitionLog) -> list[bytes]:
    """Every batch from the log start to the LEO, as stored."""
    batches = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        read = log.read(offset, max_bytes=1 << 20, upper_bound=log.log_end_offset)
        assert read.slice is not None, (log, offset)
        found = list(iter_batches(read.slice.read_bytes()))
        batches += [bytes(batch.buffer) for batch in found]
        offset = found[-1].next_offset
    return batches


def log_values(log: PartitionLog) -> dict[int, bytes | None]:
    """offset -> record value for the whole log."""
    values = {}
    for raw in log_batches(log):
        for batch in iter_batches(raw):
            for record in decode_records(batch):
                values[record.offset] = record.value
    return values


def value_at(log: PartitionLog, offset: int) -> bytes | None:
    """The value of the record at `offset`, or None if the log does not hold it: decodes one batch."""
    if not log.log_start_offset <= offset < log.log_end_offset:
        return None
    read = log.read(offset, max_bytes=1, upper_bound=log.log_end_offset, min_one_batch=True)
    assert read.slice is not None, (log, offset)
    batch = next(iter_batches(read.slice.read_bytes()))
    return next((r.value for r in decode_records(batch) if r.offset == offset), None)


# Above this many offsets to look up, decoding the whole log once is cheaper than one read per offset.
WHOLE_LOG_LOOKUPS = 8


def missing_acknowledged(log: PartitionLog, acknowledged: dict[int, bytes],
                         offsets: list[int] | None = None) -> list[int]:
    """Acknowledged offsets (of `offsets`, default all) that `log` lacks or holds with another value."""
    if not acknowledged:
        return []
    if offsets is None and len(acknowledged) > WHOLE_LOG_LOOKUPS:
        values = log_values(log)
        return sorted(offset for offset, value in acknowledged.items() if values.get(offset) != value)
    return sorted(offset for offset in (acknowledged if offsets is None else offsets)
                  if value_at(log, offset) != acknowledged[offset])


class InvariantChecker:
    def __init__(self, world: World) -> None:
        self.world = world
        self._leader_of_epoch: dict[tuple[TopicPartition, int], int] = {}
        # (broker, incarnation, partition) -> (leader epoch, HW) last seen while it led
        self._leader_hw: dict[tuple[int, int, TopicPartition], tuple[int, int]] = {}
        # partition -> ((broker, incarnation, leader epoch), how many acknowledged records were checked on it)
        self._verified: dict[TopicPartition, tuple[tuple[int, int, int], int]] = {}

    @property
    def leader_epochs_seen(self) -> int:
        """How many (partition, leader epoch) pairs had a leader during the run."""
        return len(self._leader_of_epoch)

    def fail(self, message: str) -> None:
        raise InvariantViolation(message)

    def check_step(self) -> None:
        for broker in self.world.brokers.values():
            if not broker.up:
                continue
            for tp in self.world.topic_partitions:
                partition = broker.partition_of(tp)
                if partition is None:
                    continue
                self._check_replica(broker.broker_id, tp, partition.log)
                if partition.is_leader:
                    self._check_leader(broker, tp, partition)
        for tp in self.world.topic_partitions:
            self._check_acknowledged_on_leader(tp)
            self._check_isr_holds_hw(tp)

    def reassignment_step(self, before, after) -> None:
        """A reassignment changed a partition's replicas (KIP-455): the ISR stays a non-empty subset of the
        replicas, and a reassignment completes (its removing replicas leave) only once every replica it was
        adding is in the ISR, so the replica set never drops the replicas holding the committed records
        before the target holds them."""
        tp = TopicPartition(after.topic, after.partition)
        if not after.isr or not set(after.isr) <= set(after.replicas):
            self.fail(f"{tp}: reassignment left ISR {after.isr} outside replicas {after.replicas}")
        target = [r for r in before.replicas if r not in before.removing_replicas]
        completed = before.is_reassigning and not after.is_reassigning and list(after.replicas) == target
        if completed and not set(before.adding_replicas) <= set(after.isr):
            self.fail(f"{tp}: reassignment to {target} completed with adding replicas {before.adding_replicas} "
                      f"outside the ISR {after.isr}")

    def _check_replica(self, broker_id: int, tp: TopicPartition, log: PartitionLog) -> None:
        if not log.high_watermark <= log.log_end_offset:
            self.fail(f"broker {broker_id} {tp}: HW {log.high_watermark} > LEO {log.log_end_offset}")
        entries = log.epoch_cache.entries()
        for earlier, later in zip(entries, entries[1:], strict=False):
            if not (earlier.epoch < later.epoch and earlier.start_offset < later.start_offset):
                self.fail(f"broker {broker_id} {tp}: epoch cache not monotonic: {entries}")

    def _check_leader(self, broker, tp: TopicPartition, partition) -> None:
        epoch = partition.leader_epoch
        if broker.broker_id not in partition.state.isr:
            self.fail(f"broker {broker.broker_id} leads {tp} in epoch {epoch} outside its ISR {partition.state.isr}")
        first = self._leader_of_epoch.setdefault((tp, epoch), broker.broker_id)
        if first != broker.broker_id:
            self.fail(f"{tp}: brokers {first} and {broker.broker_id} both led epoch {epoch}")
        key = (broker.broker_id, broker.incarnation, tp)
        hw = partition.high_watermark
        previous = self._leader_hw.get(key)
        if previous is not None and previous[0] == epoch and hw < previous[1]:
            self.fail(f"broker {broker.broker_id} {tp}: HW went back from {previous[1]} to {hw} in epoch {epoch}")
        self._leader_hw[key] = (epoch, hw)

    def _check_acknowledged_on_leader(self, tp: TopicPartition) -> None:
        registration = self.world.controller.metadata.registration(tp.topic, tp.partition)
        if registration.leader < 0:
            return
        broker = self.world.brokers[registration.leader]
        partition = broker.partition_of(tp) if broker.up else None
        if partition is None or not partition.is_leader or partition.leader_epoch != registration.leader_epoch:
            return  # the named leader has not taken over yet
        acknowledged = self.world.acknowledged[tp]
        leadership = (broker.broker_id, broker.incarnation, partition.leader_epoch)
        verified = self._verified.get(tp)
        if verified is not None and verified[0] == leadership and verified[1] == len(acknowledged):
            return
        # A leader only appends: what was checked in this leadership stays true, so only newly acknowledged
        # offsets need a look (acknowledgements arrive in dict insertion order).
        newly = list(acknowledged)[verified[1]:] if verified is not None and verified[0] == leadership else None
        missing = missing_acknowledged(partition.log, acknowledged, newly)
        if missing:
            self.world.acknowledged_records_missing(broker, tp, missing)
        self._verified[tp] = (leadership, len(acknowledged))

    def _check_isr_holds_hw(self, tp: TopicPartition) -> None:
        """Every ISR member has everything below the leader's HW (at least up to it: its LEO).

        ISR here is what both the leader and the controller hold, among members that run and have applied
        the current leader epoch: a member the controller has removed, or one restarted and not yet
        re-registered, is in no ISR that matters for an election.
        """
        registration = self.world.controller.metadata.registration(tp.topic, tp.partition)
        leader = self._current_leader(tp, registration)
        if leader is None:
            return
        high_watermark = leader.high_watermark
        for member in set(leader.state.isr) & set(registration.isr) - {registration.leader}:
            broker = self.world.brokers[member]
            follower = broker.partition_of(tp) if broker.up else None
            if follower is None or follower.leader_epoch != registration.leader_epoch:
                continue
            if follower.log.log_end_offset < high_watermark:
                self.fail(f"{tp}: ISR member {member} has LEO {follower.log.log_end_offset} below the HW "
                          f"{high_watermark} of leader {registration.leader} in epoch {registration.leader_epoch}")

    def _current_leader(self, tp: TopicPartition, registration):
        """The leader's Partition if the leader the controller names has applied its leader epoch."""
        if registration.leader < 0:
            return None
        broker = self.world.brokers[registration.leader]
        partition = broker.partition_of(tp) if broker.up else None
        if partition is None or not partition.is_leader or partition.leader_epoch != registration.leader_epoch:
            return None
        return partition

    # ------------------------------------------------------------ after healing

    def convergence_gap(self) -> str | None:
        """Why the cluster has not converged yet, or None once it has."""
        for tp in self.world.topic_partitions:
            registration = self.world.controller.metadata.registration(tp.topic, tp.partition)
            if registration.leader < 0:
                return f"{tp} has no leader"
            if registration.is_reassigning:
                return f"{tp}: reassignment to {registration.replicas} in progress"
            if sorted(registration.isr) != sorted(registration.replicas):
                return f"{tp}: ISR {registration.isr} lacks replicas of {registration.replicas}"
            logs = {}
            for broker_id in registration.replicas:
                broker = self.world.brokers[broker_id]
                log = broker.log_of(tp) if broker.up else None
                if log is None:
                    return f"{tp}: broker {broker_id} has no log"
                if log.high_watermark != log.log_end_offset:
                    return f"{tp}: broker {broker_id} HW {log.high_watermark} != LEO {log.log_end_offset}"
                logs[broker_id] = log
            if len({log.log_end_offset for log in logs.values()}) != 1:
                return f"{tp}: LEOs differ: { {b: log.log_end_offset for b, log in logs.items()} }"
            contents = {b: log_batches(log) for b, log in logs.items()}
            if len({tuple(batches) for batches in contents.values()}) != 1:
                return f"{tp}: logs differ in content"
        return None

    def check_acknowledged_everywhere(self) -> None:
        for tp in self.world.topic_partitions:
            # Every replica; a broker a reassignment removed has deleted its copy.
            replicas = self.world.controller.metadata.registration(tp.topic, tp.partition).replicas
            for broker in (self.world.brokers[b] for b in replicas):
                missing = missing_acknowledged(broker.log_of(tp), self.world.acknowledged[tp])
                if missing:
                    self.world.acknowledged_records_missing(broker, tp, missing)
