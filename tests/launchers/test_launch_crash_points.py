"""A crash between any two steps of a local launch never runs a task unrecorded (issue 24): the launcher
records every task of a job before any of them may run (two-phase start: the wrapper waits for "go"),
so a restarted launcher knows every task whose command ran, and a task that was never recorded never
runs. A crash here is the server process dying: its end of each "go" pipe closes, which is what the
test does after raising at the chosen step."""

from __future__ import annotations

import os

import psutil
import pytest

from hive_lab_server.execution.launchers import local as local_mod
from hive_lab_server.execution.launchers.base import LaunchRequest, TaskLaunch
from hive_lab_server.execution.launchers.local import LocalLauncher
from waiting import wait_until_async

TASKS = 3
# the steps of one launch, in order: each task's record (os.replace), then each task's "go" (os.write)
STEPS = [f"record {i}" for i in range(TASKS)] + [f"go {i}" for i in range(TASKS)]


class Crash(BaseException):
    """The server died here."""


def _request(tmp_path, job_id):
    wd = tmp_path / job_id
    (wd / "logs").mkdir(parents=True)
    tasks = tuple(
        TaskLaunch(job_id=job_id, task=f"main-{i}", group="main", index=i, rank=i, node="node-0",
                   gpu_indices=(i,), gpu_uuids=None, command=f"touch {wd}/ran-{i}; sleep 60",
                   env={"HIVE_JOB_ID": job_id}, working_dir=str(wd), log_path=str(wd / "logs" / f"main-{i}.log"))
        for i in range(TASKS))
    return LaunchRequest(job_id=job_id, user="ann", kind="batch", tasks=tasks)


@pytest.mark.parametrize("crash_at", range(len(STEPS) + 1), ids=[*STEPS, "no crash"])
async def test_a_crash_at_any_step_of_a_launch_never_runs_an_unrecorded_task(tmp_path, monkeypatch, crash_at):
    state = tmp_path / "state"
    launcher = LocalLauncher(state)
    steps = {"n": 0}
    real_replace, real_write = os.replace, os.write

    def step(real, is_step):
        def wrapped(*args, **kwargs):
            if is_step(*args):
                if steps["n"] == crash_at:
                    raise Crash(STEPS[crash_at])
                steps["n"] += 1
            return real(*args, **kwargs)
        return wrapped

    monkeypatch.setattr(local_mod.os, "replace", step(real_replace, lambda src, dst, *_: str(dst).endswith(".json")))
    monkeypatch.setattr(local_mod.os, "write", step(real_write, lambda fd, data, *_: bytes(data) == b"go\n"))
    request = _request(tmp_path, "j-crash")
    procs = []
    real_popen = local_mod.subprocess.Popen
    monkeypatch.setattr(local_mod.subprocess, "Popen", lambda *a, **k: procs.append(real_popen(*a, **k)) or procs[-1])
    try:
        await launcher.start(request)
        crashed = False
    except Crash:
        crashed = True
    monkeypatch.undo()
    assert crashed == (crash_at < len(STEPS))
    wrappers = [p for p in procs if p.args[:2] == ["/bin/sh", "-c"]]
    assert len(wrappers) == (crash_at + 1 if crash_at < TASKS else TASKS)

    # what runs after the crash: tasks that got "go" run on; the others' wrappers leave without running
    got_go = max(0, crash_at - TASKS) if crashed else TASKS
    wd = tmp_path / "j-crash"
    await wait_until_async(lambda: all((wd / f"ran-{i}").exists() for i in range(got_go)), "the tasks given 'go' to run")
    for i, w in enumerate(wrappers):
        if i >= got_go:
            await wait_until_async(lambda w=w: w.poll() is not None, "a wrapper without 'go' to leave")  # at once
    assert sorted(p.name for p in wd.glob("ran-*")) == [f"ran-{i}" for i in range(got_go)]

    restarted = LocalLauncher(state)  # the server's next start
    running = (await restarted.running()).get("j-crash", set())
    assert running == {f"main-{i}" for i in range(got_go)}  # every task that ran is known
    await restarted.adopt(request)
    await restarted.stop("j-crash", grace_s=1)
    for w in wrappers:
        w.wait(timeout=20)
    assert not [p for p in psutil.process_iter(["cmdline"]) if f"{wd}/ran-" in " ".join(p.info["cmdline"] or [])]
