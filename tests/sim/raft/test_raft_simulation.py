"""Deterministic simulation of the controller quorum (simulation.py has the model and the fault model).

    .venv/bin/python -m pytest -q tests/sim/raft                                  # CI: seeds 0..999
    .venv/bin/python -m pytest -q tests/sim/raft -k test_seeds --sim-seeds 20000  # more seeds
    .venv/bin/python -m pytest -q tests/sim/raft -k test_seeds --sim-seed 4242    # replay one seed

Even seeds run three voters, odd seeds five, each with one observer; seeds 0 and 1 modulo 4 use KIP-996
pre-vote, the others stand at once when their election timer fires. A failing seed fails test_seeds with
the seed, the step and simulated time, the broken invariant, the tail of the run's trace and the replay
command above.
"""

import time

from ..seeds import run_seeds
from .simulation import SimulationFailure, run_seed


def test_seeds(request):
    started = time.monotonic()
    outcomes, only, workers = run_seeds(request, run_seed, SimulationFailure, chunksize=20)
    print(f"\n{len(outcomes)} seeds in {time.monotonic() - started:.1f} s on {workers} processes: "
          f"{sum(o.steps for o in outcomes)} events, {sum(o.messages for o in outcomes)} messages, "
          f"{sum(o.leader_epochs for o in outcomes)} leader epochs, {sum(o.kills for o in outcomes)} kills, "
          f"{sum(o.power_losses for o in outcomes)} power losses, "
          f"{sum(o.snapshots_loaded for o in outcomes)} snapshots loaded, "
          f"{sum(o.committed for o in outcomes)} committed entries")
    if only is None:
        # The faults must actually happen, or every invariant holds trivially.
        assert sum(o.power_losses for o in outcomes) > len(outcomes)
        assert sum(o.leader_epochs for o in outcomes) > 3 * len(outcomes)
        assert sum(o.snapshots_loaded for o in outcomes) > len(outcomes)


def test_replay_is_identical():
    assert run_seed(11) == run_seed(11)
