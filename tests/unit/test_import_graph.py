"""No import cycle among replog's modules or among its packages.

import-linter (`lint-imports`, run by `make test`) checks that imports point down the layers; a cycle inside
one layer, or between two modules of one package, would still pass it. A cycle makes import order matter
and hides a missing layer, so none is allowed.
"""

import grimp


def strongly_connected_components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (the graph has hundreds of modules)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    return [c for c in strongly_connected_components(graph) if len(c) > 1 or c[0] in graph.get(c[0], ())]


def import_graph(granularity: int | None) -> dict[str, set[str]]:
    """Module -> modules it imports, within replog; granularity 2 folds modules into replog.<package>."""
    imports = grimp.build_graph("replog", cache_dir=None)  # a stale cache reported imports long gone

    def name(module: str) -> str:
        return module if granularity is None else ".".join(module.split(".")[:granularity])

    graph: dict[str, set[str]] = {}
    for module in imports.modules:
        targets = {name(t) for t in imports.find_modules_directly_imported_by(module)} - {name(module)}
        graph.setdefault(name(module), set()).update(targets)
    return graph


def test_cycle_finder_finds_a_cycle_and_only_it():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert sorted(cycles(graph)) == [["a", "b", "c"], ["e"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_modules():
    assert cycles(import_graph(None)) == []


def test_no_import_cycle_between_packages():
    assert cycles(import_graph(2)) == []
