"""No part of the product reads another object's private names (issue 39), as no two modules import each
other in a cycle (``test_import_graph.py``): a part that needs another's data asks for it by a public name.

A private name is ``_name`` (not a dunder). It counts wherever an object other than ``self``/``cls``/``super()``
is asked for one: ``x._name`` (read, written or deleted; ``x`` any expression, a module included) and the
dodge ``getattr(x, "_name")`` (``setattr``/``hasattr``/``delattr`` too). Read from the source with ``ast``, so
nothing is imported to check it.

``ALLOWED`` lists the few reads a library forces on us, each with the reason: nothing public says the same.
"""

from __future__ import annotations

import ast
import pathlib

from test_import_graph import PACKAGES, REPO

# (file relative to the repository, private name) -> why no public name will do
ALLOWED = {
    ("server_ext/hive_lab_server/execution/isolation/task_exec.py", "_exit"):
        "os._exit is the standard library's documented exit for a forked child (no atexit handlers, no flushing "
        "of the parent's buffers)",
    ("hive_lab/widgets/base.py", "_repr_mimebundle_"):
        "IPython's display protocol (the _repr_*_ hooks): how one object shows an ipywidget's bundle as its own",
    ("hive_lab/widgets/replay.py", "_repr_mimebundle_"):
        "IPython's display protocol (the _repr_*_ hooks): how one object shows an ipywidget's bundle as its own",
    ("server_ext/hive_lab_server/api/handlers/base.py", "_jupyter_current_user"):
        "jupyter_server marks with it that prepare() looked for the caller (None: found none); its public "
        "current_user cannot tell that from 'not looked yet' (it raises before prepare)",
    ("server_ext/hive_lab_server/kernels/provisioner.py", "_stopping"):
        "jupyter_server's ServerApp says only through it that it is shutting down (its kernels with it)",
    ("server_ext/hive_lab_server/kernels/provisioner.py", "_close_control_socket"):
        "jupyter_client has no public call that closes a kernel manager's control socket so that it "
        "reconnects to a kernel's new address",
    ("server_ext/hive_lab_server/execution/isolation/task_exec.py", "_SimpleCData"):
        "the C module _ctypes's base of a C type: binding libc through it (not the ctypes package, whose import "
        "costs a task ~20 ms of start time) needs a C int restype, which only a subclass of it is",
    ("scheduler/hive_scheduler/hetero/policies/lp.py", "_Highs"):
        "HiGHS's own solver class in scipy's compiled highspy module (loaded by its file, without scipy.optimize's "
        "0.45 s import): its public wrapper lives in the separate highspy package, which scipy does not ship",
    ("server_ext/hive_lab_server/api/reads_first.py", "_ready"):
        "asyncio's selector loop keeps its ready callbacks in this deque, and no public call puts one anywhere but "
        "at its end (call_soon appends); reads_first replaces it with a deque that puts reading connections' "
        "callbacks first, and leaves any other loop (without this deque) as it is",
    ("server_ext/hive_lab_server/api/reads_first.py", "_context"):
        "asyncio's Handle keeps the contextvars context its callback runs in only here (a public `context` "
        "attribute came in Python 3.12 as get_context()); reads_first reads whether it is a reading connection's",
    ("server_ext/hive_lab_server/stop_signals.py", "_signal_stop"):
        "jupyter_server's own clean-stop handler, installed for SIGINT when no one is at a terminal",
}

OWN = {"self", "cls"}
BY_NAME = {"getattr", "setattr", "hasattr", "delattr"}


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def own(node: ast.expr) -> bool:
    """``self``, ``cls`` or ``super()``: the object's own names."""
    if isinstance(node, ast.Name):
        return node.id in OWN
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def private_reads(source: str, filename: str = "<source>") -> list[tuple[int, str, str]]:
    """(line, private name, the expression) for each read of another object's private name in ``source``."""
    out = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Attribute) and private(node.attr) and not own(node.value):
            out.append((node.lineno, node.attr, ast.unparse(node)))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in BY_NAME
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
              and isinstance(node.args[1].value, str) and private(node.args[1].value) and not own(node.args[0])):
            out.append((node.lineno, node.args[1].value, ast.unparse(node)))
    return out


def product_reads() -> dict[tuple[str, str], list[str]]:
    """(file, name) -> 'file:line: expression' for every private read in the product packages."""
    found: dict[tuple[str, str], list[str]] = {}
    for root in PACKAGES.values():
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            for line, name, expr in private_reads(path.read_text(), str(path)):
                found.setdefault((rel, name), []).append(f"{rel}:{line}: {expr}")
    return found


def test_the_reader_sees_every_form_and_spares_the_objects_own():
    src = """
import os
class A:
    def f(self, other, cls):
        self._mine = other._theirs          # read
        other._set = 1                      # write
        del other.deep._gone                # delete, through an attribute
        x = type(self)._klass               # another object (the class, asked from outside)
        y = getattr(other, "_dodge", None)  # by name
        hasattr(other, "_probe")
        super()._parent()
        cls._factory()
        os._exit(0)
        return self._own, other.__dict__, other.public, getattr(self, "_lazy", None)
"""
    names = [name for _, name, _ in private_reads(src)]
    assert names == ["_theirs", "_set", "_gone", "_klass", "_dodge", "_probe", "_exit"]


def test_no_product_code_reads_another_objects_private_names():
    found = product_reads()
    bad = [where for key, wheres in sorted(found.items()) if key not in ALLOWED for where in wheres]
    assert not bad, ("reads of another object's private names (use or add a public name; a library's own "
                     "protected API goes in ALLOWED with the reason):\n" + "\n".join(bad))


def test_every_allowed_read_is_still_there():
    """An entry whose read is gone goes too: the list stays the short list of what libraries force."""
    found = product_reads()
    assert [key for key in ALLOWED if key not in found] == []
