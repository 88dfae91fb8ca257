"""Jobs run in the submitter's environment (issue 30): the client sends its PATH, venv and own variables
with the job; tokens, Jupyter's and hive-lab's variables stay behind; an image or an explicit opt-out
gets none of it. Against a real server."""

from __future__ import annotations

import os
import stat

from hive_lab.environment import submitter_environment, travels


def test_what_travels_and_what_stays():
    env = {"PATH": "/home/ann/.venv/bin:/usr/bin", "VIRTUAL_ENV": "/home/ann/.venv", "WANDB_MODE": "offline",
           "JUPYTERHUB_API_TOKEN": "t", "HIVE_LAB_TOKEN": "t", "JPY_SESSION_NAME": "x", "HIVE_JOB_ID": "j-1",
           "CUDA_VISIBLE_DEVICES": "0", "AWS_SECRET_ACCESS_KEY": "s", "MY_API_KEY": "k", "GITHUB_TOKEN": "g"}
    got = submitter_environment(env, python="/home/ann/.venv/bin/python")
    assert got == {"vars": {"PATH": "/home/ann/.venv/bin:/usr/bin", "VIRTUAL_ENV": "/home/ann/.venv",
                            "WANDB_MODE": "offline"}, "python": "/home/ann/.venv/bin/python"}
    assert not travels("JUPYTER_TOKEN") and travels("LD_LIBRARY_PATH")


def test_a_job_finds_the_tools_of_the_environment_it_was_submitted_from(ann, tmp_path, monkeypatch):
    tools = tmp_path / "myenv" / "bin"
    tools.mkdir(parents=True)
    (tools / "my-trainer").write_text('#!/bin/sh\necho "trainer from $VIRTUAL_ENV lr=$LR"\n')
    (tools / "my-trainer").chmod(0o755 | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    monkeypatch.setenv("VIRTUAL_ENV", str(tmp_path / "myenv"))
    monkeypatch.setenv("LR", "0.1")
    monkeypatch.setenv("SOME_API_TOKEN", "must-not-travel")
    job = ann.handle(ann.submit({"command": "my-trainer; echo token=${SOME_API_TOKEN:-none} hive=$HIVE_USER",
                                 "tasks": [{"gpus": 0}]}))
    job.wait(timeout=60)
    out = job.logs()
    assert job.state == "succeeded", out
    assert f"trainer from {tmp_path / 'myenv'} lr=0.1" in out and "token=none hive=ann" in out, out
    from hive_lab.format import environment_text

    details = ann.job(job.id)
    assert environment_text(details).startswith(f"runs with {details['spec']['environment']['python']} (the "
                                                f"submitter's environment")  # `hive-lab jobs JOB` shows it

    opted_out = ann.handle(ann.submit({"command": "my-trainer", "tasks": [{"gpus": 0}]}, inherit_env=False))
    opted_out.wait(timeout=60)
    assert opted_out.state == "failed"  # not on the server's PATH: the submitter's environment was not sent
