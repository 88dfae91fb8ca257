"""The suite's test servers fork from a warm zygote (tests/server_zygote.py); these check that a forked server
is the server a fresh ``python -m jupyter_server`` would be, and that what cannot be forked is not."""

from __future__ import annotations

import ast
import os
import pathlib
import signal
import subprocess

import server_zygote
from fixtures.live_server import LiveServer, _zygote

REPO = pathlib.Path(__file__).resolve().parents[1]
PRODUCT = [REPO / "server_ext", REPO / "hive_lab", REPO / "scheduler"]


def _environment_reads_at_import(path: pathlib.Path) -> list[int]:
    """Lines that read ``os.environ``/``os.getenv`` outside any function (run when the module is imported)."""
    found: list[int] = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if not inside and isinstance(child, ast.Attribute) and child.attr in ("environ", "getenv"):
                found.append(child.lineno)
            walk(child, inside)

    walk(ast.parse(path.read_text()), False)
    return found


def test_the_product_reads_no_environment_when_imported():
    """A forked server shares the zygote's imports: a module that read a variable when imported would keep
    the zygote's value, not the one the test asked its server for."""
    reads = {str(p.relative_to(REPO)): lines for root in PRODUCT for p in sorted(root.rglob("*.py"))
             if (lines := _environment_reads_at_import(p))}
    assert reads == {}


def test_the_check_finds_a_read_at_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import os\nA = os.environ.get('A')\nclass C:\n    b = os.getenv('B')\n"
                      "def f():\n    return os.environ['C']\n")
    assert _environment_reads_at_import(module) == [2, 4]


def test_interpreter_start_variables_need_a_fresh_interpreter():
    base = {"PATH": "/usr/bin", "PYTHONUNBUFFERED": "1"}
    assert server_zygote.forkable({**base, "HIVE_X": "1", "JUPYTER_PATH": "/s"}, base)
    assert server_zygote.forkable({"PATH": "/usr/bin"}, base)  # unbuffered output is the zygote's own setting
    assert not server_zygote.forkable({**base, "PYTHONPATH": "/tests/server"}, base)
    assert not server_zygote.forkable({**base, "LD_PRELOAD": "/x.so"}, base)
    assert not server_zygote.forkable({"PATH": "/usr/bin"}, {**base, "PYTHONHASHSEED": "0"})


def test_a_forked_server_is_its_own_session_in_its_own_dirs_and_reports_how_it_ended(tmp_path):
    srv = LiveServer(tmp_path / "srv", users={"ann": {}}, vc_access={"ann": ["default"]})
    try:
        srv.start()
        assert isinstance(srv.proc, server_zygote.ForkedServer)
        assert os.getsid(srv.proc.pid) == srv.proc.pid  # a session of its own, as start_new_session gives
        assert os.readlink(f"/proc/{srv.proc.pid}/cwd") == str(srv.root_dir)
        assert srv.request("GET", "me", user="ann").json()["user"] == "ann"  # its own config dir's token map
        srv.kill()
        assert srv.proc.returncode == -signal.SIGKILL
        srv.start()
        srv.stop()
        assert srv.proc.returncode == 0
        assert "Jupyter Server" in srv.log()  # its output went to its own log
    finally:
        srv.close()


def test_a_server_that_needs_its_own_interpreter_gets_one(tmp_path):
    assert _zygote() is not None  # the suite's servers fork from a zygote...
    srv = LiveServer(tmp_path / "srv", env={"PYTHONPATH": str(tmp_path)})
    try:
        srv.start()
        assert isinstance(srv.proc, subprocess.Popen)  # ...but not this one
    finally:
        srv.close()
