"""`python -m tests.compat.librdkafka` (make compat): librdkafka's own integration suite against replog.

Builds librdkafka 2.15.0's test-runner from ../shared/vendor/ into build/ once per source and recipe
(tests/compat/suite_build.py), then runs each test id of the vendored list (librdkafka-broker-tests.txt) with
`TESTS=<id> ./test-runner -p1 -Q -E -L` against a fresh single broker started for that test alone, in the
suite's default scenario (auto.create.topics.enable=true, num.partitions=4). Each test's output goes to
build/compat-librdkafka/<id>.log next to its broker's output. It prints one line per test, then compares
the run with tests/compat/librdkafka-passing.txt: a listed test that does not pass is a regression (exit
code 1); a passing test that is not listed yet is printed so the list can grow (--rewrite-list does that).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from replog.harness.broker_process import BrokerProcess
from tests.compat.suite_build import SUITE_NAME, build_suite, is_built
from tests.compat.verdicts import (
    Status,
    Verdict,
    compare,
    last_line,
    parse_id_list,
    plain_lines,
    updated_list,
    verdict,
    with_broker_exit,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
VENDOR_DIR = REPO_ROOT.parent / "shared" / "vendor"  # CI has ../shared beside the clone, as here
TARBALL = VENDOR_DIR / "librdkafka-2.15.0.tar.gz"
SUITE_LIST = VENDOR_DIR / "librdkafka-broker-tests.txt"
PASSING_LIST = Path(__file__).with_name("librdkafka-passing.txt")
BUILD_DIR = REPO_ROOT / "build"  # ignored by git
RUN_DIR = BUILD_DIR / "compat-librdkafka"
PASSING_LIST_HEADER = (
    "# librdkafka tests that pass against replog (python -m tests.compat.librdkafka); make compat fails if one\n"
    "# stops passing. Grow it with `python -m tests.compat.librdkafka --rewrite-list` after a full run.\n"
)

RUNNER_ARGS = ["./test-runner", "-p1", "-Q", "-E", "-L"]  # one at a time, quick, no sockem, no local-only
QUICK_FLAG = "-Q"  # quick mode skips the sub-tests librdkafka marks slow; --full runs them too
BROKER_OVERRIDES = {"auto.create.topics.enable": "true", "num.partitions": "4"}  # the default scenario
# The suite skips tests needing a newer broker than this (default 2.4.0.0). replog's newest API versions
# (Metadata v12, ListOffsets v7) came with Kafka 3.0 and 3.1; none of the listed tests needs more than 2.4.
KAFKA_VERSION = "3.1.0"
TEST_TIMEOUT_S = 120.0
BROKER_STOP_TIMEOUT_S = 15.0


@dataclass(frozen=True, slots=True)
class RunSettings:
    source_dir: Path  # a built librdkafka-2.15.0 tree; only read, so one build can serve several checkouts
    run_dir: Path  # logs, broker data and each test's test.conf
    timeout_s: float
    debug: str | None  # librdkafka debug contexts, or None
    quick: bool  # -Q: the suite's quick mode


def run_runner(test_id: str, port: int, settings: RunSettings) -> int | None:
    """The runner's exit code for one test id, or None if it overran the timeout and was killed."""
    tests_dir = settings.source_dir / "tests"
    test_conf = settings.run_dir / f"{test_id}-test.conf"  # not in tests/: the build may be shared, read-only
    test_conf.write_text(f"bootstrap.servers=127.0.0.1:{port}\n")
    env = dict(os.environ, TESTS=test_id, TEST_KAFKA_VERSION=KAFKA_VERSION, RDKAFKA_TEST_CONF=str(test_conf),
               LD_LIBRARY_PATH=f"{settings.source_dir / 'src'}:{settings.source_dir / 'src-cpp'}")
    runner_args = RUNNER_ARGS if settings.quick else [arg for arg in RUNNER_ARGS if arg != QUICK_FLAG]
    log_path = settings.run_dir / f"{test_id}.log"
    if settings.debug:
        env["TEST_DEBUG"] = settings.debug  # librdkafka's `debug` property for every client the test creates
    with open(log_path, "wb") as out:
        # Its own session, so a timeout kills the runner and anything it started, and nothing else.
        runner = subprocess.Popen(runner_args, cwd=tests_dir, env=env, stdout=out, stderr=subprocess.STDOUT,
                                  start_new_session=True)
        try:
            return runner.wait(settings.timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait()
            return None


def run_test(test_id: str, settings: RunSettings) -> Verdict:
    """One test id against a broker of its own, so no test sees another's topics or a broker it broke."""
    log_path = settings.run_dir / f"{test_id}.log"
    broker_output = settings.run_dir / f"{test_id}-broker.out"
    broker_output.unlink(missing_ok=True)
    log_dir = settings.run_dir / f"{test_id}-data"
    shutil.rmtree(log_dir, ignore_errors=True)
    broker = BrokerProcess(log_dir, output=broker_output, overrides=BROKER_OVERRIDES)
    broker.start()
    started = time.monotonic()
    try:
        exit_code = run_runner(test_id, broker.port, settings)
        seconds = time.monotonic() - started
        broker_exit = broker.proc.poll()
    finally:
        broker.stop(BROKER_STOP_TIMEOUT_S)
        shutil.rmtree(log_dir, ignore_errors=True)
    result = verdict(test_id, log_path.read_text(errors="replace"), exit_code, seconds)
    return with_broker_exit(result, broker_exit, last_line(plain_lines(broker.output_tail())))


def format_row(result: Verdict) -> str:
    reason = f"  {result.reason}" if result.reason else ""
    return f"{result.test_id}  {result.status:<7}  {result.seconds:6.1f}s{reason}"


def report(results: list[Verdict], listed: list[str]) -> int:
    """Prints the totals and the comparison with the passing list; the exit code (1: a regression)."""
    counts = {status: sum(r.status == status for r in results) for status in Status}
    # "status=count", not "N passed, N failed": CI reads a line of that shape as the test run's verdict, and
    # failing suite tests outside the passing list are expected until their features land.
    print("\ncompat: librdkafka suite " + " ".join(f"{status}={count}" for status, count in counts.items()))
    comparison = compare(results, listed)
    for test_id in comparison.newly_passing:
        print(f"compat: {test_id} passes but is not in {PASSING_LIST.name} yet (--rewrite-list adds it)")
    for result in comparison.skipped_by_suite:
        print(f"compat: {result.test_id} (in {PASSING_LIST.name}) was skipped by the suite here: {result.reason}")
    for result in comparison.regressions:
        print(f"compat: REGRESSION {result.test_id} is in {PASSING_LIST.name} but did not pass: "
              f"{result.status} {result.reason}")
    return 1 if comparison.regressions else 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.compat.librdkafka", description=__doc__.splitlines()[0])
    parser.add_argument("--tests", help="comma-separated test ids to run instead of the whole vendored list")
    parser.add_argument("--timeout", type=float, default=TEST_TIMEOUT_S,
                        help=f"seconds one test may run before it is killed and fails (default {TEST_TIMEOUT_S:g})")
    parser.add_argument("--debug", metavar="CONTEXTS",
                        help="librdkafka debug contexts for the clients, e.g. protocol,cgrp (TEST_DEBUG)")
    parser.add_argument("--full", action="store_true",
                        help="run without quick mode (-Q), so the sub-tests librdkafka marks slow run too")
    parser.add_argument("--suite-dir", type=Path,
                        help=f"an already built {SUITE_NAME} tree to use read-only (default: the one built "
                             f"into {BUILD_DIR.relative_to(REPO_ROOT)}/ for this source, built if missing)")
    parser.add_argument("--build-only", action="store_true",
                        help="build the test-runner if it is not built yet, and run no test")
    parser.add_argument("--run-dir", type=Path, default=RUN_DIR,
                        help=f"where logs and broker data go (default {RUN_DIR.relative_to(REPO_ROOT)})")
    parser.add_argument("--rewrite-list", action="store_true",
                        help=f"write this run's passing tests into {PASSING_LIST.name} (and exit 0)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.full and args.rewrite_list:
        # The list is what quick mode (make compat) must pass; tests that only pass in full mode come back empty.
        raise SystemExit("compat: --rewrite-list records the quick-mode list; drop --full")
    if args.suite_dir is None:
        source_dir, build_seconds = build_suite(TARBALL, BUILD_DIR)
        if build_seconds is not None:
            print(f"compat: built librdkafka's test-runner in {build_seconds:.0f} s", flush=True)
    elif is_built(args.suite_dir):
        source_dir = args.suite_dir.resolve()
    else:
        raise SystemExit(f"compat: --suite-dir {args.suite_dir} holds no finished build")
    if args.build_only:
        print(f"compat: librdkafka's test-runner is built in {source_dir}")
        return 0
    test_ids = args.tests.split(",") if args.tests else parse_id_list(SUITE_LIST.read_text())
    settings = RunSettings(source_dir, args.run_dir.resolve(), args.timeout, args.debug,
                           quick=not args.full)
    settings.run_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    results = []
    for test_id in test_ids:
        results.append(run_test(test_id, settings))
        print(format_row(results[-1]), flush=True)
    print(f"compat: ran {len(results)} test ids in {time.monotonic() - started:.0f} s; logs in {settings.run_dir}")
    listed = parse_id_list(PASSING_LIST.read_text()) if PASSING_LIST.exists() else []
    exit_code = report(results, listed)
    if args.rewrite_list:
        PASSING_LIST.write_text(PASSING_LIST_HEADER + "".join(f"{t}\n" for t in updated_list(results, listed)))
        print(f"compat: wrote {PASSING_LIST}")
        return 0
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
