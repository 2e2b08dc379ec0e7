"""What an acks=all Produce costs the leader at RF=3, one request at a time, in process: the append and the two
followers' parked fetches it answers (DelayedFetch: the check, the fresh read, the Fetch handler's session
bookkeeping and encoding), and the rest of the round (the followers' next fetches, the HW move, the consumer).

Real ReplicaManager, log and Fetch handler (leader_fetch_rounds.py), no sockets: the framing and the socket
write are not in it. CPU is this thread's (time.thread_time_ns), so other processes on the machine inflate it
little; run the tree before and after a change alternately and compare medians. Python calls are counted
apart from the timed runs, by the outermost step they run under.
`python -m benchmarks.woken_fetch_cost [--produces N] [--runs R]`.
"""

import argparse
import asyncio
import collections
import statistics
import sys
import tempfile
import time
from pathlib import Path

from .leader_fetch_rounds import BATCH, LeaderRounds, leader_rounds

# The steps of an append with its woken answers, by the function that starts each (an inner one counts for
# itself: a check that completes the fetch goes on to the read, then the answer).
STEPS = {
    "append_as_leader": "leader's append",
    "try_complete_for": "parked fetch checks",
    "read_all": "woken fetches' reads",
    "_respond": "answers: session bookkeeping, encoding",
    "try_complete_else_watch": "produce purgatory",
}


def _append(leader: LeaderRounds):
    return leader.manager.append_records([("t", 0, memoryview(bytearray(BATCH)))], -1, 30_000)


def _rest_of_round(leader: LeaderRounds, produce) -> None:
    for follower in leader.followers:
        assert leader.send(follower)
    assert produce.done()
    assert leader.send(leader.consumer)


def cpu_per_produce(leader: LeaderRounds, produces: int) -> tuple[float, float]:
    """(µs of CPU for the append with its woken answers, µs for the whole round), per Produce."""
    woken = whole = 0
    for _ in range(produces):
        started = time.thread_time_ns()
        produce = _append(leader)
        appended = time.thread_time_ns()
        _rest_of_round(leader, produce)
        woken += appended - started
        whole += time.thread_time_ns() - started
    return woken / produces / 1000, whole / produces / 1000


def calls_per_produce(leader: LeaderRounds, produces: int) -> collections.Counter:
    """Python calls made by the append with its woken answers, per Produce, by step."""
    counts: collections.Counter = collections.Counter()
    steps: list[tuple[object, str]] = []

    def profile(frame, event, arg):
        if event == "call":
            step = STEPS.get(frame.f_code.co_name)
            if step is not None and (not steps or steps[-1][1] != step):
                steps.append((frame, step))
            counts[steps[-1][1] if steps else "other"] += 1
        elif event == "return" and steps and steps[-1][0] is frame:
            steps.pop()

    for _ in range(produces):
        sys.setprofile(profile)
        try:
            produce = _append(leader)
        finally:
            sys.setprofile(None)
        _rest_of_round(leader, produce)
    return collections.Counter({step: n / produces for step, n in counts.items()})


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--produces", type=int, default=5000, help="Produce requests per run")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        leader = await leader_rounds(Path(tmp))
        runs = [cpu_per_produce(leader, args.produces) for _ in range(args.runs)]
        calls = calls_per_produce(leader, 200)
    print(f"CPU per Produce, median of {args.runs} runs of {args.produces}: "
          f"append with its woken answers {statistics.median(r[0] for r in runs):.1f} us, "
          f"whole round {statistics.median(r[1] for r in runs):.1f} us")
    print(f"Python calls per Produce (append with its woken answers): {sum(calls.values()):.0f}")
    for step, n in calls.most_common():
        print(f"  {n:6.1f}  {step}")


if __name__ == "__main__":
    asyncio.run(main())
