"""Table tests of the verdicts on librdkafka test-runner output and the passing-list rules (tests/compat)."""

import pytest

from tests.compat.verdicts import (
    Status,
    Verdict,
    compare,
    parse_id_list,
    updated_list,
    verdict,
    with_broker_exit,
)

GREEN, CYAN, RED, RESET = "\x1b[32m", "\x1b[36m", "\x1b[31m", "\x1b[0m"


def _row(name: str, state: str, seconds: float, note: str = "") -> str:
    colour = {"PASSED": GREEN, "SKIPPED": CYAN}.get(state, RED)
    tail = f"{colour} {note}{RESET}" if note else ""
    return f"|{colour} {name:<40} | {state:>10} | {seconds:7.3f}s {RESET}|{tail}"


def _summary(*rows: str) -> str:
    border = "#" + "=" * 66 + "#"
    return "\n".join(["TEST 20261124005639 (bare, scenario default) SUMMARY", border,
                      _row("<MAIN>", "PASSED", 1.2), *rows, border])


TIMEOUT_BLOCK = (
    "[0056_balanced_group_mt      / 19.035s] TEST FAILURE\n"
    f'{RED}### Test "0056_balanced_group_mt" failed at test.c:1558:check_test_timeouts() at Tue Nov 24 00:57:29 '
    "2026: ###\nTest 0056_balanced_group_mt timed out (timeout set to 19 seconds)\n"
)
SUBTEST_BLOCK = (
    f'{RED}### Test "0045_subscribe_update (do_test_regex:120: )" failed at 0045-subscribe_update.c:88:'
    "await_assignment() at Tue Nov 24 00:57:29 2026: ###\nBroker: Group coordinator not available\n"
)


@pytest.mark.parametrize(
    ("test_id", "output", "exit_code", "expected"),
    [
        ("0012", _summary(_row("0012_produce_consume", "PASSED", 1.545)), 0, (Status.PASS, "")),
        # Quick mode skipped every sub-test: the body returned at once.
        ("0018", _summary(_row("0018_cgrp_term", "PASSED", 0.0)), 0, (Status.EMPTY, "")),
        # One metadata round trip on loopback is a real pass however fast.
        ("0035", _summary(_row("0035_api_version", "PASSED", 0.009)), 0, (Status.PASS, "")),
        ("0004", _summary(_row("0004_conf", "SKIPPED", 0.0, "Filtered due to negative test flags")), 0,
         (Status.SKIPPED, "Filtered due to negative test flags")),
        # 0045 is six tests; one real pass and the rest skipped is a pass.
        ("0045", _summary(_row("0045_subscribe_update", "PASSED", 3.2),
                          _row("0045_subscribe_update_mock", "SKIPPED", 0.0, "Filtered due to negative test flags")),
         0, (Status.PASS, "")),
        # The runner kills itself on its own timeout: a failure block and no table.
        ("0056", TIMEOUT_BLOCK, -9,
         (Status.FAIL, "test.c:1558:check_test_timeouts(): Test 0056_balanced_group_mt timed out (timeout set to "
                       "19 seconds)")),
        ("0045", SUBTEST_BLOCK + _summary(_row("0045_subscribe_update", "FAILED", 9.0, "await_assignment")), 1,
         (Status.FAIL, "0045-subscribe_update.c:88:await_assignment(): Broker: Group coordinator not available")),
        ("0012", "[0012_produce_consume / 0.003s] Created kafka instance\n", None,
         (Status.FAIL, "killed by the harness's timeout; [0012_produce_consume / 0.003s] Created kafka instance")),
        ("0012", "Segmentation fault\n", -11, (Status.FAIL, "exit code -11: Segmentation fault")),
        # Ids that match no test (a typo in a list) must not pass quietly.
        ("9999", _summary(), 0, (Status.FAIL, "no test named 9999_* ran")),
    ],
)
def test_verdict(test_id, output, exit_code, expected):
    result = verdict(test_id, output, exit_code)
    assert (result.status, result.reason) == expected
    assert result.test_id == test_id


def test_a_broker_exit_fails_even_a_pass():
    passed = Verdict("0012", Status.PASS, "", 1.5)
    assert with_broker_exit(passed, None, "ignored") == passed
    assert with_broker_exit(passed, 1, "Traceback ...") == Verdict(
        "0012", Status.FAIL, "replog broker exited with 1: Traceback ...", 1.5
    )


def test_parse_id_list_skips_comments_and_blanks():
    assert parse_id_list("# header\n0001\n\n0012  # produce and consume\n") == ["0001", "0012"]


RUN = [
    Verdict("0001", Status.PASS),
    Verdict("0012", Status.FAIL, "timed out"),
    Verdict("0018", Status.EMPTY),
    Verdict("0057", Status.PASS),
    Verdict("0004", Status.SKIPPED),
]


def test_compare_finds_regressions_and_new_passes():
    comparison = compare(RUN, ["0001", "0012", "0018", "0090"])  # 0090 did not run: neither
    assert [r.test_id for r in comparison.regressions] == ["0012", "0018"]
    assert comparison.newly_passing == ("0057",)


def test_compare_reports_a_listed_test_the_suite_skipped_without_calling_it_a_regression():
    comparison = compare(RUN, ["0001", "0004"])  # 0004 skipped itself, as 0055 does when CI is set
    assert comparison.regressions == ()
    assert [r.test_id for r in comparison.skipped_by_suite] == ["0004"]


def test_updated_list_keeps_a_listed_test_the_suite_skipped():
    assert updated_list(RUN, ["0004", "0012"]) == ["0001", "0004", "0057"]


def test_updated_list_replaces_only_the_tests_that_ran():
    assert updated_list(RUN, ["0001", "0012", "0090"]) == ["0001", "0057", "0090"]
