"""Running a simulation over many seeds, for the test_seeds of both simulations (replication and the
controller quorum): `--sim-seed N` replays one, `--sim-seeds N` runs 0..N-1, else CI_SEEDS of them (or the
test's own number)."""

import concurrent.futures
import contextlib
import functools
import multiprocessing
import os
from collections.abc import Callable

import pytest

CI_SEEDS = 1_000
SIM_WORKERS = min(2, os.cpu_count() or 1)


def _run_or_describe(run_seed: Callable, failure: type[AssertionError], seed: int):
    """run_seed for a worker process: a failure comes back as its message (it names the seed)."""
    try:
        return run_seed(seed)
    except failure as e:
        return str(e)


def run_seeds(request: pytest.FixtureRequest, run_seed: Callable, failure: type[AssertionError], *,
              chunksize: int, ci_seeds: int = CI_SEEDS) -> tuple[list, int | None, int]:
    """Run the seeds the options name; the first failing one (a `failure`) fails the test with its message.
    Seeds are independent, so they spread over up to SIM_WORKERS processes; each still runs alone, in order.
    Returns the outcomes, the one seed asked for (or None) and the number of processes used."""
    only = request.config.getoption("--sim-seed")
    count = request.config.getoption("--sim-seeds") or ci_seeds
    seeds = [only] if only is not None else list(range(count))
    run = functools.partial(_run_or_describe, run_seed, failure)
    workers = min(SIM_WORKERS, len(seeds))
    # Workers come from a fork server, not a fork of this process: by now the suite may have started threads
    # (Spark's py4j, librdkafka's), and a forked copy of a threaded process can crash in its first GC.
    context = multiprocessing.get_context("forkserver")
    with (concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) if workers > 1
          else contextlib.nullcontext()) as pool:
        results = pool.map(run, seeds, chunksize=chunksize) if pool is not None else map(run, seeds)
        outcomes = []
        for result in results:
            if isinstance(result, str):
                pytest.fail(result, pytrace=False)
            outcomes.append(result)
    return outcomes, only, workers
