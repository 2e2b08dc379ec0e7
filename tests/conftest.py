"""Fixtures shared by the integration and interop suites."""

import pytest

from replog.demo import BrokerProcess


@pytest.fixture
def broker(tmp_path):
    """A real broker process on a free 127.0.0.1 port with a tmp_path log dir; always stopped."""
    process = BrokerProcess(tmp_path / "logs", output=tmp_path / "broker.out")
    process.start()
    try:
        yield process
    finally:
        process.stop()
