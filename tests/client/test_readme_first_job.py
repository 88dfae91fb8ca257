"""The README's "Your first job" section, run as written (issue 30): its notebook cells in a real IPython
shell and every `hive-lab ...` command it names, against a real server. When the README changes, this
test runs the new text; a command it cannot run (it names a file the README does not give) fails here
until a fixture file is added below."""

from __future__ import annotations

import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

from fixtures.readme import FILES, inline_commands, python_blocks, section

HIVE_LAB = str(pathlib.Path(sys.executable).parent / "hive-lab")


def test_the_section_still_has_what_this_test_runs():
    text = section("Your first job")
    assert len(python_blocks(text)) >= 2 and len(inline_commands(text)) >= 4


@pytest.fixture
def user_dir(ann_env, tmp_path, monkeypatch):
    for name, content in FILES.items():
        (tmp_path / name).write_text(content)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jupyter-data"))
    return tmp_path


def test_the_notebook_cells_run_in_the_kernels_environment(user_dir, ann):
    from IPython.core.getipython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    from hive_lab.job import Job

    ip = start_ipython() or get_ipython()
    ip.magics_manager.registry.get("HiveLabMagics") and setattr(ip.magics_manager.registry["HiveLabMagics"],
                                                               "client", None)
    results = []
    for cell in python_blocks(section("Your first job")):
        first, _, body = cell.partition("\n")
        if first.startswith("%%"):
            name, _, line = first[2:].partition(" ")
            results.append(ip.run_cell_magic(name, line, body))
        else:
            outcome = ip.run_cell(cell)
            assert outcome.success, outcome.error_in_exec
            results.append(outcome.result)
    for line in re.findall(r"`(%submit [^`]+)`", section("Your first job")):  # line magics in the text
        name, _, rest = line[1:].partition(" ")
        results.append(ip.run_line_magic(name, rest))
    from hive_lab.arrays import JobArray

    for array in [r for r in results if isinstance(r, JobArray)]:  # a sweep cell: every run ends well
        rows = array.wait(timeout=240).results(as_frame=False)
        assert rows and all(r["state"] == "succeeded" for r in rows), rows
        assert all(isinstance(r["loss"], float) for r in rows), rows
        losses = [r["loss"] for r in rows]
        assert losses == sorted(losses), losses  # best first
    jobs = [r for r in results if isinstance(r, Job)]
    by_name = {j.info["name"]: j for j in jobs}
    for j in jobs:  # every job the section makes ends well (a pipeline's second step after its first)
        j.wait(timeout=240)
        assert j.status == "succeeded", (j.info["name"], j.logs())
    assert "from a job file" in by_name["from-yaml"].logs()
    if "evaluate" in by_name:
        assert by_name["evaluate"].info["started_at"] >= by_name["train"].info["finished_at"]
    job = by_name["hello"]
    job.wait(timeout=120)
    assert job.status == "succeeded", job.logs()
    # the README says: the job runs in your environment, with the kernel's Python
    assert f"python: {sys.executable}" in job.logs() and "my GPU:" in job.logs()


def test_every_command_the_section_names_works(user_dir, ann_env):
    env = {**os.environ, "HIVE_LAB_URL": ann_env.url, "HIVE_LAB_TOKEN": ann_env.tokens["ann"],
           "PATH": f"{pathlib.Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    last_job = None
    ran = []
    for command in inline_commands(section("Your first job")):
        argv = shlex.split(command)
        if "JOB" in argv:
            assert last_job, f"{command}: no job submitted before it in the README"
            argv = [last_job if a == "JOB" else a for a in argv]
        out = subprocess.run([HIVE_LAB, *argv[1:]], capture_output=True, text=True, timeout=180, env=env)
        assert out.returncode == 0, (command, out.stdout, out.stderr)
        found = re.search(r"\bj-\d+", out.stdout)
        if argv[1] == "submit" and found:
            last_job = found.group(0)
        if argv[1] == "logs":
            assert "training on" in out.stdout, (command, out.stdout)  # the log of `submit ... python train.py`
        ran.append(command)
    assert any(c.startswith("hive-lab submit") for c in ran) and any(c.startswith("hive-lab logs") for c in ran)
    kernels = user_dir / "jupyter-data" / "kernels"
    assert (kernels / "gpu-1" / "kernel.json").exists()  # `hive-lab kernelspec install --user --name gpu-1 ...`
