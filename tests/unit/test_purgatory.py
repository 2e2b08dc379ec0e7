import asyncio
import logging

from replog.broker.purgatory import DelayedOperation, Purgatory

from ..conditions import wait_until


class Counter(DelayedOperation):
    def __init__(self, timeout_ms: int, threshold: int, source: dict, expiry_log: list | None = None) -> None:
        super().__init__(timeout_ms)
        self.threshold = threshold
        self.source = source
        self.expiry_log = expiry_log
        self.completions = 0
        self.expired = False

    def try_complete(self) -> bool:
        return self.source["value"] >= self.threshold and self.force_complete()

    def on_complete(self) -> None:
        self.completions += 1

    def on_expiration(self) -> None:
        self.expired = True
        if self.expiry_log is not None:
            self.expiry_log.append(self)


def never(timeout_ms: int, expiry_log: list | None = None) -> Counter:
    """An operation whose condition never holds: only expiry or force completes it."""
    return Counter(timeout_ms, 1, {"value": 0}, expiry_log)


class LoopTimerSpy:
    """Counts the event-loop timers a purgatory has armed and that have neither fired nor been cancelled."""

    def __init__(self, monkeypatch, purgatory: Purgatory) -> None:
        loop = asyncio.get_running_loop()
        self._purgatory = purgatory
        self._call_later = loop.call_later
        self._timers: list[tuple[asyncio.TimerHandle, dict]] = []
        monkeypatch.setattr(loop, "call_later", self._recording_call_later)

    def _recording_call_later(self, delay, callback, *args, **kwargs):
        if getattr(callback, "__self__", None) is not self._purgatory:
            return self._call_later(delay, callback, *args, **kwargs)
        state = {"fired": False}

        def fire(*fire_args):
            state["fired"] = True
            callback(*fire_args)

        handle = self._call_later(delay, fire, *args, **kwargs)
        self._timers.append((handle, state))
        return handle

    @property
    def armed_total(self) -> int:
        return len(self._timers)

    @property
    def pending(self) -> int:
        return sum(1 for handle, state in self._timers if not state["fired"] and not handle.cancelled())


async def test_completes_at_once_when_condition_holds():
    purgatory = Purgatory("p", 10)
    op = Counter(1000, 1, {"value": 1})
    assert purgatory.try_complete_else_watch(op, ["k"])
    assert op.completions == 1 and purgatory.size == 0
    assert purgatory._wakeup is None


async def test_completes_on_key_check_exactly_once():
    purgatory = Purgatory("p", 10)
    state = {"value": 0}
    op = Counter(10_000, 2, state)
    assert not purgatory.try_complete_else_watch(op, ["a", "b"])
    assert purgatory.size == 1
    state["value"] = 2
    assert purgatory.check_and_complete("other") == 0
    assert purgatory.check_and_complete("a") == 1
    assert purgatory.check_and_complete("b") == 0  # already gone from every key
    assert op.completions == 1 and purgatory.size == 0


async def test_expires_after_timeout():
    purgatory = Purgatory("p", 10)
    op = never(20)
    assert not purgatory.try_complete_else_watch(op, ["k"])
    await wait_until(lambda: op.expired)
    assert op.completions == 1
    assert purgatory.size == 0 and purgatory.expired_total == 1
    assert purgatory._wakeup is None


async def test_zero_timeout_expires_on_a_later_loop_iteration_not_synchronously():
    purgatory = Purgatory("p", 10)
    op = never(0)
    assert not purgatory.try_complete_else_watch(op, ["k"])
    assert not op.expired and op.completions == 0 and purgatory.size == 1
    await wait_until(lambda: op.expired)
    assert op.completions == 1 and purgatory.expired_total == 1


async def test_many_timeouts_expire_in_deadline_order_with_one_loop_timer(monkeypatch):
    # A frozen clock makes every deadline its timeout exactly; the loop timer still paces the expiries.
    purgatory = Purgatory("p", 100, clock_ms=lambda: 0)
    spy = LoopTimerSpy(monkeypatch, purgatory)
    expiry_log: list[Counter] = []
    timeouts = [40, 5, 60, 5, 25, 0, 50, 15, 35, 10, 30, 20, 45, 55]
    ops = [never(timeout_ms, expiry_log) for timeout_ms in timeouts]
    for op in ops:
        assert not purgatory.try_complete_else_watch(op, [op.timeout_ms % 3])
        assert spy.pending == 1
    await wait_until(lambda: purgatory.size == 0)
    assert [op.timeout_ms for op in expiry_log] == sorted(timeouts)
    assert all(op.completions == 1 for op in ops)
    assert purgatory.expired_total == len(ops)
    assert spy.pending == 0 and purgatory._wakeup is None
    assert len(purgatory._expirations) == 0


async def test_deadlines_come_from_the_injected_clock(monkeypatch):
    now = {"ms": 1_000}
    purgatory = Purgatory("p", 10, clock_ms=lambda: now["ms"])
    spy = LoopTimerSpy(monkeypatch, purgatory)
    expiry_log: list[Counter] = []
    long_wait, late_short_wait = never(30, expiry_log), never(10, expiry_log)
    purgatory.try_complete_else_watch(long_wait, ["k"])  # deadline 1030
    now["ms"] = 1_025
    purgatory.try_complete_else_watch(late_short_wait, ["k"])  # deadline 1035, despite the shorter timeout
    assert purgatory._expirations.next_deadline() == 1_030
    assert spy.armed_total == 1  # the new deadline is not the earliest: no re-arm
    now["ms"] = 1_040
    await wait_until(lambda: purgatory.size == 0)
    assert expiry_log == [long_wait, late_short_wait]
    assert spy.pending == 0


async def test_earlier_deadline_rearms_the_one_loop_timer(monkeypatch):
    now = {"ms": 0}
    purgatory = Purgatory("p", 10, clock_ms=lambda: now["ms"])
    spy = LoopTimerSpy(monkeypatch, purgatory)
    purgatory.try_complete_else_watch(never(10_000), ["k"])
    purgatory.try_complete_else_watch(soon := never(5), ["k"])
    assert spy.armed_total == 2 and spy.pending == 1
    assert purgatory._wakeup_deadline_ms == 5
    await wait_until(lambda: soon.expired)
    # Fired, then re-armed for the op still waiting.
    assert spy.pending == 1 and purgatory._wakeup_deadline_ms == 10_000
    purgatory.complete_all()
    assert spy.pending == 0


async def test_early_completion_cancels_the_expiration(monkeypatch):
    purgatory = Purgatory("p", 10)
    spy = LoopTimerSpy(monkeypatch, purgatory)
    state = {"value": 0}
    early = Counter(10, 1, state)  # the earliest deadline, and it completes first
    waiting = [never(20), never(30)]
    purgatory.try_complete_else_watch(early, ["hot"])
    for op in waiting:
        purgatory.try_complete_else_watch(op, ["cold"])
    assert len(purgatory._expirations) == 3
    state["value"] = 1
    assert purgatory.check_and_complete("hot") == 1
    assert len(purgatory._expirations) == 2 == purgatory.size
    assert purgatory._expirations.next_deadline() > purgatory._wakeup_deadline_ms  # fires early, harmlessly
    await wait_until(lambda: purgatory.size == 0)
    assert early.completions == 1 and not early.expired
    assert all(op.expired and op.completions == 1 for op in waiting)
    assert purgatory.expired_total == 2
    assert spy.pending == 0


async def test_operations_completed_one_after_another_share_one_loop_timer(monkeypatch):
    """acks=all produces at linger.ms=0: each parks, completes when the HW moves, and leaves the purgatory empty
    before the next arrives. The timer armed for the first serves them all (it fires once, early and
    harmlessly); disarming on empty armed a loop timer per request."""
    purgatory = Purgatory("p", 10)
    spy = LoopTimerSpy(monkeypatch, purgatory)
    for _ in range(20):
        state = {"value": 0}
        op = Counter(30_000, 1, state)
        assert not purgatory.try_complete_else_watch(op, ["partition"])
        state["value"] = 1
        assert purgatory.check_and_complete("partition") == 1
        assert purgatory.size == 0
    assert spy.armed_total == 1
    purgatory.complete_all()
    assert spy.pending == 0 and purgatory._wakeup is None


async def test_operations_parked_one_after_another_never_ask_for_the_running_loop(monkeypatch):
    """asyncio.get_running_loop() makes a getpid system call each time; a parked request used to make one to
    read the loop's clock. Only the one loop timer asks for the loop."""
    purgatory = Purgatory("p", 10)
    loop_asked = []
    get_running_loop = asyncio.get_running_loop
    monkeypatch.setattr(asyncio, "get_running_loop", lambda: loop_asked.append(1) or get_running_loop())
    for _ in range(20):
        state = {"value": 0}
        assert not purgatory.try_complete_else_watch(Counter(30_000, 1, state), ["partition"])
        state["value"] = 1
        assert purgatory.check_and_complete("partition") == 1
    assert len(loop_asked) == 1  # arming the timer for the first
    purgatory.complete_all()


async def test_a_timer_left_armed_on_an_empty_purgatory_fires_without_re_arming(monkeypatch):
    purgatory = Purgatory("p", 10)
    spy = LoopTimerSpy(monkeypatch, purgatory)
    state = {"value": 0}
    op = Counter(10, 1, state)
    purgatory.try_complete_else_watch(op, ["k"])
    state["value"] = 1
    purgatory.check_and_complete("k")
    await wait_until(lambda: spy.pending == 0, "the timer left armed to fire")
    assert spy.armed_total == 1 and purgatory._wakeup is None and purgatory.expired_total == 0


async def test_expired_op_completes_exactly_once():
    purgatory = Purgatory("p", 10)
    state = {"value": 0}
    op = Counter(0, 1, state)
    purgatory.try_complete_else_watch(op, ["k"])
    await wait_until(lambda: op.expired)
    state["value"] = 1
    assert purgatory.check_and_complete("k") == 0
    assert not op.force_complete()
    purgatory.complete_all()
    assert op.completions == 1 and purgatory.expired_total == 1


async def test_op_completed_by_an_earlier_expiry_in_the_same_batch_is_not_expired_again():
    now = {"ms": 0}
    purgatory = Purgatory("p", 10, clock_ms=lambda: now["ms"])
    second = never(10)

    class CompletesSecond(Counter):
        def on_complete(self) -> None:
            super().on_complete()
            second.force_complete()

    first = CompletesSecond(5, 1, {"value": 0})
    purgatory.try_complete_else_watch(first, ["k"])
    purgatory.try_complete_else_watch(second, ["k"])
    now["ms"] = 100  # both are due when the loop timer fires
    await wait_until(lambda: purgatory.size == 0)
    assert first.expired and first.completions == 1
    assert not second.expired and second.completions == 1
    assert purgatory.expired_total == 1


async def test_failing_expiry_hook_does_not_strand_the_batch(caplog):
    now = {"ms": 0}
    purgatory = Purgatory("p", 10, clock_ms=lambda: now["ms"])

    class FailingExpiry(Counter):
        def on_expiration(self) -> None:
            raise RuntimeError("metrics down")

    failing, other = FailingExpiry(5, 1, {"value": 0}), never(10)
    purgatory.try_complete_else_watch(failing, ["k"])
    purgatory.try_complete_else_watch(other, ["k"])
    now["ms"] = 100
    with caplog.at_level(logging.ERROR, logger="replog.broker.purgatory"):
        await wait_until(lambda: purgatory.size == 0)
    assert failing.completions == 1 and other.expired and other.completions == 1
    assert "metrics down" in caplog.text


async def test_complete_all_answers_everything_and_disarms(monkeypatch):
    purgatory = Purgatory("p", 10)
    spy = LoopTimerSpy(monkeypatch, purgatory)
    ops = [never(60_000), never(30_000), never(90_000)]
    for op in ops:
        purgatory.try_complete_else_watch(op, [])  # even with no key to be woken by
    assert spy.pending == 1
    purgatory.complete_all()
    assert all(op.completions == 1 and not op.expired for op in ops)
    assert purgatory.size == 0 and len(purgatory._expirations) == 0
    assert purgatory._wakeup is None and spy.pending == 0
    assert purgatory.expired_total == 0


async def test_full_purgatory_completes_instead_of_growing():
    purgatory = Purgatory("p", 1)
    first, second = never(10_000), never(10_000)
    assert not purgatory.try_complete_else_watch(first, ["k"])
    assert purgatory.try_complete_else_watch(second, ["k"])
    assert second.completions == 1 and purgatory.size == 1
    purgatory.complete_all()
    assert first.completions == 1 and purgatory.size == 0


def test_constructed_outside_a_running_loop():
    # ReplicaManager builds its purgatories before the loop may be running.
    assert Purgatory("p", 1).size == 0


class RecordsWokenKey(Counter):
    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.woken_by = []

    def try_complete_for(self, key) -> bool:
        self.woken_by.append(key)
        return super().try_complete_for(key)


async def test_check_and_complete_tells_the_operation_which_key_changed():
    purgatory = Purgatory("test", 10)
    source = {"value": 0}
    op = RecordsWokenKey(60_000, 1, source)
    assert not purgatory.try_complete_else_watch(op, ["a", "b"])
    purgatory.check_and_complete("b")
    source["value"] = 1
    purgatory.check_and_complete("a")
    assert op.woken_by == ["b", "a"] and op.completions == 1
