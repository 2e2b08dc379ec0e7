"""The harness is the bottom of everything that runs processes: chaos, the demo, the CLI and the benchmarks
build on it, so it imports none of them (issue 14 found import circles through the demo and chaos/)."""

import ast
from pathlib import Path

import replog.harness

ABOVE_THE_HARNESS = ("replog.chaos", "replog.demo", "replog.cli", "replog.cluster_control", "benchmarks")


def imported_modules(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            modules.add("." * node.level + (node.module or ""))
    return modules


def test_the_harness_imports_nothing_that_builds_on_it():
    for path in Path(replog.harness.__file__).parent.glob("*.py"):
        for module in imported_modules(path):
            assert not module.startswith(ABOVE_THE_HARNESS), f"{path.name} imports {module}"
            assert not module.startswith(".."), f"{path.name} imports {module}: name it absolutely"
