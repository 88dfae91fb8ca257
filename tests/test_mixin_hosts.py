"""No class in the product is a mixin of a host it does not name (issue 39).

A mixin reads ``self.store``, ``self.unit(...)``, ``self.active`` that some other class, the one it is
mixed into, defines: following such a read means knowing that host, which the mixin's file never names
(``HiveService(Admission, UnitOfWork)`` was the last). So: every ``self.<name>`` a class reads must be
one the class itself defines (a method, a class attribute or annotation, a ``self.<name> = ...`` in one
of its methods: what ``__init__`` receives and keeps) or one of its bases, followed through the
product's own classes, defines. A class with a base from outside the product (``Configurable``,
``APIHandler``, ``Exception``, ...) is not checked: what that base defines cannot be read from here.

Read from the source with ``ast``, so nothing is imported to check it.
"""

from __future__ import annotations

import ast
import pathlib

from test_import_graph import product_modules

#: bases that define nothing a subclass reads through ``self`` (a ``Protocol`` declares its members itself)
NEUTRAL_BASES = {"object", "Protocol", "Generic", "ABC"}


class ClassInfo:
    def __init__(self, module: str, node: ast.ClassDef, path: pathlib.Path):
        self.module, self.node, self.path = module, node, path
        self.name = node.name
        self.bases = [_base_name(b) for b in node.bases]
        self.defined = _defined_names(node)
        self.reads = _self_reads(node)


def _base_name(node: ast.expr) -> str | None:
    """``Name`` / ``pkg.Name`` / ``Name[...]`` -> ``Name`` (None: a base this check cannot name)."""
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def _self_targets(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
        return [target.attr]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for elt in target.elts for n in _self_targets(elt)]
    if isinstance(target, ast.Starred):
        return _self_targets(target.value)
    return []


def _defined_names(cls: ast.ClassDef) -> set[str]:
    """What the class defines: its body's names and every ``self.<name>`` its own methods assign."""
    names: set[str] = set()
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(stmt.name)
        elif isinstance(stmt, ast.Assign):
            names.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            names.add(stmt.target.id)
        elif isinstance(stmt, ast.Assign) is False and isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            names.add(stmt.target.id)
    for node in _own_nodes(cls):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                names.update(_self_targets(t))
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            names.update(_self_targets(node.target))
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            names.update(_self_targets(node.target))
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    names.update(_self_targets(item.optional_vars))
        elif isinstance(node, ast.NamedExpr):
            names.update(_self_targets(node.target))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"
              and len(node.args) >= 2 and isinstance(node.args[0], ast.Name) and node.args[0].id == "self"
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            names.add(node.args[1].value)
    return names


def _own_nodes(cls: ast.ClassDef):
    """The nodes of the class's own methods (a nested class is a class of its own, checked on its own)."""
    todo = [stmt for stmt in cls.body if not isinstance(stmt, ast.ClassDef)]
    while todo:
        node = todo.pop()
        yield node
        todo.extend(child for child in ast.iter_child_nodes(node) if not isinstance(child, ast.ClassDef))


def _self_reads(cls: ast.ClassDef) -> dict[str, int]:
    """``self.<name>`` in the class's methods (``self`` being their first parameter) -> first line."""
    reads: dict[str, int] = {}
    for stmt in cls.body:
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) or not stmt.args.args:
            continue
        if stmt.args.args[0].arg != "self":
            continue
        for node in _own_nodes_of(stmt):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
                reads.setdefault(node.attr, node.lineno)
    return reads


def _own_nodes_of(fn: ast.AST):
    todo = [fn]
    while todo:
        node = todo.pop()
        yield node
        todo.extend(child for child in ast.iter_child_nodes(node) if not isinstance(child, ast.ClassDef))


def product_classes() -> list[ClassInfo]:
    out = []
    for mod, path in sorted(product_modules().items()):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                out.append(ClassInfo(mod, node, path))
    return out


def unhosted_reads(classes: list[ClassInfo]) -> list[str]:
    """``module.Class.name (file:line)`` for each ``self.<name>`` a class reads that neither it nor its
    product bases define; classes with a base this check cannot follow are left out."""
    by_name: dict[str, list[ClassInfo]] = {}
    for c in classes:
        by_name.setdefault(c.name, []).append(c)

    def closure(c: ClassInfo, seen: frozenset[str] = frozenset()) -> set[str] | None:
        """What ``c`` and its bases define (None: a base outside the product, or one named twice)."""
        names = set(c.defined)
        for base in c.bases:
            if base in NEUTRAL_BASES:
                continue
            found = by_name.get(base or "", [])
            if len(found) != 1 or base in seen:
                return None
            inherited = closure(found[0], seen | {c.name})
            if inherited is None:
                return None
            names |= inherited
        return names

    out = []
    for c in classes:
        if "Protocol" in c.bases:
            continue  # a protocol's members are declarations, not reads
        names = closure(c)
        if names is None:
            continue
        for name, line in sorted(c.reads.items()):
            if name not in names and not (name.startswith("__") and name.endswith("__")):
                out.append(f"{c.module}.{c.name}.{name} ({c.path.name}:{line})")
    return out


def test_the_check_finds_a_mixin_and_passes_a_part(tmp_path):
    """A mixin reading its host's attribute is found; the same code as a part handed what it uses is not."""
    mixin = ast.parse("class Admission:\n    def submit(self):\n        return self.unit(self.active)\n\n"
                      "class Service(Admission):\n    def __init__(self):\n        self.active = {}\n"
                      "    def unit(self, facts):\n        return facts\n")
    part = ast.parse("class Admission:\n    def __init__(self, *, work, active):\n        self.work = work\n"
                     "        self.active = active\n    def submit(self):\n        return self.work.unit(self.active)\n")
    path = tmp_path / "m.py"
    found = unhosted_reads([ClassInfo("m", n, path) for n in mixin.body])
    assert found == ["m.Admission.active (m.py:3)", "m.Admission.unit (m.py:3)"]
    assert unhosted_reads([ClassInfo("m", n, path) for n in part.body]) == []


def test_the_check_follows_product_bases_and_skips_foreign_ones(tmp_path):
    tree = ast.parse("class Base:\n    def __init__(self):\n        self.store = None\n\n"
                     "class Child(Base):\n    def read(self):\n        return self.store\n\n"
                     "class Handler(APIHandler):\n    def get(self):\n        return self.settings\n")
    assert unhosted_reads([ClassInfo("m", n, tmp_path / "m.py") for n in tree.body]) == []


def test_no_class_in_the_product_reads_what_it_does_not_define():
    classes = product_classes()
    assert any(c.name == "Admission" for c in classes) and any(c.name == "UnitOfWork" for c in classes)
    found = unhosted_reads(classes)
    assert not found, ("self.<name> read by a class that neither defines it nor inherits it from a base it "
                       "names (a mixin of a host it does not name; hand it what it uses instead):\n"
                       + "\n".join(found))
