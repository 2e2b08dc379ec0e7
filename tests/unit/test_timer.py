import random

import pytest

from replog.broker.timer import DeadlineQueue, DeadlineQueueFull, KeyedDeadlines


@pytest.mark.parametrize("adds, now_ms, expired, next_deadline", [
    ([], 100, [], None),
    ([(30, "c"), (10, "a"), (20, "b")], 100, ["a", "b", "c"], None),
    ([(30, "c"), (10, "a"), (20, "b")], 20, ["a", "b"], 30),  # a deadline equal to now has come
    ([(30, "c"), (10, "a"), (20, "b")], 9, [], 10),
    ([(5, "x"), (5, "y"), (1, "w"), (5, "z")], 5, ["w", "x", "y", "z"], None),  # ties in insertion order
    ([(0, "zero"), (-5, "past")], 0, ["past", "zero"], None),
])
def test_pop_expired_in_deadline_order(adds, now_ms, expired, next_deadline):
    queue = DeadlineQueue(max_size=10)
    for deadline_ms, item in adds:
        queue.add(deadline_ms, item)
    assert queue.pop_expired(now_ms) == expired
    assert len(queue) == len(adds) - len(expired)
    assert queue.next_deadline() == next_deadline


@pytest.mark.parametrize("cancelled, expired, next_deadline", [
    ([], ["a", "b", "c"], 10),
    (["b"], ["a", "c"], 10),
    (["a"], ["b", "c"], 20),  # cancelling the earliest moves next_deadline at once
    (["a", "b", "c"], [], None),
    (["c", "a"], ["b"], 20),
])
def test_cancel(cancelled, expired, next_deadline):
    queue = DeadlineQueue(max_size=10)
    entries = {item: queue.add(deadline_ms, item) for deadline_ms, item in [(10, "a"), (20, "b"), (30, "c")]}
    for item in cancelled:
        assert queue.cancel(entries[item])
        assert not queue.cancel(entries[item])  # a second cancel is a no-op
    assert len(queue) == 3 - len(cancelled)
    assert queue.next_deadline() == next_deadline
    assert sorted(queue.live_items()) == expired
    assert queue.pop_expired(100) == expired
    assert len(queue) == 0 and queue.stored == 0


def test_cancel_after_expiry_is_a_no_op():
    queue = DeadlineQueue(max_size=10)
    entry = queue.add(10, "a")
    queue.add(20, "b")
    assert queue.pop_expired(10) == ["a"]
    assert not entry.active
    assert not queue.cancel(entry)
    assert len(queue) == 1 and queue.pop_expired(20) == ["b"]


@pytest.mark.parametrize("cancel_order", ["latest_first", "earliest_first", "shuffled"])
def test_memory_follows_live_entries_through_many_cancels(cancel_order):
    queue = DeadlineQueue(max_size=2000)
    entries = [queue.add(deadline_ms, deadline_ms) for deadline_ms in range(2000)]
    survivors = entries[::10]
    doomed = [entry for index, entry in enumerate(entries) if index % 10]
    if cancel_order == "latest_first":
        doomed.reverse()  # never at the top of the heap: only a rebuild drops them
    elif cancel_order == "shuffled":
        random.Random(7).shuffle(doomed)
    for entry in doomed:
        assert queue.cancel(entry)
        assert queue.stored <= 2 * len(queue)
    assert len(queue) == len(survivors)
    assert queue.pop_expired(2000) == [entry.deadline_ms for entry in survivors]
    assert queue.stored == 0


def test_max_size_counts_live_entries():
    queue = DeadlineQueue(max_size=2)
    first = queue.add(10, "a")
    queue.add(20, "b")
    with pytest.raises(DeadlineQueueFull):
        queue.add(30, "c")
    assert queue.cancel(first)
    queue.add(30, "c")  # a cancelled entry frees its place
    assert queue.pop_expired(20) == ["b"]
    queue.add(40, "d")  # so does an expired one
    assert len(queue) == 2


def test_matches_a_sorted_list_under_random_operations():
    rng = random.Random(1234)
    queue = DeadlineQueue(max_size=64)
    model: list[tuple[int, int]] = []  # (deadline_ms, sequence) of live entries
    entries = {}
    now_ms = 0
    for sequence in range(5000):
        action = rng.random()
        if action < 0.5 and len(model) < queue.max_size:
            deadline_ms = now_ms + rng.randrange(50)
            entries[sequence] = queue.add(deadline_ms, sequence)
            model.append((deadline_ms, sequence))
        elif action < 0.8 and model:
            victim = model.pop(rng.randrange(len(model)))
            assert queue.cancel(entries.pop(victim[1]))
        else:
            now_ms += rng.randrange(10)
            model.sort()
            due = [s for d, s in model if d <= now_ms]
            assert queue.pop_expired(now_ms) == due
            model = model[len(due):]
            for s in due:
                del entries[s]
        assert len(queue) == len(model)
        assert queue.next_deadline() == min(model, default=(None,))[0]
        assert queue.stored <= 2 * len(queue)


# ------------------------------------------------------------ KeyedDeadlines


@pytest.mark.parametrize(("operations", "pop_at", "expected", "live"), [
    ([("set", "a", 10)], 10, ["a@10"], 0),
    ([("set", "a", 10)], 9, [], 1),
    # a key set again replaces its earlier deadline: only the newer fires, whether sooner or later
    ([("set", "a", 10), ("set", "a", 30)], 20, [], 1),
    ([("set", "a", 10), ("set", "a", 30)], 30, ["a@30"], 0),
    ([("set", "a", 30), ("set", "a", 5)], 30, ["a@5"], 0),
    ([("set", "a", 10), ("cancel", "a", 0)], 99, [], 0),
    ([("set", "a", 20), ("set", "b", 10), ("set", "c", 30)], 25, ["b@10", "a@20"], 1),
])
def test_keyed_deadlines_keep_one_live_deadline_per_key(operations, pop_at, expected, live):
    timers = KeyedDeadlines(max_size=8)
    for operation, key, deadline_ms in operations:
        if operation == "set":
            timers.set(key, deadline_ms, f"{key}@{deadline_ms}")
        else:
            timers.cancel(key)
    assert timers.pop_expired(pop_at) == expected
    assert len(timers) == live


def test_keyed_deadlines_free_a_key_once_it_fired_and_are_bounded():
    timers = KeyedDeadlines(max_size=2)
    timers.set("a", 1, "first")
    assert timers.pop_expired(1) == ["first"] and "a" not in timers
    timers.set("a", 2, "second")
    timers.set("a", 3, "third")  # a replacement does not count twice against the bound
    timers.set("b", 3, "b")
    with pytest.raises(DeadlineQueueFull):
        timers.set("c", 3, "c")
    timers.clear()
    assert len(timers) == 0 and timers.next_deadline() is None
