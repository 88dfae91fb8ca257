"""tests/server mirrors the packages of hive_lab_server (issue 39): a test of ``jobs/lifecycle/`` sits in
tests/server/jobs/lifecycle/, so the tests of a package are found where the package is.

Read from the file tree and the test files' syntax only (pathlib, ast): nothing here imports the product.
Also checked, because pytest imports these files by their base name (its default "prepend" import mode,
no ``__init__.py`` in the test directories): no two test modules share a name, and a test module imports
another test module or helper only from a directory that is surely on ``sys.path`` when it runs: its own,
or one that a conftest puts there (tests/, tests/server/). A directory that pytest happened to import
earlier in the same run does not count.
"""

from __future__ import annotations

import ast
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
SERVER_TESTS = TESTS / "server"
PRODUCT = REPO / "server_ext" / "hive_lab_server"

# test files that stay at tests/server/ top level, each with why it belongs to no one package
TOP_LEVEL = {
    "test_demo.py": "`hive-lab demo` end to end: JupyterLab, the service and its sample jobs",
    "test_course_service.py": "the course `course init` writes, run by a real server end to end: VC limits,"
                              " cgroups, kernel caps, students' own Unix accounts",
    "test_rough_edges.py": "issue 15's messages across the server: the cluster file at start, the launcher"
                           " choice, the spec's defaults, admission",
    "test_moved_paths.py": "hive_lab_server/moved.py, a top-level module of no package",
    "test_full_collections.py": "hive_lab_server/full_collections.py, a top-level module of no package",
}
# a directory of this name holds test data (no Python), wherever it is
DATA_DIR = "data"
# directories a conftest puts on sys.path (tests/conftest.py, tests/server/conftest.py)
ON_SYS_PATH = (TESTS, SERVER_TESTS)


def _packages(root: pathlib.Path) -> set[pathlib.PurePosixPath]:
    """The product's packages and sub-packages, relative to hive_lab_server/."""
    return {pathlib.PurePosixPath(p.parent.relative_to(root).as_posix())
            for p in root.rglob("__init__.py") if p.parent != root and "__pycache__" not in p.parts}


def _test_dirs(root: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in root.rglob("*") if p.is_dir() and "__pycache__" not in p.parts
                  and DATA_DIR not in p.relative_to(root).parts)


def test_each_directory_under_tests_server_is_a_package_of_hive_lab_server():
    packages = _packages(PRODUCT)
    assert packages, f"no packages found under {PRODUCT}"
    strays = [d.relative_to(SERVER_TESTS).as_posix() for d in _test_dirs(SERVER_TESTS)
              if pathlib.PurePosixPath(d.relative_to(SERVER_TESTS).as_posix()) not in packages]
    assert not strays, (
        "directories under tests/server/ are named after hive_lab_server's packages (sub-directories after"
        f" sub-packages; test data in a directory named {DATA_DIR!r}); these are not:\n  " + "\n  ".join(strays)
        + "\npackages: " + ", ".join(sorted(map(str, packages))))


def test_no_test_file_at_tests_server_top_level_but_the_end_to_end_ones():
    top = sorted(p.name for p in SERVER_TESTS.glob("test_*.py"))
    extra = [name for name in top if name not in TOP_LEVEL]
    assert not extra, ("move these into tests/server/<package>/ after the hive_lab_server package each mainly"
                       " tests, or say in TOP_LEVEL why one walks the whole server: " + ", ".join(extra))
    gone = sorted(set(TOP_LEVEL) - set(top))
    assert not gone, f"TOP_LEVEL names files that are not at tests/server/ (drop them): {gone}"


def test_data_directories_hold_no_python():
    hidden = [p.relative_to(TESTS).as_posix() for p in TESTS.rglob("*.py")
              if DATA_DIR in p.relative_to(TESTS).parts[:-1] and "node_modules" not in p.parts]
    assert not hidden, f"a {DATA_DIR!r} directory holds test data, not code: {hidden}"


def _modules() -> list[pathlib.Path]:
    """The test directories' Python files that pytest imports by base name (not in a package)."""
    return sorted(p for p in TESTS.rglob("*.py") if p.name != "conftest.py" and "__pycache__" not in p.parts
                  and not (p.parent / "__init__.py").exists()
                  and DATA_DIR not in p.relative_to(TESTS).parts[:-1] and "node_modules" not in p.parts)


def test_no_two_test_modules_share_a_name():
    seen: dict[str, list[str]] = {}
    for path in _modules():
        seen.setdefault(path.stem, []).append(path.relative_to(TESTS).as_posix())
    clashes = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not clashes, f"pytest imports these by base name, so one hides the other (rename one): {clashes}"


def _imports(path: pathlib.Path) -> tuple[set[str], set[str]]:
    """The top-level names ``path`` imports, and the string constants in its own ``sys.path.insert(...)``
    or ``sys.path.append(...)`` calls (a test may put a directory there itself, by name)."""
    names, on_path = set(), set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("insert", "append") and ast.unparse(node.func.value) == "sys.path"):
            on_path.update(c.value for arg in node.args for c in ast.walk(arg)
                           if isinstance(c, ast.Constant) and isinstance(c.value, str))
    return names, on_path


def test_a_test_imports_other_test_modules_only_from_where_they_surely_are():
    local = {p.stem: p for p in _modules()}
    wrong = []
    for path in _modules():
        search = (path.parent, *ON_SYS_PATH)
        names, on_path = _imports(path)
        for name in sorted(names & local.keys()):
            if local[name].parent.name in on_path:  # it puts that directory on sys.path itself
                continue
            if not any((d / f"{name}.py").exists() for d in search):
                wrong.append(f"{path.relative_to(TESTS)} imports {name} "
                             f"({local[name].relative_to(TESTS)}): found only if that directory was imported first")
    assert not wrong, ("move the shared part into a helper module beside the importing test or at tests/server/"
                       " (on sys.path through its conftest):\n  " + "\n  ".join(wrong))
