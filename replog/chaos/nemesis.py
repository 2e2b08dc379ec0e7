"""The chaos suite's nemesis schedule: seed, duration and faults in, a list of timed actions out (pure).

One fault at a time: a broker is killed (SIGKILL) or paused (SIGSTOP) and brought back (start, SIGCONT)
before the next fault begins, and a controller restart is instantaneous. So at most one broker is down at
any time, and a topic with three replicas and min.insync.replicas=2 can always accept writes once the
survivors are in sync. Every fault ends by the schedule's duration: the cluster is whole at the end.

Pauses are drawn on both sides of the controller's session timeout (3 s in LocalCluster), so some paused
brokers are fenced and must come back after SIGCONT, and some are not.
"""

import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass

KILL = "kill"
PAUSE = "pause"
CONTROLLER = "controller"
FAULTS = (KILL, PAUSE, CONTROLLER)

# Actions: each fault's start, and the end that heals it.
KILL_BROKER = "kill"
START_BROKER = "start"
PAUSE_BROKER = "pause"
RESUME_BROKER = "resume"
RESTART_CONTROLLER = "restart-controller"
HEALS = {KILL_BROKER: START_BROKER, PAUSE_BROKER: RESUME_BROKER}

FIRST_FAULT_AFTER_S = 2.0  # let the producers reach every leader before the first fault
GAP_S = (0.5, 2.5)  # quiet time between faults
KILL_DOWN_S = (0.5, 4.0)  # a killed broker is started again after this long
PAUSE_DOWN_S = (1.0, 6.0)  # spans the 3 s session timeout: some paused brokers get fenced


@dataclass(frozen=True)
class Action:
    at: float  # seconds after the start of the run
    op: str
    broker: int | None = None  # None for the controller

    def __str__(self) -> str:
        return f"{self.at:6.2f}s {self.op}" + ("" if self.broker is None else f" broker {self.broker}")


def parse_faults(text: str) -> tuple[str, ...]:
    """`kill,pause,controller` -> the faults, validated; raises ValueError on an unknown one."""
    faults = tuple(f.strip() for f in text.split(",") if f.strip())
    unknown = sorted(set(faults) - set(FAULTS))
    if unknown or not faults:
        raise ValueError(f"unknown nemesis {unknown or text!r}: choose from {','.join(FAULTS)}")
    return faults


def schedule(seed: int, duration: float, faults: Collection[str], brokers: Sequence[int]) -> list[Action]:
    rng = random.Random(seed)
    kinds = sorted(faults)  # a set's order may vary between runs; the schedule must not
    actions: list[Action] = []
    t = FIRST_FAULT_AFTER_S
    while kinds:
        fault = rng.choice(kinds)
        if fault == CONTROLLER:
            if t > duration:
                break
            actions.append(Action(round(t, 2), RESTART_CONTROLLER))
        else:
            down = rng.uniform(*(KILL_DOWN_S if fault == KILL else PAUSE_DOWN_S))
            if t + down > duration:
                break
            broker = rng.choice(brokers)
            start = KILL_BROKER if fault == KILL else PAUSE_BROKER
            actions.append(Action(round(t, 2), start, broker))
            t += down
            actions.append(Action(round(t, 2), HEALS[start], broker))
        t += rng.uniform(*GAP_S)
    return actions
