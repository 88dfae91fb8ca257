"""`hive-lab submit FILE` and `%%submit --file FILE` take another platform's job file by its path and
run it as it is, against a REAL server (local launcher): an sbatch script runs with its SLURM_*
variables and hive-lab's srun."""

import json

import pytest
from IPython.core.error import UsageError

from fixtures.job_files import K8S_JOB, PAI_V2
from test_live_cli import cli

SCRIPT = """#!/bin/bash
#SBATCH --job-name=two-steps
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH --gres=gpu:1
#SBATCH --time=00:05:00

echo "nodes=$SLURM_JOB_NUM_NODES node=$SLURM_NODEID name=$SLURM_JOB_NAME list=$SLURM_JOB_NODELIST"
srun bash -c 'echo "rank $SLURM_PROCID local $SLURM_LOCALID of $SLURM_NTASKS"' | sort
"""


def test_cli_runs_an_sbatch_script_with_slurm_variables(hive_server, tmp_path):
    path = tmp_path / "train.sbatch"
    path.write_text(SCRIPT)
    answer = json.loads(cli(hive_server, "submit", str(path), "--dry-run", "--json").stdout)
    assert answer["outcome"] == "start" and [len(p["gpus"]) for p in answer["placement"]] == [1]
    job = json.loads(cli(hive_server, "submit", str(path), "--wait", "--json").stdout)
    assert job["state"] == "succeeded", job
    assert job["name"] == "two-steps" and job["spec"]["source"]["format"] == "sbatch"
    log = cli(hive_server, "logs", job["id"]).stdout
    assert "nodes=1 node=0 name=two-steps list=127.0.0.1" in log, log
    assert "rank 0 local 0 of 2\nrank 1 local 1 of 2\n" in log, log


def test_cli_refuses_flags_on_a_foreign_file(hive_server, tmp_path):
    path = tmp_path / "train.sbatch"
    path.write_text(SCRIPT)
    out = cli(hive_server, "submit", str(path), "--gpus", "2", check=False)
    assert out.returncode == 1 and "--gpus does not apply" in out.stderr


def test_cli_bad_directive_is_the_servers_400(hive_server, tmp_path):
    path = tmp_path / "bad.sbatch"
    path.write_text("#!/bin/bash\n#SBATCH --array=3-1\necho x\n")  # a range backwards
    out = cli(hive_server, "submit", str(path), check=False)
    assert out.returncode == 1 and "#SBATCH --array" in out.stderr and "Traceback" not in out.stderr


def test_magic_submit_file_takes_a_path(ann_env, tmp_path, monkeypatch, capsys):
    from IPython.core.getipython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    monkeypatch.chdir(tmp_path)
    ip = start_ipython() or get_ipython()
    ip.run_line_magic("load_ext", "hive_lab")
    ip.magics_manager.registry["HiveLabMagics"].client = None
    (tmp_path / "train.sbatch").write_text(SCRIPT)
    ip.run_line_magic("submit", "--file train.sbatch --dry-run")
    assert "start" in capsys.readouterr().out
    job = ip.run_cell_magic("submit", "--file train.sbatch --wait", "# train.sbatch, sent as it is\n")
    assert job.state == "succeeded"
    assert "rank 1 local 1 of 2" in job.logs()
    with pytest.raises(UsageError, match="leave the cell empty"):
        ip.run_cell_magic("submit", "--file train.sbatch", "print('a cell too')")


# Issue 40, 6: job files that name an image, on a personal install (local launcher, no containers)



@pytest.mark.parametrize("name, text, image_field", [
    ("hello.pai.yaml", PAI_V2, "taskRoles.*.dockerImage"),
    ("hello-job.yaml", K8S_JOB, "spec.template.spec.containers[0].image"),
])
def test_a_job_file_with_an_image_runs_with_no_image(hive_server, tmp_path, name, text, image_field):
    path = tmp_path / name
    path.write_text(text)
    refused = cli(hive_server, "submit", str(path), check=False)  # the first refusal names the way out
    assert refused.returncode == 1 and "submit with --no-image" in refused.stderr, refused.stderr
    assert "python:3.12-slim" in refused.stderr
    flag = cli(hive_server, "submit", str(path), "--image", "", check=False)  # was "edit the file instead"
    assert flag.returncode == 1 and "add --no-image" in flag.stderr, flag.stderr
    job = json.loads(cli(hive_server, "submit", str(path), "--no-image", "--wait", "--json").stdout)
    assert job["state"] == "succeeded", job
    assert job["spec"].get("image") is None
    note = f"{image_field}: 'python:3.12-slim' not applied (--no-image): the commands run as processes on this server"
    assert note in job["spec"]["source"]["not_applied"], job["spec"]["source"]
    shown = cli(hive_server, "jobs", job["id"]).stdout
    assert f"not applied: {note}" in " ".join(shown.split()), shown  # `hive-lab jobs J` says so (rich may wrap)
    tasks = {"worker-0": "worker 0 of 2", "worker-1": "worker 1 of 2"} if "pai" in name else {"pod-0": "k8s says hello"}
    for task, line in tasks.items():
        log = cli(hive_server, "logs", job["id"], "--task", task).stdout
        assert line in log, (task, log)


def _role_without_gang(instances: int, commands: list[str], completion: str = "") -> str:
    """OpenPAI's CPU_500Task_MNIST example (examples/CPU_500Task) in small: one role, gangAllocation false."""
    lines = "\n".join(f"      - {json.dumps(c)}" for c in commands)
    return f"""protocolVersion: 2
name: many-tasks
type: job
jobRetryCount: 0
prerequisites:
  - {{type: dockerimage, uri: 'openpai/standard:python_3.6-pytorch_1.4.0-cpu', name: docker_image_0}}
taskRoles:
  taskrole:
    instances: {instances}
    completion: {{{completion}}}
    taskRetryCount: 0
    dockerImage: docker_image_0
    resourcePerInstance: {{gpu: 1, cpu: 1, memoryMB: 256}}
    commands:
{lines}
extras:
  gangAllocation: false
"""


def _elements(srv, array_id):
    from hive_lab import Client

    return {j["array_index"]: j for j in Client(srv.url, srv.tokens["ann"]).jobs(user="me", limit=None)
            if j.get("array_id") == array_id}


def test_a_role_without_gang_runs_its_tasks_as_they_fit(hive_server, tmp_path):
    """Issue 40, 6: 6 tasks of 1 GPU in ann's 2-GPU VC were refused as a gang that can never fit; OpenPAI
    runs them as resources allow. Each gets its own index and the role's instance count."""
    path = tmp_path / "many.yaml"
    path.write_text(_role_without_gang(6, ['echo "task $PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX of '
                                           '$PAI_TASK_ROLE_TASK_COUNT_taskrole"']))
    dry = cli(hive_server, "submit", str(path), "--no-image", "--dry-run", check=False)
    assert dry.returncode == 1 and "this openpai-v2 file runs as a job array" in dry.stderr, dry.stderr
    out = cli(hive_server, "submit", str(path), "--no-image", "--wait", "--json")
    array = json.loads(out.stdout)
    counts = {k: v for k, v in array["counts"].items() if v}
    assert array["id"].startswith("a-") and array["count"] == 6 and counts == {"succeeded": 6}, array
    elements = _elements(hive_server, array["id"])
    assert sorted(elements) == list(range(6))
    for index, job in elements.items():
        assert job["spec"]["tasks"][0]["count"] == 1 and job["spec"]["tasks"][0]["gpus"] == 1
        log = cli(hive_server, "logs", job["id"]).stdout
        assert f"task {index} of 6" in log, (index, log)


def test_a_role_without_gang_ends_at_its_min_failed_instances(hive_server, tmp_path):
    """minFailedInstances: 2 -> once two tasks failed, the job failed and its other tasks are cancelled
    (running ones stopped, waiting ones never started), as OpenPAI ends the job."""
    gate = tmp_path / "never-opened"
    path = tmp_path / "fails.yaml"
    path.write_text(_role_without_gang(6, [
        'if [ "$PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX" -lt 2 ]; then exit 1; fi',
        f"while [ ! -e {gate} ]; do sleep 0.05; done"], "minFailedInstances: 2"))
    array = json.loads(cli(hive_server, "submit", str(path), "--no-image", "--json").stdout)
    from waiting import wait_until

    def ended():
        elements = _elements(hive_server, array["id"])
        states = {i: j["state"] for i, j in elements.items()}
        pending = 6 - len(elements)
        done = all(s in ("failed", "cancelled", "succeeded") for s in states.values())
        return (states, pending) if done and (len(elements) == 6 or "failed" in states.values()) else None

    states, _ = wait_until(ended, "the array ended at its minFailedInstances", timeout=60)
    assert [states.get(0), states.get(1)] == ["failed", "failed"], states
    assert all(states[i] == "cancelled" for i in states if i >= 2), states
    shown = json.loads(cli(hive_server, "jobs", array["id"], "--json").stdout)
    assert shown["counts"].get("succeeded", 0) == 0 and shown["counts"]["failed"] == 2, shown
    gate.touch()
