"""A server's side of starting without port races: adopt a listening socket its parent holds, and report the
ports it serves on once it serves.

Whoever starts servers and must know their ports (tests, benchmarks, `replog cluster up`) should not pick a
port that looks free and hope nobody takes it before the server binds it. Two ways, both through the
environment, so a node's argv and properties stay the same when it is started again by hand:

- REPLOG_LISTENER_FDS=FD[,FD...]: listening sockets the parent has bound and passed down (as with systemd's
  socket activation). A listener configured as host:port is served on the inherited socket bound to exactly
  that address instead of a new one; the parent writes the port it holds into the configuration, so the
  server binds the same port itself when it is started again without the fd.
- REPLOG_READY_FILE=PATH: once the server serves, it writes {"pid": ..., "port": ..., "metrics_port": ...,
  "listener_ports": {NAME: port, ...}} there atomically: the ports it got, also for listeners on port 0.
"""

import json
import os
import socket
from pathlib import Path
from typing import Any

from replog.log.checkpoint import write_atomically

LISTENER_FDS_ENV = "REPLOG_LISTENER_FDS"
READY_FILE_ENV = "REPLOG_READY_FILE"


def format_listener_fds(fds: list[int]) -> str:
    assert fds and all(fd > 2 for fd in fds), fds  # 0-2 are stdin, stdout and stderr
    return ",".join(str(fd) for fd in fds)


def parse_listener_fds(value: str) -> list[int]:
    fds = [int(part) for part in value.split(",") if part.strip()]
    if any(fd <= 2 for fd in fds):
        raise ValueError(f"{LISTENER_FDS_ENV}={value!r}: 0, 1 and 2 are not listening sockets")
    return fds


def inherited_listener(host: str, port: int) -> socket.socket | None:
    """The listening socket the parent passed down bound to host:port, or None: bind it yourself."""
    if port == 0 or not (value := os.environ.get(LISTENER_FDS_ENV)):
        return None
    for fd in parse_listener_fds(value):
        sock = socket.socket(fileno=os.dup(fd))  # a dup: a listener the parent got wrong stays the parent's
        if sock.getsockname()[:2] == (host, port):
            if not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                raise ValueError(f"inherited fd {fd} for {host}:{port} is not listening")
            os.close(fd)
            return sock
        sock.close()
    return None


def listen_address(host: str, port: int) -> dict[str, Any]:
    """Keyword arguments for loop.create_server: the inherited socket for host:port, or host and port."""
    sock = inherited_listener(host, port)
    return {"host": host, "port": port} if sock is None else {"sock": sock}


def write_ready_file(*, port: int, metrics_port: int | None, listener_ports: dict[str, int] | None = None) -> None:
    """Tell whoever started us (REPLOG_READY_FILE, if set) that we serve, and on which ports (port: the first
    listener's; listener_ports: every listener's, by name)."""
    if path := os.environ.get(READY_FILE_ENV):
        assert 0 < port < 65536, port
        report = {"pid": os.getpid(), "port": port, "metrics_port": metrics_port}
        if listener_ports:
            report["listener_ports"] = listener_ports
        write_atomically(Path(path), (json.dumps(report) + "\n").encode())
