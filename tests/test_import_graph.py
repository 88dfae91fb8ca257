"""No import cycles in the product code (hive_scheduler, hive_lab_server, hive_lab).

Every import counts: at module level, inside functions and under ``if TYPE_CHECKING`` (a type-only
back import is still a dependency a reader has to follow, and the way a mixin hides its host). The
graph is read from the source with ``ast``, so nothing is imported to check it.
"""

from __future__ import annotations

import ast
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = {"hive_scheduler": REPO / "scheduler" / "hive_scheduler",
            "hive_lab_server": REPO / "server_ext" / "hive_lab_server",
            "hive_lab": REPO / "hive_lab"}


def product_modules() -> dict[str, pathlib.Path]:
    mods = {}
    for name, root in PACKAGES.items():
        for path in root.rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join([name, *parts])] = path
    return mods


def import_graph(mods: dict[str, pathlib.Path]) -> dict[str, set[str]]:
    """module -> the product modules it imports (``from pkg import sub`` names the submodule)."""
    graph: dict[str, set[str]] = {mod: set() for mod in mods}
    for mod, path in mods.items():
        package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                graph[mod].update(a.name for a in node.names if a.name in mods)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                for alias in node.names:
                    target = f"{base}.{alias.name}"
                    if target in mods:
                        graph[mod].add(target)
                    elif base in mods:
                        graph[mod].add(base)
        graph[mod].discard(mod)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return out


def test_the_graph_reader_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_type_checking_and_function_level_imports(tmp_path):
    (tmp_path / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n")
    (tmp_path / "b.py").write_text("def f():\n    from . import c\n")
    (tmp_path / "c.py").write_text("from pkg import a\n")
    mods = {f"pkg.{n}": tmp_path / f"{n}.py" for n in "abc"}
    graph = import_graph(mods)
    assert graph == {"pkg.a": {"pkg.b"}, "pkg.b": {"pkg.c"}, "pkg.c": {"pkg.a"}}
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_no_import_cycles_in_the_product_code():
    found = cycles(import_graph(product_modules()))
    assert not found, "import cycles (each a set of modules importing each other):\n" + "\n".join(
        " <-> ".join(c) for c in found)


def test_no_part_of_the_service_imports_the_service():
    """The service builds its parts and hands them what they need; a part never reaches back for it."""
    graph = import_graph(product_modules())
    parts = sorted(m for m in graph if m.startswith("hive_lab_server.jobs.lifecycle")
                   or m in {"hive_lab_server.errors", "hive_lab_server.jobs.limits", "hive_lab_server.usage.metrics",
                            "hive_lab_server.jobs.start_estimates"})
    assert "hive_lab_server.jobs.lifecycle.recovery" in parts
    assert not [p for p in parts if "hive_lab_server.jobs.service" in graph[p]]
