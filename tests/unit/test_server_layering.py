"""The shared server shell stays below the servers built on it: replog/server imports nothing from broker/,
controller/ or fetcher/, and the controller imports nothing from broker/ (DESIGN.md's layers)."""

import ast
from pathlib import Path

import pytest

import replog

PACKAGE_ROOT = Path(replog.__file__).parent


def imported_packages(module_path: Path) -> set[str]:
    """The replog subpackages a module imports (absolute or relative), e.g. {"protocol", "log"}."""
    package = module_path.relative_to(PACKAGE_ROOT).parts[:-1]  # ("server",) for replog/server/x.py
    found = set()
    for node in ast.walk(ast.parse(module_path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - (node.level - 1)]
            names = [".".join(("replog", *base, *([node.module] if node.module else [])))]
        else:
            continue
        found.update(name.split(".")[1] for name in names if name.startswith("replog."))
    return found


@pytest.mark.parametrize(("layer", "forbidden"), [
    ("server", {"broker", "controller", "fetcher"}),
    ("controller", {"broker"}),
])
def test_a_layer_imports_nothing_from_the_layers_above_it(layer, forbidden):
    violations = {str(path.relative_to(PACKAGE_ROOT)): sorted(imported_packages(path) & forbidden)
                  for path in sorted((PACKAGE_ROOT / layer).glob("*.py"))}
    assert {path: found for path, found in violations.items() if found} == {}


def test_relative_imports_are_resolved_to_their_package():
    module = PACKAGE_ROOT / "server" / "connection.py"
    assert "protocol" in imported_packages(module)  # absolute: replog.protocol.frames
    assert "server" in imported_packages(module)  # relative: .dispatch
