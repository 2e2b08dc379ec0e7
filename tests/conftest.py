"""Fixtures shared by the integration and interop suites."""

import pytest

from replog.harness.broker_process import BrokerProcess
from tests.slow_files import SLOW_FILES, parse_slow_files, slow_files_first


@pytest.fixture
def broker(tmp_path):
    """A real broker process on a free 127.0.0.1 port with a tmp_path log dir; always stopped."""
    with BrokerProcess(tmp_path / "logs", output=tmp_path / "broker.out").started() as process:
        yield process


@pytest.fixture
def group_broker(tmp_path):
    """A broker without group.initial.rebalance.delay.ms (Kafka's 3 s would only slow group tests)."""
    process = BrokerProcess(tmp_path / "logs", output=tmp_path / "broker.out",
                            overrides={"group.initial.rebalance.delay.ms": "0"})
    process.start()
    try:
        yield process
    finally:
        process.stop()


def pytest_addoption(parser):
    """tests/sim: how many seeds the simulation runs, or the one seed to replay."""
    group = parser.getgroup("sim", "deterministic simulation (tests/sim)")
    group.addoption("--sim-seeds", type=int, default=None, metavar="N",
                    help="run simulation seeds 0..N-1 instead of the CI default")
    group.addoption("--sim-seed", type=int, default=None, metavar="S",
                    help="replay simulation seed S only (the command a failing seed prints)")


def pytest_collection_modifyitems(config, items):
    """Under xdist (make test), the longest files first, so that no long file starts when the rest is done.

    Every worker collects and sorts alike, as xdist requires; a run in one process keeps collection order.
    """
    if hasattr(config, "workerinput"):
        items[:] = slow_files_first(items, parse_slow_files(SLOW_FILES.read_text()))
