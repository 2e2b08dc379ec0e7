"""The test files that take longest, run first under `make test`'s xdist workers so both finish together.

`--dist loadfile` hands whole files to the two workers in the order of the collection it gets (with
`--no-loadscope-reorder`; by default xdist re-sorts files by how many tests they hold, which puts a file with
one two-minute test near the end). A long file handed out last keeps one worker busy alone while the other
idles, so tests/conftest.py moves the files listed in tests/slow-files.txt to the front, longest first, and
leaves every other file where collection put it: many short files at the end even out the two workers.

Refresh the list from a run with `--durations=0`:
`python -m tests.slow_files LOG` reads the durations table in LOG and rewrites tests/slow-files.txt.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

SLOW_FILES = Path(__file__).with_name("slow-files.txt")
SLOW_FILE_MIN_SECONDS = 10.0  # shorter files go wherever collection puts them
# One row of pytest's --durations table: "125.75s call     tests/integration/test_bench_cli.py::test_x".
DURATION_ROW = re.compile(r"^(?P<seconds>\d+(?:\.\d+)?)s\s+(?:setup|call|teardown)\s+(?P<file>[^:\s]+\.py)::")
SLOW_FILES_HEADER = (
    "# Test files that take at least {min:g} s in all (setup, call and teardown), longest first: seconds, path.\n"
    "# `make test` starts them first (tests/slow_files.py). Rewrite with `python -m tests.slow_files LOG`.\n"
)


class HasNodeId(Protocol):
    nodeid: str


Item = TypeVar("Item", bound=HasNodeId)


def file_of(nodeid: str) -> str:
    """The file part of a node id, as xdist's loadfile scheduling groups it."""
    return nodeid.split("::", 1)[0]


def parse_slow_files(text: str) -> dict[str, float]:
    """tests/slow-files.txt's rows (`SECONDS PATH`, # comments) as path -> seconds."""
    seconds_by_file = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            seconds, path = line.split(maxsplit=1)
            seconds_by_file[path] = float(seconds)
    return seconds_by_file


def slow_files_first(items: Sequence[Item], seconds_by_file: dict[str, float]) -> list[Item]:
    """Items of listed files first, longest file first; each file's tests and the other files keep their order."""
    return sorted(items, key=lambda item: -seconds_by_file.get(file_of(item.nodeid), 0.0))


def seconds_per_file(durations_log: Iterable[str]) -> dict[str, float]:
    """Setup, call and teardown seconds summed per file over a --durations table."""
    totals: dict[str, float] = defaultdict(float)
    for line in durations_log:
        row = DURATION_ROW.match(line.strip())
        if row:
            totals[row["file"]] += float(row["seconds"])
    return dict(totals)


def format_slow_files(seconds_by_file: dict[str, float], min_seconds: float = SLOW_FILE_MIN_SECONDS) -> str:
    rows = sorted(((s, f) for f, s in seconds_by_file.items() if s >= min_seconds), key=lambda row: (-row[0], row[1]))
    return SLOW_FILES_HEADER.format(min=min_seconds) + "".join(f"{s:7.1f} {f}\n" for s, f in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.slow_files", description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path, help="output of a pytest run with --durations=0")
    args = parser.parse_args(argv)
    totals = seconds_per_file(args.log.read_text(errors="replace").splitlines())
    if not totals:
        raise SystemExit(f"{args.log} holds no --durations table")
    SLOW_FILES.write_text(format_slow_files(totals))
    print(f"wrote {SLOW_FILES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
