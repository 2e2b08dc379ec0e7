"""What a replog process does around its start: load its modules and state without the cyclic garbage
collector, then freeze what it loaded.

- While ~400 modules load, the collector runs full collections over everything loaded so far, several times:
  about 40 ms of a broker's start on this VM. Nothing loaded at start-up is garbage worth collecting then.
- kio (the protocol schemas) registers hypothesis strategies for its types whenever hypothesis is
  importable, which it is in the development environment only; no replog process uses them, and importing
  hypothesis costs about 50 ms of every start. Marking it absent (`sys.modules[name] = None` makes an import
  raise ImportError) gives a development install the start of a production one.
- Once started, a process's modules and, for a server, its loaded logs live until it exits: gc.freeze() moves
  them to the permanent generation, so the full collections of the running server do not walk them again.

Only the process entry (replog/__main__.py) begins the quiet start, so code that calls replog.cli.main() in
another process (the tests) keeps its collector as it is.
"""

import gc
import sys

_quiet = False


def begin_quiet_start() -> None:
    global _quiet
    _quiet = True
    gc.disable()
    sys.modules.setdefault("hypothesis", None)


def end_quiet_start() -> None:
    """Called once what the process keeps is loaded: after the CLI's imports for a command, after a server
    serves. Does nothing unless begin_quiet_start() was called."""
    global _quiet
    if _quiet:
        _quiet = False
        gc.freeze()
        gc.enable()
