"""A server adopts only the inherited listening socket bound to its configured address, and reports the
ports it serves on in its ready file."""

import json
import os
import socket

import pytest

from replog.server.listener_socket import (
    LISTENER_FDS_ENV,
    READY_FILE_ENV,
    inherited_listener,
    listen_address,
    parse_listener_fds,
    write_ready_file,
)


@pytest.fixture
def handed_down(monkeypatch):
    """Two listening sockets, as a parent would pass them in REPLOG_LISTENER_FDS."""
    sockets = [socket.create_server(("127.0.0.1", 0)) for _ in range(2)]
    monkeypatch.setenv(LISTENER_FDS_ENV, ",".join(str(s.fileno()) for s in sockets))
    yield sockets
    for s in sockets:
        s.close()


def test_the_socket_bound_to_the_configured_address_is_adopted(handed_down):
    port = handed_down[1].getsockname()[1]
    adopted = inherited_listener("127.0.0.1", port)
    assert adopted.getsockname() == ("127.0.0.1", port)
    adopted.close()
    with pytest.raises(OSError):
        os.fstat(handed_down[1].fileno())  # adopted: the inherited fd itself is closed
    handed_down[1].detach()


def test_no_socket_is_adopted_for_another_address_or_for_port_0(handed_down):
    free = socket.create_server(("127.0.0.1", 0))
    try:
        assert inherited_listener("127.0.0.1", free.getsockname()[1]) is None
    finally:
        free.close()
    assert inherited_listener("127.0.0.1", 0) is None
    assert listen_address("127.0.0.1", 0) == {"host": "127.0.0.1", "port": 0}


def test_without_inherited_sockets_the_server_binds_itself(monkeypatch):
    monkeypatch.delenv(LISTENER_FDS_ENV, raising=False)
    assert listen_address("127.0.0.1", 9092) == {"host": "127.0.0.1", "port": 9092}


def test_a_bound_socket_that_does_not_listen_is_refused(monkeypatch):
    bound = socket.socket()
    bound.bind(("127.0.0.1", 0))
    monkeypatch.setenv(LISTENER_FDS_ENV, str(bound.fileno()))
    try:
        with pytest.raises(ValueError, match="not listening"):
            inherited_listener("127.0.0.1", bound.getsockname()[1])
    finally:
        bound.close()


def test_standard_streams_are_never_taken_for_listeners():
    with pytest.raises(ValueError, match="not listening sockets"):
        parse_listener_fds("1,5")


def test_the_ready_file_reports_pid_and_ports(tmp_path, monkeypatch):
    monkeypatch.setenv(READY_FILE_ENV, str(tmp_path / "ready"))
    write_ready_file(port=9092, metrics_port=None)
    assert json.loads((tmp_path / "ready").read_text()) == {"pid": os.getpid(), "port": 9092, "metrics_port": None}


def test_without_a_ready_file_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.delenv(READY_FILE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    write_ready_file(port=9092, metrics_port=1)
    assert list(tmp_path.iterdir()) == []
