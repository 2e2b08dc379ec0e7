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
- A follower receives each fetch answer (1 MiB by default) into a new buffer and frees it after the append.
  glibc maps such buffers with mmap, or takes them from the heap and trims the heap again once they are
  freed, so every answer faulted in and zeroed fresh pages: 50,000-200,000 minor faults per GiB replicated,
  a quarter of a follower's CPU (docs/profiles/consume.md). keep_large_buffers_in_heap() makes glibc serve
  buffers up to 32 MiB from the heap and keep up to 64 MiB of freed heap for the next one.

Only the process entry (replog/__main__.py) begins the quiet start, so code that calls replog.cli.main() in
another process (the tests) keeps its collector as it is.
"""

import ctypes
import gc
import sys

# mallopt parameters, from glibc's malloc.h.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
LARGE_BUFFER_BYTES = 32 * 1024 * 1024  # glibc's ceiling for M_MMAP_THRESHOLD on 64-bit
RETAINED_FREE_HEAP_BYTES = 64 * 1024 * 1024

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


def keep_large_buffers_in_heap() -> bool:
    """Serve allocations up to LARGE_BUFFER_BYTES from the heap, and trim the heap only past
    RETAINED_FREE_HEAP_BYTES of free space, so buffers of the same few sizes are reused, not faulted in anew.
    Setting either parameter switches off glibc's own adjustment of both. Returns whether the C library took
    the settings (glibc does; another C library leaves its allocator as it is)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(_M_MMAP_THRESHOLD, LARGE_BUFFER_BYTES)) and bool(
        mallopt(_M_TRIM_THRESHOLD, RETAINED_FREE_HEAP_BYTES))
