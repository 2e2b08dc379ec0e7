"""A node started by a test, a benchmark or the harness stops when the process that started it is gone.

A test run killed by a signal (a CI timeout, Ctrl-C twice) never reaches its fixtures' teardown, and without
this its brokers and controllers would serve on, holding ports, CPU and disk. The harness sets
REPLOG_EXIT_WITH_PARENT=<its pid> for the nodes it does not detach; such a node watches that process through a
pidfd (readable once the process has exited, so the watch costs nothing while it lives) and stops as on
SIGTERM when it goes. Nodes started by hand or by `replog cluster up` (detached) are not watched.
"""

import asyncio
import logging
import os
from collections.abc import Callable

EXIT_WITH_PARENT_ENV = "REPLOG_EXIT_WITH_PARENT"

log = logging.getLogger(__name__)


def stop_when_parent_exits(loop: asyncio.AbstractEventLoop, stop: Callable[[], None]) -> None:
    """If REPLOG_EXIT_WITH_PARENT names our parent, call `stop` on the loop once it has exited (at once if it
    already has)."""
    # Popped: it names our parent, not the parent of any process we start.
    if not (value := os.environ.pop(EXIT_WITH_PARENT_ENV, None)):
        return
    parent = int(value)
    try:
        pidfd = os.pidfd_open(parent)
    except ProcessLookupError:
        pidfd = None
    # Checked after the open: had the parent died before it, its pid could name another process by now, but
    # then we would have been re-parented and getppid() would differ.
    if pidfd is None or os.getppid() != parent:
        if pidfd is not None:
            os.close(pidfd)
        log.warning("the process that started us (pid %d) is gone: stopping", parent)
        loop.call_soon(stop)
        return

    def parent_exited() -> None:
        loop.remove_reader(pidfd)
        os.close(pidfd)
        log.warning("the process that started us (pid %d) exited: stopping", parent)
        stop()

    loop.add_reader(pidfd, parent_exited)
