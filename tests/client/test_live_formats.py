"""`hive-lab submit FILE` and `%%submit --file FILE` take another platform's job file by its path and
run it as it is, against a REAL server (local launcher): an sbatch script runs with its SLURM_*
variables and hive-lab's srun."""

import json

import pytest
from IPython.core.error import UsageError

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
