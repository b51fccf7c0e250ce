"""No import cycles anywhere in gql_memory (CONTRIBUTING.md, "Layers").

Counted as import-linter counts them, on grimp's graph of the package (the library
import-linter builds on): every import statement, those under ``if TYPE_CHECKING:`` and inside
functions included; only a package importing its own submodules (re-exporting them) is left
out. Two checks: no two modules import each other, directly or through others, and no two
sibling packages or modules do (import-linter's ``acyclic_siblings``: a subpackage stands for
everything below it)."""

from __future__ import annotations

from collections.abc import Iterable

import grimp
import pytest

PACKAGE = "gql_memory"


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(PACKAGE, include_external_packages=False)


def _is_own_submodule(importer: str, imported: str) -> bool:
    return imported.startswith(importer + ".")


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
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
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def module_edges(graph: grimp.ImportGraph) -> dict[str, set[str]]:
    return {
        module: {
            imported
            for imported in graph.find_modules_directly_imported_by(module)
            if not _is_own_submodule(module, imported)
        }
        for module in graph.modules
    }


def sibling_edges(graph: grimp.ImportGraph, package: str) -> dict[str, set[str]]:
    """The imports between the children of ``package``, each child standing for itself and
    everything below it."""
    children = graph.find_children(package)

    def child_of(module: str) -> str | None:
        return next((c for c in children if module == c or module.startswith(c + ".")), None)

    edges: dict[str, set[str]] = {child: set() for child in children}
    for module, imported_modules in module_edges(graph).items():
        source = child_of(module)
        if source is None:
            continue
        for imported in imported_modules:
            target = child_of(imported)
            if target is not None and target != source:
                edges[source].add(target)
    return edges


def packages(graph: grimp.ImportGraph) -> Iterable[str]:
    return sorted(m for m in graph.modules if graph.find_children(m))


def test_no_module_imports_itself_through_others(graph: grimp.ImportGraph) -> None:
    assert cycles(module_edges(graph)) == []


def test_no_sibling_packages_import_each_other(graph: grimp.ImportGraph) -> None:
    found = {package: cycles(sibling_edges(graph, package)) for package in packages(graph)}
    assert {package: c for package, c in found.items() if c} == {}


def test_the_cycle_finder_finds_a_cycle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(edges) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
