"""The magics in a real IPython shell against a REAL Jupyter server with the extension."""

import re
import time

import pytest
from IPython.core.error import UsageError

from hive_lab.job import Job

CELL = (
    "import os, pathlib\n"
    "print('rows:', len(open('data.csv').read().splitlines()))\n"
    "pathlib.Path(os.environ['HIVE_OUTPUT_DIR'], 'model.txt').write_text('trained')\n"
    "print('done')\n"
)



def test_submit_cell_runs_and_files_come_back(shell, tmp_path, capsys):
    (tmp_path / "data.csv").write_text("a\nb\nc\n")
    job = shell.run_cell_magic("submit", "--wait --files data.csv --name cell-test", CELL)
    assert isinstance(job, Job)
    assert job.status == "succeeded" and job.exit_code == 0
    out = capsys.readouterr().out
    # the first status line: whichever active state the display saw first (a busy machine may show the job
    # only once it is placed, "scheduled for 1.8 s", as the first parallel run did)
    assert re.search(r"j-\d+ cell-test: (submitted|queued|scheduled|running)", out)
    assert re.search(r"succeeded \(exit code 0\) after [\d.]+ s", out)              # the last one
    assert "rows: 3\ndone\n" in out                                                   # the job's output
    assert len(re.findall(r"cell-test: succeeded", out)) == 1
    assert "rows: 3" in job.logs() and "done" in job.logs()
    assert [f["path"] for f in job.outputs()] == ["model.txt"]
    assert job.read_output("model.txt") == b"trained"
    assert job.info["vc"] == "default" and job.info["user"] == "ann"


def test_follow_prints_the_log(shell, capsys):
    job = shell.run_cell_magic("submit", "--follow", "for i in range(3):\n    print('step', i)\n")
    assert job.state == "succeeded"
    out = capsys.readouterr().out
    assert "step 0\nstep 1\nstep 2\n" in out


def test_queued_reason_and_cancel(shell, capsys):
    # VC default guarantees 2 of the 4 GPUs; with overflow on (the default) a second job runs in VC
    # other's idle GPUs, preemptible, and only a third one queues
    blocker = shell.run_cell_magic("submit", "--gpus 2 --name blocker", "import time; time.sleep(60)")
    spill = shell.run_cell_magic("submit", "--gpus 2 --name spill", "import time; time.sleep(60)")
    assert "(overflow); preemptible" in capsys.readouterr().out
    waiting = shell.run_cell_magic("submit", "--gpus 2 --name waiter", "print('never')")
    deadline = time.monotonic() + 15
    while {blocker.status, spill.status} != {"running"} and time.monotonic() < deadline:
        time.sleep(0.1)
    assert blocker.state == "running" and spill.state == "running"
    assert waiting.status == "queued" and waiting.reason
    waiting.cancel()
    assert waiting.wait(timeout=15).state == "cancelled"
    shell.run_line_magic("hive_cancel", blocker.id)
    out = capsys.readouterr().out
    assert f"{blocker.id} blocker: cancelled" in out or blocker.status == "cancelled"
    assert blocker.wait(timeout=15).state == "cancelled"
    spill.cancel()
    assert spill.wait(timeout=15).state == "cancelled"


def test_hive_jobs_lists_mine(shell, capsys):
    job = shell.run_cell_magic("submit", "--wait --name listed", "print(1)")
    capsys.readouterr()
    shell.run_line_magic("hive_jobs", "")
    out = capsys.readouterr().out
    assert job.id in out and "listed" in out


def test_vc_not_mine_is_a_clear_error(shell):
    with pytest.raises(UsageError) as err:
        shell.run_cell_magic("submit", "--vc other", "print(1)")
    assert "other" in str(err.value) and str(err.value).startswith("hive-lab:")


def test_unreachable_server_is_a_clear_error(shell, monkeypatch):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HIVE_LAB_URL", f"http://127.0.0.1:{port}/")
    shell.magics_manager.registry["HiveLabMagics"].client = None
    with pytest.raises(UsageError) as err:
        shell.run_cell_magic("submit", "", "print(1)")
    assert f"Cannot reach the hive-lab server at http://127.0.0.1:{port}/" in str(err.value)
    assert "HIVE_LAB_URL" in str(err.value)
