"""A real broker process per test: a free port on 127.0.0.1, a tmp_path log dir, always stopped."""

import pytest

from replog.demo import BrokerProcess


@pytest.fixture
def broker(tmp_path):
    """Yields a started BrokerProcess (.bootstrap, .port, .log_dir, .proc, .stop(), .kill(), .restart())."""
    process = BrokerProcess(tmp_path / "logs", output=tmp_path / "broker.out")
    process.start()
    try:
        yield process
    finally:
        process.stop()
