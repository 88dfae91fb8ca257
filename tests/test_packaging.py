"""The wheel's three import names and the console script are there."""

import subprocess
import sys


def test_import_names():
    import hive_lab
    import hive_lab_server
    import hive_scheduler

    assert hive_lab.__version__ == hive_lab_server.__version__


def test_console_script_version():
    out = subprocess.run(
        [sys.executable, "-m", "hive_lab.cli", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "0.1.0"


def test_core_imports_nothing_from_jupyter_tornado_docker():
    code = (
        "import sys, hive_scheduler, pkgutil, importlib\n"
        "for m in pkgutil.walk_packages(hive_scheduler.__path__, 'hive_scheduler.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in {'jupyter_server','tornado','docker','jupyter_client','ipykernel','IPython'})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_a_server_start_builds_no_iri_parsers():
    """``scripts/setup.sh`` leaves rfc3987-syntax out (a dependency's extra brings it): jsonschema imports it at every
    Jupyter server's start, and it builds ~35 parsers as it is imported, a third of the start's CPU."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import jupyter_server.serverapp"],
                         capture_output=True, text=True, check=True)
    assert "jsonschema._format" in out.stderr  # (the import that would bring it)
    assert "rfc3987_syntax.syntax_helpers" not in out.stderr, \
        "this environment imports rfc3987_syntax at each server start: run ./scripts/setup.sh (it uninstalls it)"
