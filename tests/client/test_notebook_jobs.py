"""Notebook jobs with parameters (issue 27): a notebook staged and executed by papermill in the job,
its parameters injected after the cell tagged ``parameters``, its executed copy an output of the job.
Against a real server, from the Python client, the CLI and REST."""

from __future__ import annotations

import json
import subprocess

import nbformat
import pytest

from test_live_cli import HIVE_LAB, cli


def write_notebook(path, kernel="hive-gpu-1"):
    """A notebook as a user saves it: a parameters cell, a cell that uses them and writes a result.
    Saved with a GPU kernel: in its job it must run on the job's own Python, not start another kernel."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": kernel, "display_name": "GPU (1)", "language": "python"}
    params = nbformat.v4.new_code_cell('lr = 1.0\nmodel = "small"')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("# training"), params, nbformat.v4.new_code_cell(
        "import json, os\n"
        "result = {'lr': lr, 'model': model, 'job': os.environ['HIVE_JOB_ID']}\n"
        "open(os.path.join(os.environ['HIVE_OUTPUT_DIR'], 'result.json'), 'w').write(json.dumps(result))\n"
        "print('trained with', lr, model)")]
    nbformat.write(nb, path)
    return path


def test_a_notebook_runs_with_its_parameters_and_keeps_the_executed_copy(ann, tmp_path):
    notebook = write_notebook(tmp_path / "train.ipynb")
    job = ann.handle(ann.submit_notebook(str(notebook), {"lr": 0.25, "model": "resnet"}))
    assert ann.job(job.id)["name"] == "train"
    job.wait(timeout=120)
    assert job.state == "succeeded", ann.log_text(job.id)
    outputs = {o["path"] for o in ann.outputs(job.id)}
    assert outputs == {"train.executed.ipynb", "result.json"}
    assert json.loads(ann.output(job.id, "result.json")) == {"lr": 0.25, "model": "resnet", "job": job.id}
    executed = nbformat.reads(ann.output(job.id, "train.executed.ipynb").decode(), as_version=4)
    tags = [c.metadata.get("tags", []) for c in executed.cells]
    assert tags.index(["injected-parameters"]) == tags.index(["parameters"]) + 1  # papermill's convention
    assert "trained with 0.25 resnet" in "".join(o.get("text", "") for o in executed.cells[-1].outputs)
    spec = ann.job(job.id)["spec"]
    assert spec["notebook"] == {"file": "train.ipynb", "parameters": {"lr": 0.25, "model": "resnet"}}
    assert "papermill" in spec["command"]  # what ran is in the job's details


def test_the_cli_submits_a_notebook_with_parameters(hive_server, tmp_path):
    notebook = write_notebook(tmp_path / "sweep-me.ipynb", kernel="python3")
    out = cli(hive_server, "submit", "--notebook", str(notebook), "-p", "lr=0.5", "-p", "model=big",
              "--wait", "--json")
    job = json.loads(out.stdout)
    assert job["state"] == "succeeded" and job["name"] == "sweep-me"
    result = cli(hive_server, "outputs", job["id"], "--json").stdout
    assert "sweep-me.executed.ipynb" in result

    out = cli(hive_server, "submit", "--notebook", str(notebook), "--sweep", "lr=0.5,0.25", "--json")
    assert json.loads(out.stdout)["count"] == 2  # a sweep over the notebook: one job per value

    out = cli(hive_server, "submit", "-p", "lr=1", "--", "true", check=False)
    assert out.returncode == 1 and "add --notebook" in out.stderr and "Traceback" not in out.stderr
    out = cli(hive_server, "submit", "--notebook", str(tmp_path / "missing.ipynb"), check=False)
    assert out.returncode == 1 and "cannot read the notebook" in out.stderr


@pytest.mark.parametrize("body, field, words", [
    ({"notebook": {"file": "other.ipynb"}}, "notebook.file", "not among the job's files"),
    ({"notebook": {"file": "nb.ipynb", "parameters": {"1st": 1}}}, "notebook.parameters", "Python variable name"),
    ({"notebook": {"file": "nb.ipynb"}, "command": "echo hi"}, "command", "drop command"),
    ({"notebook": {"file": "notes.txt"}, "files": {"notes.txt": "x"}}, "notebook.file", "not a notebook"),
])
def test_bad_notebook_jobs_get_a_400_that_says_what_to_fix(hive_server, body, field, words):
    body = {"files": {"nb.ipynb": nbformat.writes(nbformat.v4.new_notebook())}, "tasks": [{"gpus": 0, "cpus": 1}],
            **body}
    r = hive_server.request("POST", "jobs", user="ann", json=body)
    assert r.status_code == 400, r.text
    error = r.json()
    assert error.get("field") == field and words in error["error"], error


def test_parameters_given_on_a_command_line_are_json_or_strings():
    from hive_lab.submission import parse_parameters

    assert parse_parameters(["lr=0.1", "name=resnet", "layers=[1, 2]", "on=true", "empty="]) == {
        "lr": 0.1, "name": "resnet", "layers": [1, 2], "on": True, "empty": ""}
    from hive_lab.errors import BadRequest

    with pytest.raises(BadRequest, match="NAME=VALUE"):
        parse_parameters(["lr"])
    assert subprocess.run([HIVE_LAB, "submit", "--help"], capture_output=True, text=True).stdout.count("--notebook")


def test_the_line_magic_runs_a_notebook_with_parameters(ann_env, tmp_path, monkeypatch, capsys):
    from IPython.core.getipython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    monkeypatch.chdir(tmp_path)
    write_notebook(tmp_path / "nb.ipynb")
    ip = start_ipython() or get_ipython()
    ip.run_line_magic("load_ext", "hive_lab")
    ip.magics_manager.registry["HiveLabMagics"].client = None
    job = ip.run_line_magic("submit", "--notebook nb.ipynb -p lr=0.125 model=tiny --wait")
    assert job.status == "succeeded", job.logs()
    assert json.loads(job.read_output("result.json"))["lr"] == 0.125
    assert json.loads(job.read_output("result.json"))["model"] == "tiny"
    # a cell of code with --notebook is refused (the notebook runs, not the cell), with one sentence
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="leave the cell empty"):
        ip.run_cell_magic("submit", "--notebook nb.ipynb", "print('x')")


def test_a_sweep_over_a_notebook_leaves_one_executed_notebook_per_parameter_set(ann, tmp_path):
    """Issue 27: each element's own parameters (HIVE_PARAMS_FILE) go on top of the notebook's."""
    from hive_lab.arrays import JobArray
    from hive_lab.submission import notebook_job_spec

    notebook = write_notebook(tmp_path / "train.ipynb")
    spec = notebook_job_spec(notebook, {"model": "base"})
    array = JobArray(ann, ann.submit_array(spec, sweep={"lr": [0.5, 0.25]}))
    array.wait(timeout=240)
    elements = ann.array(array.id)["elements"]
    assert sorted(e["state"] for e in elements) == ["succeeded", "succeeded"], elements
    seen = {}
    for e in elements:
        outputs = {o["path"] for o in ann.outputs(e["job_id"])}
        assert "train.executed.ipynb" in outputs
        result = json.loads(ann.output(e["job_id"], "result.json"))
        seen[result["lr"]] = result["model"]
    assert seen == {0.5: "base", 0.25: "base"}
