"""DelayedProduce: an acks=all Produce parked until the high watermark passes what it appended, or its timeout."""

from kio.schema.errors import ErrorCode

from replog.server.completion import Completion

from .purgatory import DelayedOperation


class DelayedProduce(DelayedOperation):
    """Waits until every appended partition's HW reaches its last offset + 1 (facts §3)."""

    def __init__(self, replica_manager, timeout_ms: int, results: dict, appended: dict) -> None:
        super().__init__(max(0, timeout_ms))
        self._replica_manager = replica_manager
        self._results = results
        # Until its condition is met, each partition's answer is a timeout (Kafka's DelayedProduce).
        self._pending = {key: r.info.last_offset + 1 for key, r in appended.items()}
        for key in self._pending:
            results[key].error_code = ErrorCode.request_timed_out
        # The handler's encoding runs in the call that moves the HW, as Kafka's responseCallback does.
        self.future = Completion()

    def try_complete(self) -> bool:
        for key in list(self._pending):
            self._check(key)
        return not self._pending and self.force_complete()

    def try_complete_for(self, key) -> bool:
        # Whatever can finish a partition (its HW, leadership, log dir, deletion) wakes its key, so the
        # others are as they were at the last check: re-checking them on every HW move made a produce to
        # 1,000 partitions cost a million checks.
        if key in self._pending:
            self._check(key)
        return not self._pending and self.force_complete()

    def _check(self, key) -> None:
        partition = self._replica_manager.get_partition(*key)
        if partition is None:
            done, error = True, ErrorCode.unknown_topic_or_partition
        else:
            done, error = partition.check_enough_replicas_reach_offset(self._pending[key])
        if done:
            self._results[key].error_code = error
            del self._pending[key]

    def on_complete(self) -> None:
        if not self.future.done():
            self.future.set_result(self._results)
