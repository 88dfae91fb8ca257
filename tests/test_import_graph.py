"""No import cycles in the product code (hive_scheduler, hive_lab_server, hive_lab), and its packages
in layers, one way (ARCHITECTURE.md, "Layers, one way"): a module imports only its own package or the
packages of lower layers, so no two packages import each other.

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

# The product's top-level packages, bottom first (the core knows no server; the server no client).
TOP_LAYERS = [{"hive_scheduler"}, {"hive_lab_server"}, {"hive_lab"}]

# hive_lab_server's packages and top-level modules, bottom first. A module may import its own package
# and any package of a lower layer, nothing in its own layer but itself and nothing above. The wire
# types (``wire``: the job spec, the models, job states, event messages) are at the bottom, so the API
# and the domain both import them and the domain never imports the API. A new package gets a layer
# here (``test_every_package_has_a_layer``).
SERVER_LAYERS = [
    {"wire", "errors", "version", "stop_signals", "moved", "full_collections"},  # leaves: import no other package
    {"store", "auth", "hardware"},
    {"execution", "cluster"},  # launchers, isolation, Slurm, staging, what a task's env gets at launch
    {"usage", "timeshare", "kernels"},  # parts the job service composes; none imports it
    {"jobs"},  # the service, its lifecycle, admission, arrays, pipelines
    {"api"},  # handlers, formats, OpenAPI
    {"hub"},
    {"app", "config_docs"},  # the composition root (and the reference of its settings)
    {"__main__", "__init__"},  # the entry points (``hive_lab_server`` itself names the app lazily)
]


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
                            "hive_lab_server.jobs.start_estimates", "hive_lab_server.timeshare.rounds"})
    assert "hive_lab_server.jobs.lifecycle.recovery" in parts
    assert not [p for p in parts if "hive_lab_server.jobs.service" in graph[p]]


# --- layers ----------------------------------------------------------------------------------------

def server_package(mod: str) -> str:
    """The package of hive_lab_server that ``mod`` belongs to (a top-level module is its own;
    ``__init__`` for ``hive_lab_server`` itself)."""
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def package_edges(graph: dict[str, set[str]], unit) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """(package a, package b) -> the module imports that make a import b, for ``unit(module)`` the
    package of a module (None: not counted)."""
    edges: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for mod in sorted(graph):
        for target in sorted(graph[mod]):
            a, b = unit(mod), unit(target)
            if a is not None and b is not None and a != b:
                edges.setdefault((a, b), []).append((mod, target))
    return edges


def two_way_ties(edges: dict[tuple[str, str], list[tuple[str, str]]]) -> list[str]:
    """Each pair of packages that import each other, with the imports either way."""
    out = []
    for (a, b), there in sorted(edges.items()):
        if a < b and (b, a) in edges:
            back = edges[(b, a)]
            out.append(f"{a} <-> {b}: " + ", ".join(f"{m} -> {t}" for m, t in there + back))
    return out


def layer_breaks(edges: dict[tuple[str, str], list[tuple[str, str]]], layers: list[set[str]]) -> list[str]:
    """Each import of a package in the same or a higher layer than the importer's."""
    rank = {pkg: i for i, layer in enumerate(layers) for pkg in layer}
    out = []
    for (a, b), imports in sorted(edges.items()):
        if rank[b] >= rank[a]:
            where = "the same layer as" if rank[b] == rank[a] else "a layer above"
            out += [f"{m} -> {t} ({b} is in {where} {a})" for m, t in imports]
    return out


def server_edges() -> dict[tuple[str, str], list[tuple[str, str]]]:
    return package_edges(import_graph(product_modules()),
                         lambda m: server_package(m) if m.startswith("hive_lab_server") else None)


def top_edges() -> dict[tuple[str, str], list[tuple[str, str]]]:
    return package_edges(import_graph(product_modules()), lambda m: m.split(".")[0])


def test_the_layer_reader_finds_an_import_upwards_and_a_two_way_tie():
    graph = {"p.low.a": {"p.high.b", "p.low.c"}, "p.low.c": set(), "p.high.b": {"p.low.c"},
             "p.mid.d": {"p.mid2.e"}, "p.mid2.e": set()}
    edges = package_edges(graph, server_package)
    assert two_way_ties(edges) == ["high <-> low: p.high.b -> p.low.c, p.low.a -> p.high.b"]
    layers = [{"low"}, {"mid", "mid2"}, {"high"}]
    assert layer_breaks(edges, layers) == ["p.low.a -> p.high.b (high is in a layer above low)",
                                           "p.mid.d -> p.mid2.e (mid2 is in the same layer as mid)"]
    del graph["p.low.a"], graph["p.mid.d"]
    assert layer_breaks(package_edges(graph, server_package), layers) == []


def test_every_package_has_a_layer():
    layered = set().union(*SERVER_LAYERS)
    packages = {server_package(m) for m in product_modules() if m.startswith("hive_lab_server")}
    assert packages - layered == set(), "give these packages of hive_lab_server a layer in SERVER_LAYERS"
    assert sum(len(layer) for layer in SERVER_LAYERS) == len(layered), "a package is in two layers"


def test_no_two_packages_import_each_other():
    ties = two_way_ties(server_edges()) + two_way_ties(top_edges())
    assert not ties, "packages that import each other:\n" + "\n".join(ties)


def test_each_module_imports_only_its_own_package_or_lower_layers():
    breaks = layer_breaks(server_edges(), SERVER_LAYERS) + layer_breaks(top_edges(), TOP_LAYERS)
    assert not breaks, "imports against the layers (ARCHITECTURE.md, \"Layers, one way\"):\n" + "\n".join(breaks)


# --- inside a package ------------------------------------------------------------------------------

def ties_inside_packages(graph: dict[str, set[str]], packages: set[str]) -> list[str]:
    """Each pair of parts of one package (its sub-packages and modules: ``execution.isolation`` and
    ``execution.launchers`` in ``execution``) that import each other, at every depth."""
    out = []
    for package in sorted(packages):
        depth = package.count(".") + 1

        def part(mod: str, package=package, depth=depth) -> str | None:
            return mod.split(".")[depth] if mod.startswith(package + ".") else None

        out += [f"inside {package}: {tie}" for tie in two_way_ties(package_edges(graph, part))]
    return out


def product_packages() -> set[str]:
    return {mod for mod, path in product_modules().items() if path.name == "__init__.py"}


def test_the_tie_reader_looks_inside_packages():
    graph = {"p.ex.iso.files": {"p.ex.launch.base"}, "p.ex.launch.base": set(),
             "p.ex.launch.local": {"p.ex.iso.cgroups"}, "p.ex.iso.cgroups": set(), "p.ex.env": {"p.ex.iso.files"}}
    assert ties_inside_packages(graph, {"p", "p.ex", "p.ex.iso", "p.ex.launch"}) == [
        "inside p.ex: iso <-> launch: p.ex.iso.files -> p.ex.launch.base, p.ex.launch.local -> p.ex.iso.cgroups"]
    graph["p.ex.iso.files"] = set()  # one way only: no tie
    assert ties_inside_packages(graph, {"p", "p.ex", "p.ex.iso", "p.ex.launch"}) == []


def test_no_two_parts_of_a_package_import_each_other():
    """The layer rule one level down: inside ``execution`` or ``jobs``, two sub-packages (or a module and a
    sub-package) that import each other are one part split in two; one of them names the other by a
    protocol, or the shared piece moves to the part that owns it."""
    ties = ties_inside_packages(import_graph(product_modules()), product_packages())
    assert not ties, "parts of a package that import each other:\n" + "\n".join(ties)


def test_the_wire_types_import_nothing_of_the_server_above_them():
    """The named case of the rule: the spec, the models and the states are what everyone else imports."""
    graph = import_graph(product_modules())
    wire = sorted(m for m in graph if m.startswith("hive_lab_server.wire"))
    assert "hive_lab_server.wire.spec" in wire and "hive_lab_server.wire.models" in wire
    assert not [(m, t) for m in wire for t in graph[m]
                if t.startswith("hive_lab_server.") and not t.startswith("hive_lab_server.wire")]
