"""``--time-limit`` and ``--dry-run`` on the user side: parsing, the CLI as subprocesses and the
``%%submit`` magic in a real IPython shell, both against a REAL server (tests/client/conftest.py)."""

import argparse
import json

import pytest

from hive_lab.cli.kernelspec import kernel_json
from hive_lab.durations import parse_duration
from hive_lab.errors import BadRequest
from hive_lab.format import time_limit_text, what_if_text
from hive_lab.submission import cell_spec

from test_live_cli import cli


@pytest.mark.parametrize("text, seconds", [("2h", 7200), ("90m", 5400), ("1h30m", 5400), ("45s", 45),
                                           ("3600", 3600), ("1d", 86400), ("0.5h", 1800), (" 2 h ", 7200),
                                           (600, 600), ("10min", 600), ("1h 30m", 5400)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "2x", "h", "-5", "0", "1h30", "30 90", "2hh", True])
def test_parse_duration_says_what_to_write(text):
    with pytest.raises(BadRequest) as err:
        parse_duration(text)
    assert err.value.field == "time_limit_s" and "--time-limit" in str(err.value)


def test_cell_spec_and_kernelspec_carry_the_limit():
    assert cell_spec("print(1)", time_limit="90m")["time_limit_s"] == 5400
    assert "time_limit_s" not in cell_spec("print(1)")
    args = argparse.Namespace(gpus=1, gpu_type=None, vc=None, image=None, idle_timeout=None, cpus=0, memory_mb=0,
                              display_name=None, time_limit="2h")
    config = kernel_json(args)["metadata"]["kernel_provisioner"]["config"]
    assert config["time_limit_s"] == 7200
    args.time_limit = None
    assert "time_limit_s" not in kernel_json(args)["metadata"]["kernel_provisioner"]["config"]


def test_texts():
    assert time_limit_text({"time_limit_s": 7200, "state": "queued"}) == "2h"
    assert time_limit_text({"time_limit_s": 7200, "state": "running", "time_left_s": 4500}) == "1 h 15 min left of 2h"
    assert time_limit_text({}) == "-"
    line = what_if_text({"outcome": "start", "gpus": 2, "vc": "default", "time_limit_s": 60,
                         "placement": [{"node": "n0", "gpus": [0, 1]}]})
    assert line == "what if (2 GPUs, VC default): would start now on n0 GPU 0,1 (time limit 1m); nothing was submitted"


def test_cli_time_limit_and_dry_run(hive_server):
    out = cli(hive_server, "submit", "--dry-run", "--gpus", "2", "--time-limit", "90m", "--", "sleep", "30")
    assert out.stdout.startswith("what if (2 GPUs, VC default): would start now on node-0 GPU"), out.stdout
    assert "(time limit 1h30m); nothing was submitted" in out.stdout
    assert json.loads(cli(hive_server, "jobs", "--json", "--state", "queued,running").stdout)["count"] == 0
    job = json.loads(cli(hive_server, "submit", "--json", "--gpus", "2", "--time-limit", "90m", "--",
                         "sleep", "30").stdout)
    assert job["time_limit_s"] == 5400
    spill = None
    try:
        # VC default's 2 GPUs are taken: with overflow on (the default) a job would run in VC other's idle
        # GPUs, preemptible; once those are taken too it would wait
        answer = json.loads(cli(hive_server, "submit", "--dry-run", "--json", "--gpus", "1", "-c", "true").stdout)
        assert answer["outcome"] == "start" and answer["opportunistic"], answer
        assert "(overflow); preemptible" in answer["reason"], answer
        spill = json.loads(cli(hive_server, "submit", "--json", "--gpus", "2", "--", "sleep", "30").stdout)
        answer = json.loads(cli(hive_server, "submit", "--dry-run", "--json", "--gpus", "1", "-c", "true").stdout)
        assert answer["outcome"] == "wait" and "VC default is using" in answer["reason"], answer
        table = cli(hive_server, "jobs").stdout
        assert "limit" in table and "1h30m" in table.replace(" left of ", "")
        shown = cli(hive_server, "jobs", job["id"]).stdout
        assert "time limit:" in shown and "1h30m" in shown
    finally:
        cli(hive_server, "cancel", job["id"])
        if spill:
            cli(hive_server, "cancel", spill["id"])
    out = cli(hive_server, "submit", "--time-limit", "soon", "-c", "true", check=False)
    assert out.returncode == 1 and "--time-limit: write a duration like 2h" in out.stderr


def test_magic_dry_run_and_time_limit(shell, capsys):  # noqa: F811
    assert shell.run_cell_magic("submit", "--gpus 1 --dry-run --time-limit 2h", "print('x')") is None
    out = capsys.readouterr().out
    assert out.startswith("what if (1 GPU, VC default): would start now on node-0 GPU") and "time limit 2h" in out
    job = shell.run_cell_magic("submit", "--gpus 1 --time-limit 1s", "import time; time.sleep(60)")
    final = job.wait(timeout=60)
    assert final.state == "failed" and final.reason == "time limit 1s reached"


def test_magic_dry_run_compares_gpu_counts_side_by_side(shell, capsys):  # noqa: F811
    assert shell.run_cell_magic("submit", "--gpus 1 --dry-run --compare 2 4", "print('x')") is None
    out = capsys.readouterr().out
    assert "what if (nothing was submitted)" in out and "1 GPUs" in out and "2 GPUs" in out and "4 GPUs" in out
    outcome = next(line for line in out.splitlines() if line.strip().startswith("outcome"))
    # VC default guarantees 2 of the 4 GPUs: 1 and 2 GPUs start now, 4 never fit its guarantee
    assert outcome.split()[1:] == ["starts", "now", "starts", "now", "never", "fits"], out
    assert Client_jobs_empty(shell)


def Client_jobs_empty(shell):  # noqa: N802
    client = shell.magics_manager.registry["HiveLabMagics"].client
    return client.jobs(user="me", state="submitted,queued,scheduled,running") == []


def test_a_kernel_job_carries_a_limit_only_when_its_kernelspec_asks():
    from hive_lab_server.kernels.job import kernel_job_body

    kw = dict(name="kernel: x", argv=["python"], connection_text="{}", url=None, token=None, gpus=1, gpu_type=None,
              vc=None, image=None, cpus=0, memory_mb=0, env={})
    assert kernel_job_body(**kw, time_limit_s=7200)["time_limit_s"] == 7200
    assert "time_limit_s" not in kernel_job_body(**kw)
