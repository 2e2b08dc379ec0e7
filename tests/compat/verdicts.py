"""What one run of librdkafka's test-runner says about a test id, and how a whole run compares with the list
of tests known to pass. Pure functions over text; `tests/compat/librdkafka.py` runs the processes.

The runner ends with a summary table holding one row per test whose name starts with the id (0045 has six):
`| 0012_produce_consume                     |     PASSED |   1.545s |`. A failure is announced by a block
`### Test "<name> (<sub-test>)" failed at <file>:<line>:<function>() at <time>: ###` whose next line is the
message. A test that overruns its own timeout is SIGKILLed by the runner itself, so its output has that block
but no table.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
SUMMARY_ROW = re.compile(
    r"^\|\s*(?P<name>\d{4}_\S+)\s*\|\s*(?P<state>[A-Z][A-Z ]*?)\s*\|\s*(?P<seconds>[\d.]+)s\s*\|\s*(?P<note>.*)$"
)
FAILURE_HEADER = re.compile(r'^### Test "(?P<name>.*)" failed at (?P<where>\S+) at ')
# The runner's own timing of a test body, printed to the millisecond: one that talked to a broker took at least
# one (0035_api_version's metadata round trip: 8.9 ms), so a body under it means quick mode (-Q) skipped every
# sub-test and the pass says nothing about replog (those print 0.000s).
EMPTY_PASS_SECONDS = 0.001


class Status(StrEnum):
    PASS = "pass"
    EMPTY = "empty"  # passed without doing anything: quick mode skipped all of its sub-tests
    SKIPPED = "skipped"  # local-only (-L) or needs another scenario or broker version
    FAIL = "fail"


@dataclass(frozen=True, slots=True)
class SummaryRow:
    name: str
    state: str  # PASSED, FAILED, SKIPPED, RUNNING, NOT STARTED (test.c's test_states)
    seconds: float
    note: str  # the failure or skip reason the runner printed


@dataclass(frozen=True, slots=True)
class Verdict:
    test_id: str
    status: Status
    reason: str = ""  # why it failed or was skipped; empty for a pass
    seconds: float = 0.0  # wall-clock time of the whole runner process


def plain_lines(output: str) -> list[str]:
    """The runner colours its output even into a file; the colour codes are noise to a parser."""
    return ANSI_ESCAPE.sub("", output).splitlines()


def summary_rows(lines: Iterable[str], test_id: str) -> list[SummaryRow]:
    rows = []
    for line in lines:
        match = SUMMARY_ROW.match(line.strip())
        if match and match["name"].startswith(f"{test_id}_"):
            rows.append(SummaryRow(match["name"], match["state"], float(match["seconds"]), match["note"].strip()))
    return rows


def first_failure(lines: list[str]) -> str | None:
    """`<where>: <message>` of the first failure block, or None if the output has none."""
    for index, line in enumerate(lines):
        match = FAILURE_HEADER.match(line.strip())
        if match:
            message = lines[index + 1].strip() if index + 1 < len(lines) else ""
            return f"{match['where']}: {message}"
    return None


def last_line(lines: list[str]) -> str:
    return next((line.strip() for line in reversed(lines) if line.strip()), "(no output)")


def verdict(test_id: str, output: str, exit_code: int | None, seconds: float = 0.0) -> Verdict:
    """The verdict on `test_id` from the runner's output and exit code (None: the harness killed it)."""
    lines = plain_lines(output)
    rows = summary_rows(lines, test_id)
    failure = first_failure(lines)
    if exit_code is None:
        return Verdict(test_id, Status.FAIL, f"killed by the harness's timeout; {failure or last_line(lines)}",
                       seconds)
    failed = [row for row in rows if row.state not in ("PASSED", "SKIPPED", "NOT STARTED")]
    if exit_code != 0 or failed:
        reason = failure or (failed[0].note if failed else "") or f"exit code {exit_code}: {last_line(lines)}"
        return Verdict(test_id, Status.FAIL, reason, seconds)
    passed = [row for row in rows if row.state == "PASSED"]
    if passed:
        body_seconds = sum(row.seconds for row in passed)
        return Verdict(test_id, Status.PASS if body_seconds >= EMPTY_PASS_SECONDS else Status.EMPTY, "", seconds)
    if rows:
        return Verdict(test_id, Status.SKIPPED, "; ".join(sorted({row.note for row in rows if row.note})), seconds)
    return Verdict(test_id, Status.FAIL, f"no test named {test_id}_* ran", seconds)


def with_broker_exit(result: Verdict, exit_code: int | None, broker_last_line: str) -> Verdict:
    """A broker that died during a test fails it, whatever the client saw: replog must not crash."""
    if exit_code is None:
        return result
    return Verdict(result.test_id, Status.FAIL, f"replog broker exited with {exit_code}: {broker_last_line}",
                   result.seconds)


# ------------------------------------------------------------------ the passing list


def parse_id_list(text: str) -> list[str]:
    """Test ids one a line; blank lines and `#` comments are ignored."""
    ids = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    return [test_id for test_id in ids if test_id]


@dataclass(frozen=True, slots=True)
class Comparison:
    regressions: tuple[Verdict, ...]  # listed as passing, failed or came back empty in this run
    newly_passing: tuple[str, ...]  # passed in this run, not listed yet
    skipped_by_suite: tuple[Verdict, ...]  # listed as passing, the runner itself skipped it this time


def compare(results: Iterable[Verdict], listed: Iterable[str]) -> Comparison:
    """Listed tests that did not run (a --tests selection) are neither regressions nor passes.

    A listed test the runner skipped is not a regression: the suite skips some tests by environment (0055
    measures latency and skips itself when CI is set), which says nothing about the broker.
    """
    listed = set(listed)
    results = list(results)
    regressions = tuple(r for r in results if r.test_id in listed and r.status in (Status.FAIL, Status.EMPTY))
    skipped = tuple(r for r in results if r.test_id in listed and r.status == Status.SKIPPED)
    newly_passing = tuple(r.test_id for r in results if r.test_id not in listed and r.status == Status.PASS)
    return Comparison(regressions, newly_passing, skipped)


def updated_list(results: Iterable[Verdict], listed: Iterable[str]) -> list[str]:
    """The passing list after this run: this run's verdicts replace the entries of the tests it ran.

    A test the runner skipped keeps its entry: the run said nothing about it.
    """
    results = list(results)
    ran = {r.test_id for r in results if r.status != Status.SKIPPED}
    passed = {r.test_id for r in results if r.status == Status.PASS}
    return sorted((set(listed) - ran) | passed)
