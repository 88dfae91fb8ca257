"""The local launcher as root with isolation on, against real Unix accounts and real cgroups: tasks run
as their owner's account, one cgroup each (limits, devices, kill of every descendant), logs size-limited
and never opened through a link the job planted. Needs root (the fixtures skip otherwise)."""

from __future__ import annotations

import asyncio
import os
import re
import stat
import time

import psutil
import pytest

from fixtures.unix_accounts import ACCOUNTS
from hive_lab_server.isolation import Isolation
from hive_lab_server.isolation import cgroups
from hive_lab_server.launchers.base import LaunchError, LaunchRequest, TaskLaunch
from hive_lab_server.launchers.local import LocalLauncher
from hive_lab_server.staging import private_dir
from waiting import wait_until_async

A, B = ACCOUNTS


@pytest.fixture
def jobs_root(shared_tmp, unix_accounts):
    root = shared_tmp / "jobs"
    root.mkdir(mode=0o755)
    return root


def _launcher(jobs_root, **isolation) -> LocalLauncher:
    iso = Isolation(**{"run_as": "owner", "cgroups": "auto", **isolation})
    return LocalLauncher(jobs_root / ".local-launcher", isolation=iso, jobs_root=str(jobs_root))


def _request(launcher, jobs_root, job_id, user, command, *, gpus=(), memory_mb=0, cpus=0.0):
    """What the service does before start(): the job's dirs, 0700 and owned by the task's account."""
    wd = jobs_root / job_id
    owner = launcher.task_owner(user)
    for d in (wd, wd / "logs", wd / "output"):
        private_dir(d, owner, stop_at=jobs_root)
    task = TaskLaunch(job_id=job_id, task="main-0", group="main", index=0, rank=0, node="node-0",
                      gpu_indices=tuple(gpus), gpu_uuids=None, command=command,
                      env={"HIVE_JOB_ID": job_id, "HIVE_OUTPUT_DIR": str(wd / "output")},
                      working_dir=str(wd), log_path=str(wd / "logs" / "main-0.log"),
                      cpus=cpus, memory_mb=memory_mb, user=user)
    return LaunchRequest(job_id=job_id, user=user, kind="batch", tasks=(task,))


async def _exit(launcher, timeout=60, job_id=None):
    """The first exit ``launcher`` reports (of ``job_id`` when given: launchers over one jobs_root share
    their state dir, so a new one may first report an earlier launcher's task)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        exits = [e for e in await launcher.poll() if job_id is None or e.job_id == job_id]
        if exits:
            return exits[0]
        await asyncio.sleep(0.05)
    raise AssertionError("the task did not end")


def _log(jobs_root, job_id) -> str:
    return (jobs_root / job_id / "logs" / "main-0.log").read_text(errors="replace")


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def test_task_runs_as_its_owners_account(jobs_root, unix_accounts):
    launcher = _launcher(jobs_root)
    await launcher.start(_request(launcher, jobs_root, "j-id", A, 'id -u; id -g; echo "home=$HOME user=$USER"; touch "$HIVE_OUTPUT_DIR/made"'))
    e = await _exit(launcher)
    pw = unix_accounts[A]
    assert e.exit_code == 0, _log(jobs_root, "j-id")
    lines = _log(jobs_root, "j-id").split()
    assert lines[:2] == [str(pw.pw_uid), str(pw.pw_gid)]
    assert f"home={pw.pw_dir}" in lines and f"user={A}" in lines
    for p in (jobs_root / "j-id", jobs_root / "j-id" / "logs", jobs_root / "j-id" / "output"):
        st = p.stat()
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (pw.pw_uid, 0o700), p
    log_st = (jobs_root / "j-id" / "logs" / "main-0.log").stat()
    assert (log_st.st_uid, stat.S_IMODE(log_st.st_mode)) == (pw.pw_uid, 0o600)
    assert (jobs_root / "j-id" / "output" / "made").stat().st_uid == pw.pw_uid


async def test_no_account_or_root_gets_a_clear_error_never_a_root_process(jobs_root, unix_accounts):
    launcher = _launcher(jobs_root)
    with pytest.raises(LaunchError, match="no Unix account 'no-such-user-x'"):
        launcher.task_owner("no-such-user-x")
    with pytest.raises(LaunchError, match="never run as root"):
        await launcher.start(_request(_launcher(jobs_root, run_as="server"), jobs_root, "j-root", "root", "id -u"))
    assert await launcher.poll() == [] and await launcher.running() == {}
    mapped = _launcher(jobs_root, accounts={"ann": B})  # the admin's mapping: ann's jobs run as hive-stu-b
    await mapped.start(_request(mapped, jobs_root, "j-map", "ann", "id -un"))
    assert (await _exit(mapped)).exit_code == 0
    assert _log(jobs_root, "j-map").strip() == B
    allowed = _launcher(jobs_root, allow_root=True)  # only when the admin asks
    await allowed.start(_request(allowed, jobs_root, "j-root2", "root", "id -u"))
    assert (await _exit(allowed, job_id="j-root2")).exit_code == 0 and _log(jobs_root, "j-root2").strip() == "0"


async def test_one_student_cannot_read_or_signal_anothers_job(jobs_root, unix_accounts):
    launcher = _launcher(jobs_root)
    await launcher.start(_request(launcher, jobs_root, "j-a", A, 'echo secret-of-a > "$HIVE_OUTPUT_DIR/result"; sleep 300',
                                  ))
    await wait_until_async(lambda: (jobs_root / "j-a" / "output" / "result").exists())
    a_pids = [p.pid for p in psutil.Process(launcher._tasks["j-a"]["main-0"].pid).children(recursive=True)
              if p.uids().real == unix_accounts[A].pw_uid]
    assert a_pids
    a_dir = jobs_root / "j-a"
    probe = (f'cat {a_dir}/output/result; echo "rc_out=$?"; cat {a_dir}/logs/main-0.log; echo "rc_log=$?"; '
             f'ls {a_dir}; echo "rc_ls=$?"; kill -TERM {a_pids[0]}; echo "rc_kill=$?"; '
             f'cat /proc/{a_pids[0]}/environ; echo "rc_env=$?"')
    await launcher.start(_request(launcher, jobs_root, "j-b", B, probe))
    e = await _exit(launcher)
    log = _log(jobs_root, "j-b")
    assert e.job_id == "j-b" and e.exit_code == 0, log
    assert "secret-of-a" not in log and "HIVE_JOB_ID" not in log
    for check in ("rc_out", "rc_log", "rc_ls", "rc_kill", "rc_env"):
        assert re.search(rf"{check}=[1-9]", log), (check, log)
    assert all(psutil.pid_exists(p) and not _gone(p) for p in a_pids)  # A's task is untouched
    await launcher.stop("j-a", grace_s=1)
    await _exit(launcher)  # reaps its cgroup


async def test_setsid_daemon_dies_when_the_job_ends(jobs_root, unix_accounts):
    launcher = _launcher(jobs_root)
    await launcher.start(_request(launcher, jobs_root, "j-d", A, 'setsid sleep 300 & echo "daemon=$!"; exit 0'))
    e = await _exit(launcher)
    assert e.exit_code == 0
    pid = int(re.search(r"daemon=(\d+)", _log(jobs_root, "j-d")).group(1))
    await wait_until_async(lambda: _gone(pid), "the setsid daemon to die with its job")
    cg = launcher.cgroup("j-d", "main-0")
    assert not any(d.exists() for d in cg.dirs.values())  # the cgroup is removed


async def test_setsid_daemon_dies_when_the_job_is_cancelled(jobs_root, unix_accounts):
    launcher = _launcher(jobs_root)
    await launcher.start(_request(launcher, jobs_root, "j-c", A, 'setsid sleep 300 & echo "daemon=$!"; sleep 300'))
    await wait_until_async(lambda: "daemon=" in _log(jobs_root, "j-c"))
    pid = int(re.search(r"daemon=(\d+)", _log(jobs_root, "j-c")).group(1))
    assert psutil.Process(pid).uids().real == unix_accounts[A].pw_uid
    await launcher.stop("j-c", grace_s=0.5)
    await wait_until_async(lambda: _gone(pid), "the setsid daemon to die with the cancel")
    await _exit(launcher)


async def test_cpu_and_memory_requests_are_cgroup_limits(jobs_root, unix_accounts):
    launcher = _launcher(jobs_root)
    if launcher.cgroup_version == "off":
        pytest.skip("no writable cgroup hierarchy here")
    await launcher.start(_request(launcher, jobs_root, "j-lim", A, "sleep 300", memory_mb=64, cpus=0.5))
    cg = launcher.cgroup("j-lim", "main-0")
    await wait_until_async(lambda: len(cg.pids()) >= 2)
    if cg.version == "v1":
        assert int((cg.dirs["memory"] / "memory.limit_in_bytes").read_text()) == 64 * 2**20
        assert int((cg.dirs["cpu"] / "cpu.cfs_quota_us").read_text()) == 50000
    else:
        assert int((cg.dirs["unified"] / "memory.max").read_text()) == 64 * 2**20
        assert (cg.dirs["unified"] / "cpu.max").read_text().split() == ["50000", "100000"]
    await launcher.stop("j-lim", grace_s=0.5)
    await _exit(launcher)


async def test_a_task_over_its_memory_is_oom_killed_and_says_so(jobs_root, user_python):
    launcher = _launcher(jobs_root)
    if launcher.cgroup_version == "off":
        pytest.skip("no writable cgroup hierarchy here")
    await launcher.start(_request(launcher, jobs_root, "j-oom", A,
                                  f"{user_python} -c \"x = b'x' * (400 * 2**20); print('survived')\"", memory_mb=64))
    e = await _exit(launcher)
    assert e.exit_code == 137 and "OOMKilled" in e.reason, (e, _log(jobs_root, "j-oom"))
    assert "survived" not in _log(jobs_root, "j-oom")


async def test_other_gpus_device_nodes_are_denied(jobs_root, shared_tmp, unix_accounts):
    """No GPUs here: fake /dev/nvidiaN nodes (char 195:N, what the driver makes) stand in for them."""
    dev = shared_tmp / "dev"
    dev.mkdir(mode=0o755)
    for i in range(4):
        os.mknod(dev / f"nvidia{i}", 0o666 | stat.S_IFCHR, os.makedev(195, i))
        os.chmod(dev / f"nvidia{i}", 0o666)
    launcher = _launcher(jobs_root, gpu_device_glob=str(dev / "nvidia[0-9]*"))
    if launcher.cgroup_version != "v1" or "devices" not in launcher.cgroup("x", "y").dirs:
        pytest.skip("device rules need the cgroup v1 devices controller (v2 needs BPF)")
    probe = f'for i in 0 1 2 3; do head -c1 {dev}/nvidia$i 2>&1 | sed "s/^/gpu$i: /"; done'
    await launcher.start(_request(launcher, jobs_root, "j-dev", A, probe, gpus=(1,)))
    assert (await _exit(launcher)).exit_code == 0
    lines = {ln.split(":")[0]: ln for ln in _log(jobs_root, "j-dev").splitlines() if ln.startswith("gpu")}
    for i in (0, 2, 3):
        assert "Operation not permitted" in lines[f"gpu{i}"], lines
    # its own GPU passes the cgroup; the (absent) driver answers instead
    assert "Operation not permitted" not in lines["gpu1"] and "No such device" in lines["gpu1"], lines


async def test_log_size_limit_with_a_truncation_note(jobs_root, unix_accounts):
    launcher = _launcher(jobs_root, max_log_bytes=1000)
    await launcher.start(_request(launcher, jobs_root, "j-log", A,
                                  "i=0; while [ $i -lt 200 ]; do echo 0123456789012345678901234567890123456789; i=$((i+1)); done; echo done >&2"))
    assert (await _exit(launcher)).exit_code == 0
    path = jobs_root / "j-log" / "logs" / "main-0.log"
    await wait_until_async(lambda: "truncated" in path.read_text())  # the copier finishes after the task
    text = path.read_text()
    assert text.startswith("0123456789") and "log truncated at 1000 bytes" in text and "done" not in text
    assert 1000 < len(text.encode()) < 1300


async def test_a_planted_log_symlink_is_not_followed(jobs_root, shared_tmp, unix_accounts):
    victim = shared_tmp / "victim"
    victim.write_text("root's file\n")
    launcher = _launcher(jobs_root)
    req = _request(launcher, jobs_root, "j-sym", A, "echo appended")
    (jobs_root / "j-sym" / "logs" / "main-0.log").symlink_to(victim)  # what an earlier attempt could plant
    with pytest.raises(LaunchError, match="symbolic link"):
        await launcher.start(req)
    assert victim.read_text() == "root's file\n"
    assert await launcher.running() == {}


def test_cgroup_detection_prefers_v2_with_controllers_else_v1():
    found = cgroups.detect("auto")
    root = cgroups.v2_root()
    v2_ok = root is not None and set(cgroups.V2_NEEDED) <= set((root / "cgroup.controllers").read_text().split())
    if v2_ok:
        assert found == "v2"
    elif {"memory", "freezer"} & set(cgroups.v1_roots()):
        assert found == "v1"
    assert cgroups.detect("off") == "off"
