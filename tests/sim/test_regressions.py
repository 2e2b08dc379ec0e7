"""Bugs the simulation found: each seed that exposed one, and a unit test of the fix.

Each seed fails without its fix (checked by reverting the fix once), but a seed is a blunt regression
test: later changes to the model may route it elsewhere, which is why each fix has a unit test too.
"""

import asyncio
import types
import uuid

from kio.schema.errors import ErrorCode

from replog.broker.handlers import leader_and_isr
from replog.controller.registry import PartitionRegistration, validate_alter_partition

from .simulation import run_seed

# ------------------------------------------------- a lost AlterPartition answer (seed 19)

def test_seed_19_lost_alter_partition_answer():
    """The controller applied a leader's ISR shrink but its answer was lost; the leader's retry got
    INVALID_UPDATE_VERSION, so the change stayed pending for good and the ISR never grew back (the run
    did not converge)."""
    run_seed(19)


SHRUNK = PartitionRegistration("t", uuid.UUID(int=7), 0, (1, 2, 3), (1, 2), leader=1, leader_epoch=5,
                               partition_epoch=8)


def _alter(**changes) -> ErrorCode:
    request = {"broker_id": 1, "leader_epoch": 5, "new_isr": [1, 2], "partition_epoch": 7} | changes
    return validate_alter_partition(SHRUNK, **request, is_eligible=lambda broker_id: True)


def test_a_retried_alter_partition_that_was_applied_gets_the_current_state():
    assert _alter() == ErrorCode.none  # ISR (1, 2) at partition epoch 7 became partition epoch 8


def test_a_stale_alter_partition_asking_for_another_isr_is_still_refused():
    assert _alter(new_isr=[1, 2, 3]) == ErrorCode.invalid_update_version
    assert _alter(new_isr=[2, 1]) == ErrorCode.invalid_update_version  # Kafka compares the lists as lists
    assert _alter(leader_epoch=4) == ErrorCode.fenced_leader_epoch


# ----------------------------- a LeaderAndIsr meant for a previous process (seed 399)

def test_seed_399_leader_and_isr_for_a_previous_process():
    """A broker restarted after a power loss took a LeaderAndIsr the controller had queued for its previous
    process and led again in the same leader epoch with a shorter log. It acknowledged new records at
    offsets the follower already held, from that epoch, with other values; the follower, unable to see the
    divergence (same epoch), kept its own, became leader, and the acknowledged records were lost."""
    run_seed(399)


def _broker(lifecycle):
    return types.SimpleNamespace(lifecycle=lifecycle)


async def test_leader_and_isr_waits_for_the_registration():
    lifecycle = types.SimpleNamespace(registered=asyncio.Event())
    waiting = asyncio.ensure_future(leader_and_isr.wait_until_registered(_broker(lifecycle)))
    await asyncio.sleep(0)
    assert not waiting.done()
    lifecycle.registered.set()
    assert await asyncio.wait_for(waiting, 5)


async def test_leader_and_isr_before_a_registration_that_never_comes_is_refused(monkeypatch):
    monkeypatch.setattr(leader_and_isr, "REGISTRATION_WAIT_S", 0.01)
    never = _broker(types.SimpleNamespace(registered=asyncio.Event()))
    assert not await leader_and_isr.wait_until_registered(never)


async def test_a_single_node_has_no_registration_to_wait_for():
    assert await leader_and_isr.wait_until_registered(_broker(None))
