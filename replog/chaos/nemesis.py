"""The chaos suite's nemesis schedule: seed, duration and faults in, a list of timed actions out (pure).

One fault at a time: a broker is killed (SIGKILL) or paused (SIGSTOP) and brought back (start, SIGCONT), a
broker is cut off from some of the network and healed, or the controller is restarted at once or stopped
for a while and started, before the next fault begins. So at most one broker is out at any time, and a
topic with three replicas and min.insync.replicas=2 can always accept writes once the survivors are in
sync. Every fault ends by the schedule's duration: the cluster is whole at the end.

Pauses are drawn on both sides of the controller's session timeout (3 s in LocalCluster), so some paused
brokers are fenced and must come back after SIGCONT, and some are not; so are cuts from the controller and
controller downtimes.

A network cut (LocalCluster.partition) takes one of four shapes: a broker isolated from both other brokers;
isolated from everyone (brokers, controller and clients: a zombie leader can neither replicate nor be told);
cut from the controller alone; or one link between two brokers cut while both still see the third. Each
cut either refuses connections or blackholes them (bytes held, sockets open; see replog/harness/tcp_proxy.py).

With a controller quorum (`replog chaos --controllers 3`, controller processes) four more faults hit one
controller, the active one or a standby as the seed draws (which one is active is known only when the fault
begins): SIGKILL and restart on its metadata log (controller-kill), SIGSTOP and SIGCONT (controller-pause),
isolation from the other controllers and the brokers in both directions, refused or blackholed
(controller-partition), and the active controller SIGKILLed together with a broker, both restarted later
(controller-and-broker: the control plane and a partition leader lost at once). A quorum of three keeps a
majority through any one of them, so the brokers must keep their sessions and leaders must keep moving.
"""

import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from ..harness.tcp_proxy import CUT_MODES

KILL = "kill"
PAUSE = "pause"
PARTITION = "partition"
CONTROLLER = "controller"
CONTROLLER_KILL = "controller-kill"
CONTROLLER_PAUSE = "controller-pause"
CONTROLLER_PARTITION = "controller-partition"
CONTROLLER_AND_BROKER = "controller-and-broker"
FAULTS = (KILL, PAUSE, PARTITION, CONTROLLER)
QUORUM_FAULTS = (CONTROLLER_KILL, CONTROLLER_PAUSE, CONTROLLER_PARTITION, CONTROLLER_AND_BROKER)  # need a quorum

# Actions: each fault's start, and the end that heals it.
KILL_BROKER = "kill"
START_BROKER = "start"
PAUSE_BROKER = "pause"
RESUME_BROKER = "resume"
CUT_NETWORK = "cut"
HEAL_NETWORK = "heal"
STOP_CONTROLLER = "stop-controller"
START_CONTROLLER = "start-controller"
RESTART_CONTROLLER = "restart-controller"  # instantaneous: needs no heal
KILL_CONTROLLER = "kill-controller"
START_KILLED_CONTROLLER = "start-killed-controller"
PAUSE_CONTROLLER = "pause-controller"
RESUME_CONTROLLER = "resume-controller"
ISOLATE_CONTROLLER = "isolate-controller"
HEAL_CONTROLLER = "heal-controller"
KILL_CONTROLLER_AND_BROKER = "kill-controller-and-broker"
START_CONTROLLER_AND_BROKER = "start-controller-and-broker"
HEALS = {KILL_BROKER: START_BROKER, PAUSE_BROKER: RESUME_BROKER, CUT_NETWORK: HEAL_NETWORK,
         STOP_CONTROLLER: START_CONTROLLER, KILL_CONTROLLER: START_KILLED_CONTROLLER,
         PAUSE_CONTROLLER: RESUME_CONTROLLER, ISOLATE_CONTROLLER: HEAL_CONTROLLER,
         KILL_CONTROLLER_AND_BROKER: START_CONTROLLER_AND_BROKER}
QUORUM_FAULT_STARTS = {CONTROLLER_KILL: KILL_CONTROLLER, CONTROLLER_PAUSE: PAUSE_CONTROLLER,
                       CONTROLLER_PARTITION: ISOLATE_CONTROLLER, CONTROLLER_AND_BROKER: KILL_CONTROLLER_AND_BROKER}
# Which controller a quorum fault hits: resolved through DescribeQuorum when the fault begins.
ACTIVE = "active"
STANDBY = "standby"

# The shapes of a network cut, as described above.
ISOLATE_FROM_BROKERS = "isolate from brokers"
ISOLATE_FROM_ALL = "isolate from all"
ISOLATE_FROM_CONTROLLER = "isolate from controller"
CUT_ONE_LINK = "cut one link"
CUT_SHAPES = (ISOLATE_FROM_BROKERS, ISOLATE_FROM_ALL, ISOLATE_FROM_CONTROLLER, CUT_ONE_LINK)

FIRST_FAULT_AFTER_S = 2.0  # let the producers reach every leader before the first fault
GAP_S = (0.5, 2.5)  # quiet time between faults
KILL_DOWN_S = (0.5, 4.0)  # a killed broker is started again after this long
PAUSE_DOWN_S = (1.0, 6.0)  # spans the 3 s session timeout: some paused brokers get fenced
CUT_DOWN_S = (1.0, 8.0)  # spans the session timeout and replica.lag.time.max.ms (2 s)
CONTROLLER_DOWN_S = (0.5, 5.0)  # spans the session timeout: brokers cannot heartbeat meanwhile
# A quorum fault spans the election timeout (1 s), the fetch timeout (2 s) that makes followers stand and an
# isolated leader resign, and the brokers' 3 s session timeout.
QUORUM_FAULT_DOWN_S = (0.5, 6.0)


@dataclass(frozen=True)
class Cut:
    """Which links around one broker a network fault cuts (in both directions), and how."""
    peers: tuple[int, ...] = ()  # the other brokers it is cut from
    controller: bool = False
    clients: bool = False
    mode: str = CUT_MODES[0]

    def __str__(self) -> str:
        sides = ([f"broker{'s' if len(self.peers) > 1 else ''} {','.join(map(str, self.peers))}"] if self.peers
                 else []) + (["the controller"] if self.controller else []) + (["clients"] if self.clients else [])
        return f"from {' and '.join(sides)} ({self.mode})"


@dataclass(frozen=True)
class Action:
    at: float  # seconds after the start of the run
    op: str
    broker: int | None = None  # None for the controller
    cut: Cut | None = None  # for CUT_NETWORK and HEAL_NETWORK
    controller: str | None = None  # ACTIVE or STANDBY, for a quorum fault's start
    mode: str | None = None  # how ISOLATE_CONTROLLER cuts

    def __str__(self) -> str:
        return (f"{self.at:6.2f}s {self.op}" + ("" if self.controller is None else f" ({self.controller})")
                + ("" if self.broker is None else f" broker {self.broker}")
                + ("" if self.cut is None else f" {self.cut}") + ("" if self.mode is None else f" ({self.mode})"))

    @property
    def starts_fault(self) -> bool:
        return self.op in HEALS or self.op == RESTART_CONTROLLER


def parse_faults(text: str) -> tuple[str, ...]:
    """`kill,pause,controller` -> the faults, validated; raises ValueError on an unknown one."""
    faults = tuple(f.strip() for f in text.split(",") if f.strip())
    unknown = sorted(set(faults) - set(FAULTS) - set(QUORUM_FAULTS))
    if unknown or not faults:
        raise ValueError(f"unknown nemesis {unknown or text!r}: choose from {','.join(FAULTS + QUORUM_FAULTS)}")
    return faults


def check_quorum_faults(faults: Collection[str], controllers: int) -> None:
    """The quorum faults need a quorum that keeps a majority through one of them: three controllers or more."""
    wanted = sorted(set(faults) & set(QUORUM_FAULTS))
    if wanted and controllers < 3:
        raise ValueError(f"nemesis {','.join(wanted)} needs --controllers 3 or more (got {controllers})")


def draw_cut(rng: random.Random, broker: int, brokers: Sequence[int]) -> Cut:
    others = tuple(b for b in brokers if b != broker)
    shape = rng.choice(CUT_SHAPES)
    mode = rng.choice(CUT_MODES)
    if shape == ISOLATE_FROM_BROKERS:
        return Cut(others, mode=mode)
    if shape == ISOLATE_FROM_ALL:
        return Cut(others, controller=True, clients=True, mode=mode)
    if shape == ISOLATE_FROM_CONTROLLER:
        return Cut(controller=True, mode=mode)
    return Cut((rng.choice(others),), mode=mode)


def schedule(seed: int, duration: float, faults: Collection[str], brokers: Sequence[int]) -> list[Action]:
    rng = random.Random(seed)
    kinds = sorted(faults)  # a set's order may vary between runs; the schedule must not
    actions: list[Action] = []
    t = FIRST_FAULT_AFTER_S
    while kinds:
        fault = rng.choice(kinds)
        if fault == CONTROLLER and rng.random() < 0.5:
            if t > duration:
                break
            actions.append(Action(round(t, 2), RESTART_CONTROLLER))
        elif fault == CONTROLLER:
            down = rng.uniform(*CONTROLLER_DOWN_S)
            if t + down > duration:
                break
            actions.append(Action(round(t, 2), STOP_CONTROLLER))
            t += down
            actions.append(Action(round(t, 2), START_CONTROLLER))
        elif fault in QUORUM_FAULTS:
            down = rng.uniform(*QUORUM_FAULT_DOWN_S)
            if t + down > duration:
                break
            start = QUORUM_FAULT_STARTS[fault]
            target = ACTIVE if fault == CONTROLLER_AND_BROKER else rng.choice((ACTIVE, STANDBY))
            broker = rng.choice(brokers) if fault == CONTROLLER_AND_BROKER else None
            mode = rng.choice(CUT_MODES) if fault == CONTROLLER_PARTITION else None
            actions.append(Action(round(t, 2), start, broker, controller=target, mode=mode))
            t += down
            actions.append(Action(round(t, 2), HEALS[start], broker))
        else:
            down = rng.uniform(*{KILL: KILL_DOWN_S, PAUSE: PAUSE_DOWN_S, PARTITION: CUT_DOWN_S}[fault])
            if t + down > duration:
                break
            broker = rng.choice(brokers)
            start = {KILL: KILL_BROKER, PAUSE: PAUSE_BROKER, PARTITION: CUT_NETWORK}[fault]
            cut = draw_cut(rng, broker, brokers) if fault == PARTITION else None
            actions.append(Action(round(t, 2), start, broker, cut))
            t += down
            actions.append(Action(round(t, 2), HEALS[start], broker, cut))
        t += rng.uniform(*GAP_S)
    return actions
