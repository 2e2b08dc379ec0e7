import asyncio

from replog.broker.purgatory import DelayedOperation, Purgatory


class Counter(DelayedOperation):
    def __init__(self, timeout_ms: int, threshold: int, source: dict) -> None:
        super().__init__(timeout_ms)
        self.threshold = threshold
        self.source = source
        self.completions = 0
        self.expired = False

    def try_complete(self) -> bool:
        return self.source["value"] >= self.threshold and self.force_complete()

    def on_complete(self) -> None:
        self.completions += 1

    def on_expiration(self) -> None:
        self.expired = True


async def test_completes_at_once_when_condition_holds():
    purgatory = Purgatory("p", 10)
    op = Counter(1000, 1, {"value": 1})
    assert purgatory.try_complete_else_watch(op, ["k"])
    assert op.completions == 1 and purgatory.size == 0


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
    op = Counter(20, 99, {"value": 0})
    assert not purgatory.try_complete_else_watch(op, ["k"])
    async def until_expired():
        while not op.expired:
            await asyncio.sleep(0.005)

    await asyncio.wait_for(until_expired(), 2)
    assert op.expired and op.completions == 1
    assert purgatory.size == 0 and purgatory.expired_total == 1


async def test_full_purgatory_completes_instead_of_growing():
    purgatory = Purgatory("p", 1)
    first, second = Counter(10_000, 9, {"value": 0}), Counter(10_000, 9, {"value": 0})
    assert not purgatory.try_complete_else_watch(first, ["k"])
    assert purgatory.try_complete_else_watch(second, ["k"])
    assert second.completions == 1 and purgatory.size == 1
    purgatory.complete_all()
    assert first.completions == 1 and purgatory.size == 0
