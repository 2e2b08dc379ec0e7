"""The quorum faults of a chaos run (nemesis.QUORUM_FAULTS) performed on a LocalCluster whose controllers are
processes: which controller a fault hits is decided when it begins (the active one as DescribeQuorum names it,
or the lowest-numbered running standby), and remembered so that the fault's end heals that one."""

from ..harness.local_cluster import FIRST_CONTROLLER_ID, LocalCluster
from . import nemesis

QUORUM_ACTIONS = frozenset({nemesis.KILL_CONTROLLER, nemesis.START_KILLED_CONTROLLER, nemesis.PAUSE_CONTROLLER,
                            nemesis.RESUME_CONTROLLER, nemesis.ISOLATE_CONTROLLER, nemesis.HEAL_CONTROLLER,
                            nemesis.KILL_CONTROLLER_AND_BROKER, nemesis.START_CONTROLLER_AND_BROKER})


class FaultTarget:
    """The controller the fault under way hit (one fault at a time), so its end heals that one."""

    def __init__(self) -> None:
        self.controller_id = FIRST_CONTROLLER_ID


async def choose_controller(cluster: LocalCluster, target: str) -> int:
    """The active controller, or a running standby."""
    active = await cluster.active_controller_id()
    if target == nemesis.ACTIVE:
        return active
    standbys = sorted(cluster.quorum_processes.running - {active})
    assert standbys, "no running standby controller"
    return standbys[0]


async def perform_quorum_action(cluster: LocalCluster, action: nemesis.Action, hit: FaultTarget) -> None:
    assert cluster.quorum_processes is not None, "quorum faults need controller processes"
    if action.starts_fault:
        hit.controller_id = await choose_controller(cluster, action.controller)
        print(f"nemesis: {action.op} hits controller {hit.controller_id}", flush=True)
    controller_id = hit.controller_id
    if action.op == nemesis.KILL_CONTROLLER:
        await cluster.kill_controller(controller_id)
    elif action.op == nemesis.START_KILLED_CONTROLLER:
        await cluster.start_controller(controller_id)
    elif action.op == nemesis.PAUSE_CONTROLLER:
        cluster.pause_controller(controller_id)
    elif action.op == nemesis.RESUME_CONTROLLER:
        cluster.resume_controller(controller_id)
    elif action.op == nemesis.ISOLATE_CONTROLLER:
        cluster.isolate_controller(controller_id, action.mode)
    elif action.op == nemesis.HEAL_CONTROLLER:
        cluster.heal_controller(controller_id)
    elif action.op == nemesis.KILL_CONTROLLER_AND_BROKER:
        await cluster.kill_controller(controller_id)
        await cluster.kill(action.broker)
    elif action.op == nemesis.START_CONTROLLER_AND_BROKER:
        await cluster.start_controller(controller_id)
        await cluster.restart(action.broker)
    else:
        raise ValueError(f"not a quorum fault action: {action}")
