"""No import cycle inside `hookinbox`: its modules import one another in one direction.

A cycle makes the import order decide what works (a name not yet defined when the other half
runs) and hides a layer that knows too much; import-linter's contracts check chosen pairs of
layers, this test checks every pair. The graph is grimp's (the library import-linter is built
on), read from the source, twice:

- the imports that run (module level and inside functions; not under `if TYPE_CHECKING:`):
  no cycle at all;
- every import, those under `if TYPE_CHECKING:` too (issue 49): a module that names another's
  type depends on it as much as one that calls it, and lint cannot see such a knot (the
  storage gateways and dialects all named `Store`, which imports each of them: 23 modules in
  one). No cycle but the known remainder below, which may only shrink.

A cycle is a strongly connected component of the graph (every module in it reaches every
other); the failure names each one and one chain that closes it, with the line of each import.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise

import grimp
import pytest

PACKAGE = "hookinbox"

# Cycles allowed for a while, matched exactly (a cycle that grows into one, or any other
# cycle, fails): none. The last, `_metrics` <-> `_storage`, went with the storage gateways
# (issue 37): `_metrics` reads its figures through `Store.stats` and imports no storage module.
KNOWN: frozenset[frozenset[str]] = frozenset()

# Cycles allowed while TYPE_CHECKING imports count: a cycle found must lie within one of these
# (so each may shrink, never grow or move): none. The last, the HTTP app and the facade
# (`Inbox.asgi` builds the app, which named `BaseInbox` for its type), went with the delivery
# pipeline below HTTP (issue 49 item 1): the HTTP functions name the pipeline's protocol
# (`_receiver.Pipeline`), which every inbox satisfies.
KNOWN_WITH_TYPES: frozenset[frozenset[str]] = frozenset()


def build(*, type_checking: bool = False) -> grimp.ImportGraph:
    """The package's import graph; `type_checking`: imports under `if TYPE_CHECKING:` too."""
    # cache_dir=None: the test reads the tree as it is now and writes nothing into it.
    return grimp.build_graph(
        PACKAGE,
        include_external_packages=False,
        exclude_type_checking_imports=not type_checking,
        cache_dir=None,
    )


def components(graph: grimp.ImportGraph) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def successors(module: str) -> Iterator[str]:
        return iter(sorted(graph.find_modules_directly_imported_by(module)))

    for root in sorted(graph.modules):
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, successors(root))]
        while work:
            module, pending = work[-1]
            following = next(pending, None)
            if following is not None:
                if following not in index:
                    index[following] = low[following] = len(index)
                    stack.append(following)
                    on_stack.add(following)
                    work.append((following, successors(following)))
                elif following in on_stack:
                    low[module] = min(low[module], index[following])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == index[module]:
                members = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.add(member)
                    if member == module:
                        break
                # A module importing itself is harmless (and grimp drops such imports).
                if len(members) > 1:
                    found.append(frozenset(members))
    return found


def closing_chain(graph: grimp.ImportGraph, component: frozenset[str]) -> tuple[str, ...]:
    """The shortest chain that leaves the component's first module and comes back to it."""
    start = min(component)
    best: tuple[str, ...] | None = None
    for following in graph.find_modules_directly_imported_by(start) & component:
        back = graph.find_shortest_chain(importer=following, imported=start)
        if back is not None and (best is None or len(back) + 1 < len(best)):
            best = (start, *back)
    assert best is not None, component
    return best


def describe(graph: grimp.ImportGraph, component: frozenset[str]) -> str:
    chain = closing_chain(graph, component)
    steps = []
    for importer, imported in pairwise(chain):
        details = graph.get_import_details(importer=importer, imported=imported)
        where = ", ".join(f"line {d['line_number']}: {d['line_contents']}" for d in details)
        steps.append(f"    {importer} -> {imported}  ({where})")
    return f"  {len(component)} modules: {', '.join(sorted(component))}\n" + "\n".join(steps)


def fail_on(graph: grimp.ImportGraph, cycles: list[frozenset[str]], which: str) -> None:
    if cycles:
        report = "\n".join(describe(graph, c) for c in sorted(cycles, key=sorted))
        found = f"{len(cycles)} import cycle(s) in {PACKAGE} ({which})"
        pytest.fail(f"{found}:\n{report}", pytrace=False)


def test_no_import_cycle_in_the_package() -> None:
    graph = build()
    fail_on(graph, [c for c in components(graph) if c not in KNOWN], "imports that run")


def test_no_import_cycle_with_type_checking_imports_counted() -> None:
    graph = build(type_checking=True)
    cycles = [c for c in components(graph) if not any(c <= known for known in KNOWN_WITH_TYPES)]
    fail_on(graph, cycles, "TYPE_CHECKING imports counted")


def test_the_search_finds_a_cycle() -> None:
    # The search itself can fail: a graph with a cycle of three and a chain hanging off it.
    graph = grimp.ImportGraph()
    for importer, imported in [("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")]:
        graph.add_import(importer=importer, imported=imported, line_number=1, line_contents="x")
    found = components(graph)
    assert found == [frozenset({"p.a", "p.b", "p.c"})]
    assert closing_chain(graph, found[0]) == ("p.a", "p.b", "p.c", "p.a")
