"""docs/jupyterhub.md's install commands work as written, on a fresh checkout, with Debian's python3.

The commands are read from the doc itself (the fenced block after the ``install-commands`` marker), so
the doc and this test cannot drift apart; only ``/opt/hive`` is moved into a temporary directory. The
checkout holds what git tracks or would track, nothing it ignores (no .venv, no dist, no built
extension). To keep the test short it gets the JupyterLab extension this checkout already built
(``hive_lab/labextension``, which ``scripts/build-wheel.sh`` then reuses: pyproject's
``skip-if-exists``); ``HIVE_TEST_BUILD_LABEXTENSION=1`` builds it from scratch with Node instead
(minutes; needs Node >= 18 and the npm registry).
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "jupyterhub.md"
MARKER = "<!-- install-commands:"
DEBIAN_PYTHON = "/usr/bin/python3"


def install_commands(doc: str) -> list[str]:
    """The lines of the fenced block that follows the marker (comments and blank lines dropped)."""
    after = doc.split(MARKER, 1)
    assert len(after) == 2, f"{DOC.name} lost its {MARKER} ... --> marker before the install commands"
    block = re.search(r"```bash\n(.*?)```", after[1], re.S)
    assert block, f"no ```bash block after {MARKER} in {DOC.name}"
    lines = [line.split("  #")[0].rstrip() for line in block.group(1).splitlines()]
    return [line for line in lines if line.strip() and not line.lstrip().startswith("#")]


def fresh_checkout(dest: pathlib.Path) -> None:
    """The repository's files as a clone of this working tree would have them (none that git ignores)."""
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def clean_env(tmp: pathlib.Path) -> dict[str, str]:
    """A root shell's environment on a fresh Debian machine: no venv, no pyenv; pip's own config stays."""
    keep = {k: v for k, v in os.environ.items() if k.startswith(("PIP_", "LANG", "LC_", "HOME", "TMPDIR"))}
    for k in ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy", "NODE_EXTRA_CA_CERTS"):
        if k in os.environ:
            keep[k] = os.environ[k]
    return {**keep, "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "TMPDIR": str(tmp)}


def test_the_docs_commands_are_marked_and_install_the_built_wheel():
    lines = install_commands(DOC.read_text())
    text = "\n".join(lines)
    assert "./scripts/build-wheel.sh" in text and "/opt/hive/bin/pip install" in text, text
    # nothing installs a distribution no index has (the issue: pip install "hive-lab[hub]")
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "binder").iterdir())]:
        assert not re.search(r"pip\s+install\s+[\"']?hive-lab\b", doc.read_text()), \
            f"{doc.relative_to(REPO)} installs hive-lab from an index"


@pytest.mark.slow
@pytest.mark.timeout(1200)  # pip installs JupyterLab, JupyterHub and the rest into the new venv (minutes)
def test_docs_jupyterhub_install_commands_run_as_written_in_a_fresh_checkout(tmp_path):
    if not os.access(DEBIAN_PYTHON, os.X_OK):
        pytest.skip(f"{DEBIAN_PYTHON} (Debian's Python) is not here")
    checkout = tmp_path / "hive-lab"  # the doc runs from the directory holding the checkout `hive-lab`
    fresh_checkout(checkout)
    assert not (checkout / "hive_lab" / "labextension").exists() and not (checkout / ".venv").exists()
    built = REPO / "hive_lab" / "labextension"
    if os.environ.get("HIVE_TEST_BUILD_LABEXTENSION") != "1":
        if not (built / "static" / "style.js").is_file():
            pytest.skip("no built labextension to reuse (run ./scripts/setup.sh), and HIVE_TEST_BUILD_LABEXTENSION "
                        "is not 1")
        shutil.copytree(built, checkout / "hive_lab" / "labextension")
    venv = tmp_path / "opt-hive"
    script = "\n".join(line.replace("/opt/hive", str(venv)) for line in install_commands(DOC.read_text()))
    env = clean_env(tmp_path)
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", "command -v python3\n" + script], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=1100)
    assert run.returncode == 0, f"the doc's install commands failed:\n{script}\n--- output:\n{run.stdout[-4000:]}{run.stderr[-4000:]}"
    assert run.stdout.splitlines()[0] == DEBIAN_PYTHON, run.stdout  # Debian's python3 made the venv
    assert (venv / "bin" / "python").resolve() == pathlib.Path(DEBIAN_PYTHON).resolve()

    def bin_(name: str, *args: str) -> str:
        r = subprocess.run([str(venv / "bin" / name), *args], capture_output=True, text=True, env=env, cwd=tmp_path,
                           timeout=120)
        assert r.returncode == 0, (name, args, r.stdout, r.stderr)
        return re.sub(r"\x1b\[[0-9;]*m", "", r.stdout + r.stderr)  # (jupyter colours "enabled OK")

    assert "course" in bin_("hive-lab", "--help")
    assert re.search(r"hive-lab v?\S+ enabled\s+OK", bin_("jupyter", "labextension", "list")), \
        bin_("jupyter", "labextension", "list")
    assert re.search(r"hive_lab_server\s+enabled", bin_("jupyter", "server", "extension", "list")), \
        bin_("jupyter", "server", "extension", "list")
    assert "jupyterhub" in bin_("pip", "list").lower()  # the [hub] extra
    # a user's server imports no IRI parsers at its start (the doc uninstalls rfc3987-syntax)
    started = bin_("python", "-X", "importtime", "-c", "import jupyter_server.serverapp")
    assert "jsonschema._format" in started and "rfc3987_syntax.syntax_helpers" not in started
