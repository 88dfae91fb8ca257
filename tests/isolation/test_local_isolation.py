"""The local launcher as root with isolation on, against real Unix accounts and real cgroups: tasks run
as their owner's account, one cgroup each (limits, devices, kill of every descendant), logs size-limited
and never opened through a link the job planted. Needs root (the fixtures skip otherwise)."""

from __future__ import annotations

import asyncio
import os
import re
import stat
import subprocess
import time

import psutil
import pytest


from fixtures.unix_accounts import ACCOUNTS
from hive_lab_server.execution.isolation import Isolation
from hive_lab_server.execution.isolation import cgroups
from hive_lab_server.execution.launchers.base import LaunchError, LaunchRequest, TaskLaunch
from hive_lab_server.execution.launchers.local import LocalLauncher
from hive_lab_server.execution.staging import private_dir
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


def _request(launcher, jobs_root, job_id, user, command, *, gpus=(), memory_mb=0, cpus=0.0, env=None):
    """What the service does before start(): the job's dirs, 0700 and owned by the task's account."""
    wd = jobs_root / job_id
    owner = launcher.task_owner(user)
    for d in (wd, wd / "logs", wd / "output"):
        private_dir(d, owner, stop_at=jobs_root)
    task = TaskLaunch(job_id=job_id, task="main-0", group="main", index=0, rank=0, node="node-0",
                      gpu_indices=tuple(gpus), gpu_uuids=None, command=command,
                      env={**(env or {}), "HIVE_JOB_ID": job_id, "HIVE_OUTPUT_DIR": str(wd / "output")},
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


def _host_pids(uid: int, *argv: str) -> list[int]:
    """Pids (as this host sees them) of ``uid``'s processes running exactly ``argv``: a task runs in its own
    PID namespace, so the pids it prints itself ($$, $!) mean nothing out here."""
    return [p.pid for p in psutil.process_iter(["uids", "cmdline"])
            if p.info["uids"] and p.info["uids"].real == uid and p.info["cmdline"] == list(argv)]


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
    uid = unix_accounts[A].pw_uid
    await launcher.start(_request(launcher, jobs_root, "j-d", A, 'setsid sleep 3011 & sleep 0.2; echo started; exit 0'))
    await wait_until_async(lambda: "started" in _log(jobs_root, "j-d") or _host_pids(uid, "sleep", "3011"))
    e = await _exit(launcher)
    assert e.exit_code == 0
    await wait_until_async(lambda: not _host_pids(uid, "sleep", "3011"), "the setsid daemon outlived its job")
    cg = launcher.cgroup("j-d", "main-0")
    assert not any(d.exists() for d in cg.dirs.values())  # the cgroup is removed


async def test_setsid_daemon_dies_when_the_job_is_cancelled(jobs_root, unix_accounts):
    launcher = _launcher(jobs_root)
    await launcher.start(_request(launcher, jobs_root, "j-c", A, 'setsid sleep 3012 & sleep 300'))
    await wait_until_async(lambda: _host_pids(unix_accounts[A].pw_uid, "sleep", "3012"))
    (pid,) = _host_pids(unix_accounts[A].pw_uid, "sleep", "3012")
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


async def test_a_planted_path_or_ld_preload_never_runs_as_root(jobs_root, shared_tmp, unix_accounts):
    """Issue 22's escape: the job's PATH names the student's own setpriv/mv/sh/python3 first and its
    LD_PRELOAD the student's library. The wrapper, task_exec, the cgroup set-up and the log copier run
    as root or another account: none of them may run either; the job itself (as the student) does."""
    from planted import plant

    planted = plant(shared_tmp / "planted")
    launcher = _launcher(jobs_root)
    dev = _fake_gpu_nodes(shared_tmp)
    launcher.isolation.gpu_device_glob = str(dev / "nvidia[0-9]*")
    await launcher.start(_request(launcher, jobs_root, "j-esc", A, "id -u; sh -c 'echo inner'; mv --version | head -1",
                                  gpus=(0,), memory_mb=256, env=planted.env))
    e = await _exit(launcher, job_id="j-esc")
    assert e.exit_code == 0, _log(jobs_root, "j-esc")
    assert planted.root_lines() == [], planted.lines()
    assert planted.ran_as(unix_accounts[A].pw_uid), planted.lines()  # the variables did reach the job


def _fake_gpu_nodes(shared_tmp, n=4):
    """No GPUs here: fake NVIDIA nodes (char 195:N and the control node 195:255, what the driver makes),
    world-openable as a careless install leaves them. Opening one whose permission checks pass answers
    "No such device" (no driver behind it); a refused one "Permission denied" / "Operation not permitted"."""
    dev = shared_tmp / "dev"
    dev.mkdir(mode=0o755)
    for i in range(n):
        os.mknod(dev / f"nvidia{i}", 0o666 | stat.S_IFCHR, os.makedev(195, i))
        os.chmod(dev / f"nvidia{i}", 0o666)
    os.mknod(dev / "nvidiactl", 0o666 | stat.S_IFCHR, os.makedev(195, 255))
    os.chmod(dev / "nvidiactl", 0o666)
    return dev


def _probe(dev, n=4) -> str:
    names = " ".join([f"nvidia{i}" for i in range(n)] + ["nvidiactl"])
    return f'for d in {names}; do head -c1 {dev}/$d 2>&1 | sed "s/^/$d: /"; done'


def _opened(output: str) -> dict[str, bool]:
    """device name -> whether open() got past the permission checks (to the absent driver)."""
    out = {}
    for line in output.splitlines():
        name, _, rest = line.partition(": ")
        if name.startswith("nvidia"):
            assert ("No such device" in rest) != ("Permission denied" in rest or "Operation not permitted" in rest), line
            out[name] = "No such device" in rest
    return out


async def test_gpus_open_only_inside_a_job_that_was_granted_them(jobs_root, shared_tmp, unix_accounts):
    """The GPU boundary: a user's own process (a Hub-spawned server, a terminal) opens no GPU node; a job
    granted GPU 1 opens GPU 1 and the control node, no other GPU; a job without GPUs opens none; after the
    job, the user is back to none. Works on cgroup v1 and v2 (the task's own nodes and the covers of the
    other GPUs live in its mount namespace; the v1 devices rule is a second layer)."""
    from fixtures.unix_accounts import run_as
    from hive_lab_server.execution.isolation import gpu_access

    dev = _fake_gpu_nodes(shared_tmp)
    student = unix_accounts[A]
    before = run_as(student, "/bin/sh", "-c", _probe(dev)).stdout
    assert all(_opened(before).values()), before  # world-openable: what the lock-down must fix
    report = gpu_access.lock_down([str(dev / "nvidia[0-9]*"), str(dev / "nvidiactl")])
    assert not report.problems and len(report.locked) == 5, report
    for node in dev.iterdir():  # no launcher here needs a group: nobody but root opens them
        st = node.stat()
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, 0o600), node

    own = run_as(student, "/bin/sh", "-c", _probe(dev)).stdout
    assert not any(_opened(own).values()), own

    launcher = _gpu_launcher(jobs_root, dev)
    await launcher.start(_request(launcher, jobs_root, "j-dev", A, _probe(dev), gpus=(1,)))
    assert (await _exit(launcher, job_id="j-dev")).exit_code == 0
    assert _opened(_log(jobs_root, "j-dev")) == {"nvidia0": False, "nvidia1": True, "nvidia2": False,
                                                 "nvidia3": False, "nvidiactl": True}, _log(jobs_root, "j-dev")

    await launcher.start(_request(launcher, jobs_root, "j-cpu", A, _probe(dev)))
    assert (await _exit(launcher, job_id="j-cpu")).exit_code == 0
    assert not any(_opened(_log(jobs_root, "j-cpu")).values()), _log(jobs_root, "j-cpu")

    after = run_as(student, "/bin/sh", "-c", _probe(dev)).stdout
    assert not any(_opened(after).values()), after


def _gpu_launcher(jobs_root, dev, **isolation) -> LocalLauncher:
    return _launcher(jobs_root, gpu_device_glob=str(dev / "nvidia[0-9]*"),
                     gpu_control_globs=[str(dev / "nvidiactl")], **isolation)


def _open_each(dev, n=4) -> str:
    """A Python one-liner: egid, then each node's open(O_RDWR) outcome (an errno name, ENXIO = the
    permission checks passed and only the missing driver answered)."""
    names = [f"nvidia{i}" for i in range(n)] + ["nvidiactl"]
    return ("import errno, os; print('egid', os.getegid())\n"
            f"for name in {names!r}:\n"
            f"    try: os.close(os.open({str(dev)!r} + '/' + name, os.O_RDWR)); print(name, 'OPENED')\n"
            "    except OSError as e: print(name, errno.errorcode[e.errno])\n")


def _outcomes(output: str) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in output.splitlines() if line.startswith("nvidia"))


async def test_a_setgid_copy_made_in_a_gpu_job_opens_no_gpu_outside_it(jobs_root, shared_tmp, unix_accounts):
    """The security reviewer's escape: inside a 1-GPU job the student makes a setgid copy of python3 for
    every group the job holds (the old code handed out the GPU nodes' group) in their home, which is not
    nosuid; afterwards, with no job, the copy must open no GPU node (EACCES, never ENXIO). Also: in the job,
    its own GPU and the control node open (ENXIO), the others do not, and a hard link of its node fails."""
    from fixtures.unix_accounts import run_as
    from hive_lab_server.execution.isolation import gpu_access

    dev = _fake_gpu_nodes(shared_tmp)
    gpu_access.lock_down([str(dev / "nvidia[0-9]*"), str(dev / "nvidiactl")])
    student = unix_accounts[A]
    home = f"{student.pw_dir}/hive-gpy"
    launcher = _gpu_launcher(jobs_root, dev)
    job = (f"rm -rf {home}; mkdir -p {home}; echo groups $(id -G); "
           f"for g in $(id -G); do cp /usr/bin/python3 {home}/gpy-$g && chgrp $g {home}/gpy-$g "
           f"&& chmod 2755 {home}/gpy-$g; done; ls -ln {home}; "
           f"ln {dev}/nvidia1 {home}/node-link 2>&1 && echo LINKED; "
           f"/usr/bin/python3 -c \"{_open_each(dev)}\"")
    try:
        await launcher.start(_request(launcher, jobs_root, "j-sgid", A, job, gpus=(1,)))
        assert (await _exit(launcher, job_id="j-sgid")).exit_code == 0, _log(jobs_root, "j-sgid")
        out = _log(jobs_root, "j-sgid")
        assert _outcomes(out) == {"nvidia0": "EACCES", "nvidia1": "ENXIO", "nvidia2": "EACCES",
                                  "nvidia3": "EACCES", "nvidiactl": "ENXIO"}, out
        assert "LINKED" not in out, out
        groups = out.split("groups ", 1)[1].splitlines()[0].split()
        copies = sorted(os.listdir(home))
        assert copies == sorted(f"gpy-{g}" for g in groups), (copies, out)
        for g in groups:
            copy = f"{home}/gpy-{g}"
            st = os.stat(copy)
            assert st.st_mode & stat.S_ISGID and st.st_gid == int(g), (copy, oct(st.st_mode), st.st_gid)
            r = run_as(student, copy, "-c", _open_each(dev))  # the student's own process, outside any job
            assert f"egid {g}" in r.stdout, (copy, r.stdout, r.stderr)  # the setgid bit did take effect
            assert set(_outcomes(r.stdout).values()) <= {"EACCES", "EPERM"}, (copy, r.stdout)
    finally:
        subprocess.run(["rm", "-rf", home], check=False)


async def test_a_gpu_job_without_namespaces_is_refused_never_given_a_group(jobs_root, shared_tmp, unix_accounts):
    """With c.Isolation.namespaces off a task cannot get its own device nodes: a GPU job is refused with a
    sentence naming the setting (the old way, the GPU group, is what a setgid copy carried out); a job
    without GPUs still runs."""
    dev = _fake_gpu_nodes(shared_tmp)
    launcher = _gpu_launcher(jobs_root, dev, namespaces=False)
    with pytest.raises(LaunchError, match=r"c\.Isolation\.namespaces = True"):
        await launcher.start(_request(launcher, jobs_root, "j-nons", A, "id -G", gpus=(0,)))
    await launcher.start(_request(launcher, jobs_root, "j-nons-cpu", A, "id -u"))
    assert (await _exit(launcher, job_id="j-nons-cpu")).exit_code == 0


async def test_a_task_sees_only_its_own_processes(jobs_root, unix_accounts):
    """No leaks between users: in its PID namespace a task lists its own processes, not the other
    student's command lines."""
    launcher = _launcher(jobs_root)
    await launcher.start(_request(launcher, jobs_root, "j-secret", A, "sleep 3013 # --api-key=secret-of-a"))
    await wait_until_async(lambda: _host_pids(unix_accounts[A].pw_uid, "sleep", "3013"))
    probe = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done; echo done"
    await launcher.start(_request(launcher, jobs_root, "j-look", B, probe))
    assert (await _exit(launcher, job_id="j-look")).exit_code == 0
    seen = _log(jobs_root, "j-look")
    assert "done" in seen and "sleep 3013" not in seen and "secret-of-a" not in seen, seen
    assert len([ln for ln in seen.splitlines() if ln.strip() and ln != "done"]) <= 4, seen  # init, sh, the probe
    await launcher.stop("j-secret", grace_s=1)
    await _exit(launcher, job_id="j-secret")


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


def _spare_copiers(besides: frozenset[int] = frozenset()) -> list[psutil.Process]:
    """This process's spare log copiers (execution/launchers/log_copiers.py) waiting for a task, but for the
    pids ``besides`` (the spares of other tests' launchers, still open)."""
    found = []
    for p in psutil.Process().children():
        try:
            if p.pid not in besides and "--receive" in p.cmdline():
                found.append(p)
        except psutil.Error:  # (gone, or a zombie: a copier that ended)
            pass
    return found


async def test_the_spare_log_copier_waits_as_nobody_and_copies_the_next_task(jobs_root, unix_accounts):
    """Issue 40: a task's copier is started ahead (one spawn per task on the start's path, not two). The spare
    has dropped to nobody before it is handed a task's output, so no root process ever reads that output; the
    next task's record names it, and it holds that task's log to the limit. Closing the launcher lets it go."""
    import json
    import pwd

    nobody = pwd.getpwnam("nobody")
    others = frozenset(p.pid for p in _spare_copiers())
    launcher = _launcher(jobs_root, max_log_bytes=1000)
    await launcher.start(_request(launcher, jobs_root, "j-first", A, "true"))
    assert (await _exit(launcher, job_id="j-first")).exit_code == 0
    await wait_until_async(lambda: len(_spare_copiers(others)) == 1, "a spare log copier after the first start")
    spare = _spare_copiers(others)[0]
    await wait_until_async(lambda: spare.uids().real == nobody.pw_uid, "the spare dropped its privileges")
    assert tuple(spare.uids()) == (nobody.pw_uid,) * 3 and tuple(spare.gids()) == (nobody.pw_gid,) * 3
    assert spare.environ() == {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
    await launcher.start(_request(launcher, jobs_root, "j-spare", A,
                                  "i=0; while [ $i -lt 200 ]; do echo 0123456789012345678901234567890123456789; i=$((i+1)); done"))
    record = json.loads((jobs_root / ".local-launcher" / "j-spare" / "main-0.json").read_text())
    assert record["copier"] == spare.pid
    assert (await _exit(launcher, job_id="j-spare")).exit_code == 0
    path = jobs_root / "j-spare" / "logs" / "main-0.log"
    await wait_until_async(lambda: "truncated" in path.read_text())
    assert path.read_text().startswith("0123456789") and 1000 < len(path.read_bytes()) < 1300
    await wait_until_async(lambda: len(_spare_copiers(others)) == 1, "the next spare")
    await launcher.close()
    assert _spare_copiers(others) == []


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
