"""make test's xdist order: the longest files first, everything else as collected."""

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.slow_files import (
    SLOW_FILES,
    file_of,
    format_slow_files,
    parse_slow_files,
    seconds_per_file,
    slow_files_first,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class FakeItem:
    nodeid: str


def nodeids(items) -> list[str]:
    return [item.nodeid for item in items]


@pytest.mark.parametrize(("collected", "seconds_by_file", "expected"), [
    pytest.param(["a.py::x", "b.py::y"], {}, ["a.py::x", "b.py::y"], id="nothing listed: collection order"),
    pytest.param(["a.py::x", "b.py::y", "c.py::z"], {"c.py": 50.0}, ["c.py::z", "a.py::x", "b.py::y"],
                 id="a listed file moves to the front, the others keep their order"),
    pytest.param(["a.py::x", "b.py::y", "c.py::z"], {"b.py": 20.0, "c.py": 90.0},
                 ["c.py::z", "b.py::y", "a.py::x"], id="listed files longest first"),
    pytest.param(["a.py::x", "b.py::t[1]", "b.py::t[2]", "b.py::C::u"], {"b.py": 30.0},
                 ["b.py::t[1]", "b.py::t[2]", "b.py::C::u", "a.py::x"], id="a file's tests stay together, in order"),
    pytest.param(["a.py::x"], {"gone.py": 99.0}, ["a.py::x"], id="a listed file that was not collected"),
])
def test_slow_files_first(collected, seconds_by_file, expected):
    assert nodeids(slow_files_first([FakeItem(n) for n in collected], seconds_by_file)) == expected


def test_file_of_is_the_part_loadfile_groups_by():
    assert file_of("tests/unit/test_x.py::TestY::test_z[a::b]") == "tests/unit/test_x.py"


def test_seconds_per_file_sums_setup_call_and_teardown_of_a_durations_table():
    log = [
        "============================= slowest durations =============================",
        "125.75s call     tests/integration/test_bench_cli.py::test_quick",
        "2.01s setup    tests/integration/test_bench_cli.py::test_quick",
        "0.50s teardown tests/integration/test_bench_cli.py::test_other[x::y]",
        "10.00s call     tests/chaos/test_chaos.py::test_run",
        "(1200 durations < 0.005s hidden.  Use -vv to show these durations.)",
        "4253 passed in 554.34s (0:09:14)",
    ]
    assert seconds_per_file(log) == pytest.approx(
        {"tests/integration/test_bench_cli.py": 128.26, "tests/chaos/test_chaos.py": 10.0})


def test_the_written_list_reads_back_without_the_files_under_the_threshold():
    written = format_slow_files({"tests/a.py": 12.34, "tests/b.py": 130.0, "tests/c.py": 3.0}, min_seconds=10.0)
    assert list(parse_slow_files(written).items()) == [("tests/b.py", 130.0), ("tests/a.py", 12.3)]


def test_every_file_in_the_checked_in_list_exists():
    listed = parse_slow_files(SLOW_FILES.read_text())
    assert listed, f"{SLOW_FILES} lists no file"
    assert [path for path in listed if not (REPO_ROOT / path).is_file()] == []
