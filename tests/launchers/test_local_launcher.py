"""The local launcher with real subprocesses: env, logs, exit codes, SIGTERM/SIGKILL, and finding its
tasks again from a fresh launcher instance (what a restarted server does)."""

from __future__ import annotations

import dataclasses

import psutil
import pytest

from hive_lab_server.execution.launchers import make_launcher
from hive_lab_server.execution.launchers.base import LaunchRequest, TaskLaunch
from hive_lab_server.execution.launchers.local import LocalLauncher
from waiting import wait_until_async


def _request(tmp_path, job_id, commands, env=None):
    wd = tmp_path / job_id
    wd.mkdir(exist_ok=True)
    tasks = tuple(
        TaskLaunch(job_id=job_id, task=f"main-{i}", group="main", index=i, rank=i, node="node-0",
                   gpu_indices=(i,), gpu_uuids=None, command=cmd,
                   env={"HIVE_JOB_ID": job_id, "HIVE_TASK_NAME": f"main-{i}", **(env or {})},
                   working_dir=str(wd), log_path=str(wd / "logs" / f"main-{i}.log"))
        for i, cmd in enumerate(commands)
    )
    return LaunchRequest(job_id=job_id, user="ann", kind="batch", tasks=tasks)


async def _wait_exits(launcher, n):
    """The exits ``launcher.poll()`` reports, collected until there are ``n``."""
    out = []

    async def enough():
        out.extend(await launcher.poll())
        return len(out) >= n

    await wait_until_async(enough, f"{n} task exits")
    return out


def _ended(pid: int) -> bool:
    """The process is gone or a zombie (this test process is its parent and has not reaped it)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_make_launcher_resolves_builtin_and_import_path(tmp_path):
    assert isinstance(make_launcher("local", state_dir=str(tmp_path), parent=None), LocalLauncher)
    assert isinstance(make_launcher("hive_lab_server.execution.launchers.local:LocalLauncher", state_dir=str(tmp_path)), LocalLauncher)
    with pytest.raises(ValueError, match="cannot import"):
        make_launcher("no_such_module_xyz", state_dir=str(tmp_path))


async def test_env_cwd_logs_and_exit_codes(tmp_path):
    launcher = LocalLauncher(tmp_path / "state")
    req = _request(tmp_path, "j1", ['echo "$HIVE_JOB_ID $HIVE_TASK_NAME $EXTRA $(pwd)"; echo err >&2', "exit 3"],
                   env={"EXTRA": "x1"})
    await launcher.start(req)
    exits = sorted(await _wait_exits(launcher, 2), key=lambda e: e.task)
    assert [(e.task, e.exit_code) for e in exits] == [("main-0", 0), ("main-1", 3)]
    log = (tmp_path / "j1" / "logs" / "main-0.log").read_text()
    assert f"j1 main-0 x1 {tmp_path / 'j1'}" in log and "err" in log
    assert await launcher.poll() == []  # each exit reported once
    assert await launcher.running() == {}


async def test_secrets_are_not_inherited(tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_TOKEN", "s3cret")
    launcher = LocalLauncher(tmp_path / "state")
    await launcher.start(_request(tmp_path, "j1", ['echo "token=[$JUPYTER_TOKEN]"']))
    await _wait_exits(launcher, 1)
    assert "token=[]" in (tmp_path / "j1" / "logs" / "main-0.log").read_text()


async def test_stop_sends_sigterm_then_sigkill(tmp_path):
    launcher = LocalLauncher(tmp_path / "state")
    polite = "trap 'echo got-term; exit 0' TERM; echo ready; while true; do sleep 0.05; done"
    stubborn = "trap 'echo ignoring-term' TERM; echo ready; while true; do sleep 0.05; done"
    await launcher.start(_request(tmp_path, "p", [polite]))
    await launcher.start(_request(tmp_path, "s", [stubborn]))
    for job in ("p", "s"):  # the traps are set
        log = tmp_path / job / "logs" / "main-0.log"
        await wait_until_async(lambda: log.exists() and "ready" in log.read_text(), f"{job}'s trap")
    await launcher.stop("p", grace_s=5)
    await launcher.stop("s", grace_s=0.5)
    exits = {e.job_id: e for e in await _wait_exits(launcher, 2)}
    assert exits["p"].exit_code == 0  # it left on SIGTERM, no SIGKILL after the grace
    assert exits["s"].exit_code == 137  # SIGKILL once the grace ran out
    assert "got-term" in (tmp_path / "p" / "logs" / "main-0.log").read_text()
    assert "ignoring-term" in (tmp_path / "s" / "logs" / "main-0.log").read_text()


async def test_tasks_outlive_the_launcher_and_are_found_again(tmp_path):
    state = tmp_path / "state"
    first = LocalLauncher(state)
    go = tmp_path / "go"
    await first.start(_request(tmp_path, "j1", [f"while [ ! -e {go} ]; do sleep 0.05; done; exit 7"]))
    await first.start(_request(tmp_path, "j2", ["exit 5"]))
    j2 = first._tasks["j2"]["main-0"].pid
    await wait_until_async(lambda: _ended(j2), "j2 to end")
    del first  # the "server" is gone; its children keep running in their own sessions

    second = LocalLauncher(state)
    assert await second.running() == {"j1": {"main-0"}}
    await second.adopt(_request(tmp_path, "j1", ["unused"]))
    # j2 ended while nobody watched: its exit code comes from the exit file
    exits = await second.poll()
    assert [(e.job_id, e.exit_code) for e in exits] == [("j2", 5)]
    go.touch()
    exits = await _wait_exits(second, 1)
    assert [(e.job_id, e.task, e.exit_code) for e in exits] == [("j1", "main-0", 7)]


async def test_adopted_task_can_be_stopped(tmp_path):
    state = tmp_path / "state"
    first = LocalLauncher(state)
    await first.start(_request(tmp_path, "j1", ["sleep 30"]))
    pid = next(iter(first._tasks["j1"].values())).pid
    second = LocalLauncher(state)
    await second.adopt(_request(tmp_path, "j1", ["unused"]))
    await second.stop("j1", grace_s=2)
    first._tasks["j1"]["main-0"].proc.wait(5)  # reap (the test process is its parent)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


async def test_unknown_task_is_reported_lost(tmp_path):
    launcher = LocalLauncher(tmp_path / "state")
    await launcher.adopt(_request(tmp_path, "ghost", ["unused"]))
    exits = await launcher.poll()
    assert [(e.job_id, e.exit_code, e.reason) for e in exits] == [("ghost", None, "lost")]


async def test_bad_working_dir_is_a_launch_error(tmp_path):
    from hive_lab_server.execution.launchers.base import LaunchError

    launcher = LocalLauncher(tmp_path / "state")
    req = _request(tmp_path, "j1", ["true"])
    req = dataclasses.replace(req, tasks=(dataclasses.replace(req.tasks[0], working_dir=str(tmp_path / "nowhere")),))
    with pytest.raises(LaunchError, match="cannot start task main-0"):
        await launcher.start(req)
    assert await launcher.running() == {}


async def test_task_pids_name_each_task_process_and_its_job(tmp_path):
    """What the hardware monitor maps a GPU's processes to jobs by (``Launcher.task_pids``): the real
    processes it started, also once a restarted launcher adopted them, and none once they ended."""
    state = tmp_path / "state"
    first = LocalLauncher(state)
    await first.start(_request(tmp_path, "j1", ["sleep 30", "sleep 30"]))
    pids = first.task_pids()
    assert sorted(pids.values()) == ["j1", "j1"]
    for pid in pids:  # each a live process of this job's task (its own session: the task's command runs in it)
        assert psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    assert first.task_containers() == {}
    second = LocalLauncher(state)
    assert second.task_pids() == {}  # nothing tracked before it adopts
    await second.adopt(_request(tmp_path, "j1", ["unused", "unused"]))
    assert second.task_pids() == pids
    await second.stop("j1", grace_s=2)
    for t in first._tasks["j1"].values():
        t.proc.wait(5)  # reap (the test process is its parent)
    await _wait_exits(second, 2)
    assert second.task_pids() == {}


async def test_poll_gives_the_loop_a_turn_after_each_jobs_exits(tmp_path):
    """Reaping an exit (its cgroup's leftovers) costs milliseconds: a poll that finds many jobs ended lets
    the loop run between jobs (reads are answered meanwhile), never between one job's tasks."""
    import asyncio

    launcher = LocalLauncher(tmp_path / "state")
    go = tmp_path / "go"
    wait_for_go = f"while [ ! -e {go} ]; do sleep 0.02; done"
    jobs = ("a", "b", "c")
    for job_id in jobs:
        await launcher.start(_request(tmp_path, job_id, [wait_for_go, wait_for_go]))
    pids = sorted(launcher.task_pids())
    assert len(pids) == 6
    go.touch()
    await wait_until_async(lambda: all(_ended(p) for p in pids), "every task ended (not yet reaped)")

    reaped_at_turns = []  # how many tasks were reaped each time the loop gave another coroutine a turn
    done = asyncio.Event()

    async def other_work():
        while not done.is_set():
            reaped_at_turns.append(sum(not psutil.pid_exists(p) for p in pids))
            await asyncio.sleep(0)

    watcher = asyncio.ensure_future(other_work())
    await asyncio.sleep(0)
    exits = await launcher.poll()
    done.set()
    await watcher
    assert sorted((e.job_id, e.exit_code) for e in exits) == sorted((j, 0) for j in jobs for _ in range(2))
    during = set(reaped_at_turns) - {0, 6}
    assert during, f"the loop had no turn while the exits were reaped: {reaped_at_turns}"
    assert during <= {2, 4}, f"a job's tasks were reaped apart: {reaped_at_turns}"


async def test_a_one_task_start_runs_on_the_loop_unless_the_loop_is_behind(tmp_path, monkeypatch):
    """Issue 40: a one-task job is started on the event loop (no thread hops: submit -> running) unless the
    loop runs behind (``loop_busy``: the server's loop lag, e.g. under a write flood); then, as a gang's, on a
    worker thread, so the loop does not wait for a run of children's execs."""
    import threading

    launcher = LocalLauncher(tmp_path / "state")
    busy = [False]
    launcher.loop_busy = lambda: busy[0]
    where: list[str] = []
    start_tasks = launcher._start_tasks
    monkeypatch.setattr(launcher, "_start_tasks",
                        lambda request: (where.append(threading.current_thread().name), start_tasks(request))[1])
    loop_thread = threading.current_thread().name
    await launcher.start(_request(tmp_path, "j1", ["true"]))  # the loop keeps up
    busy[0] = True
    await launcher.start(_request(tmp_path, "j2", ["true"]))  # the loop is behind
    busy[0] = False
    await launcher.start(_request(tmp_path, "j3", ["true"]))
    await launcher.start(_request(tmp_path, "j4", ["true", "true"]))  # a gang: always a thread
    assert [w == loop_thread for w in where] == [True, False, True, False], where
    await _wait_exits(launcher, 5)


def _held_back_removals(launcher, monkeypatch) -> None:
    """The launcher's worker for acknowledged records never runs by itself: the test runs it
    (``_forget_acknowledged``) when it wants the late removal to happen."""
    monkeypatch.setattr(launcher, "_forget_soon", lambda: None)


async def test_acknowledged_records_go_on_a_worker_and_are_no_records_meanwhile(tmp_path):
    launcher = LocalLauncher(tmp_path / "state")
    await launcher.start(_request(tmp_path, "j1", ["exit 3"]))
    exits = await _wait_exits(launcher, 1)
    info, exitf = launcher._paths("j1", "main-0")
    assert info.exists() and exitf.exists()
    launcher.ack(exits)
    assert [t.job_id for t in launcher._records()] == []  # acknowledged: not a record, removed or not
    await wait_until_async(lambda: not info.exists() and not exitf.exists() and not info.parent.exists(),
                           "the worker to remove j1's records")


async def test_a_retry_started_before_the_late_removal_keeps_its_own_records(tmp_path, monkeypatch):
    """Issue 40's ``ack`` off the loop: a task's next attempt may start before its last exit's records are
    removed; the start removes them itself, so the late removal finds nothing of the new attempt's to take
    (without the start's own removal, ``_forget_acknowledged(job_id)``, it removes the running retry's record
    and exit file)."""
    launcher = LocalLauncher(tmp_path / "state")
    _held_back_removals(launcher, monkeypatch)
    await launcher.start(_request(tmp_path, "j1", ["exit 3"]))
    launcher.ack(await _wait_exits(launcher, 1))
    go = tmp_path / "go"
    await launcher.start(_request(tmp_path, "j1", [f"while [ ! -e {go} ]; do sleep 0.05; done; exit 4"]))
    pid = launcher._tasks["j1"]["main-0"].pid
    launcher._forget_acknowledged()  # the late removal, had the worker run only now
    info, _ = launcher._paths("j1", "main-0")
    assert info.exists(), "the retry's record was removed by the first attempt's acknowledgement"
    assert [(t.job_id, t.pid) for t in launcher._records()] == [("j1", pid)]
    go.touch()
    exits = await _wait_exits(launcher, 1)
    assert [(e.job_id, e.exit_code) for e in exits] == [("j1", 4)]  # from the retry's own exit file


async def test_close_removes_the_acknowledged_records_left(tmp_path, monkeypatch):
    launcher = LocalLauncher(tmp_path / "state")
    _held_back_removals(launcher, monkeypatch)
    await launcher.start(_request(tmp_path, "j1", ["exit 0"]))
    launcher.ack(await _wait_exits(launcher, 1))
    info, exitf = launcher._paths("j1", "main-0")
    assert info.exists()
    await launcher.close()
    assert not info.exists() and not exitf.exists()
