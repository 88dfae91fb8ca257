"""No GPU descriptor outlives its task (isolation/gpu_holders.py): the GPU descriptor sweep, as root with
the real local launcher, real cgroups and the real account ``hive-stu-a``.

The gap it closes: while a GPU task runs, the student's own process (outside any job) opens the task's
node through ``/proc/<task pid>/root/...`` or is handed a descriptor by the task over a Unix socket, and
would keep the GPU after the task ended. Fake NVIDIA nodes of 195:N answer ENXIO and cannot be held, so
the fake GPU here is a node of the kernel's ``full`` device (char 1:7: it opens and stays open; nobody
holds it otherwise), GPU index 7 (a GPU's index is its node's minor number), and the fake ``nvidiactl``
one of ``random`` (1:8); a second fake GPU, index 5, is ``zero`` (1:5), whose private mapping keeps its
file. A sweep judges every process on the machine: two runs of this module at once kill each other's
holders of these device numbers (as two servers on one machine would). Needs root (the fixtures skip
otherwise)."""

from __future__ import annotations

import logging
import os
import signal
import stat
import subprocess
import sys
from dataclasses import replace

import psutil
import pytest

from fixtures.unix_accounts import ACCOUNTS
from hive_lab_server.execution.isolation import Isolation, cgroups, gpu_access
from hive_lab_server.execution.isolation.gpu_holders import GpuNode, Holding, TaskGrant, verdict
from hive_lab_server.execution.launchers.base import LaunchRequest, TaskLaunch
from hive_lab_server.execution.launchers.local import LocalLauncher
from hive_lab_server.execution.staging import private_dir
from waiting import wait_until, wait_until_async

# A sweep judges every process on the machine, so two of this module's tests at once (on two pytest-xdist
# workers) kill each other's holders and each misses its own log line: the module runs on one worker, one
# test after another (seen: two failures in a parallel run, each holder killed by the other worker's sweep).
pytestmark = pytest.mark.xdist_group("gpu-sweep")

A = ACCOUNTS[0]
GPU = 7  # the fake GPU's index: its node is char 1:7
MAPPABLE_GPU = 5  # a second fake GPU, char 1:5 (the kernel's "zero": a private mapping keeps its file)
CTL = (1, 8)  # the fake control node's device numbers

# The task: holds its own GPU node (and, asked to, sends the descriptor to whoever connects to ./sock),
# says "ready", then runs until the test writes to the FIFO ./stop; it prints whether it still holds it.
TASK = """import os, socket, sys
node = os.open(sys.argv[1], os.O_RDWR)
server = socket.socket(socket.AF_UNIX)
server.bind("sock")
server.listen(1)
open("ready", "w").close()
if sys.argv[2] == "send":
    conn, _ = server.accept()
    socket.send_fds(conn, [b"gpu"], [node])
    conn.close()
open("stop").read()
print("task still holds", os.major(os.fstat(node).st_rdev), os.minor(os.fstat(node).st_rdev), flush=True)
"""

# The student's own process, outside any job: takes the GPU out of the task (through /proc/<pid>/root, or
# over the task's socket), says "held", keeps it. "thread-table": a thread of it makes itself a descriptor
# table of its own (unshare CLONE_FILES) and keeps the descriptor there, and the process closes its own:
# nothing in /proc/PID/fd shows it any more. "mapping": it maps the node and closes the descriptor.
OUTSIDE = """import ctypes, os, signal, socket, sys, threading
how, where = sys.argv[1], sys.argv[2]
if how == "scm-rights":
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(where)
    fd = socket.recv_fds(sock, 16, 1)[1][0]
    sock.close()
else:
    fd = os.open(where, os.O_RDWR)
minor = os.minor(os.fstat(fd).st_rdev)
if how == "mapping":  # a mapping keeps the device file (and the GPU) once the descriptor is closed
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    assert libc.mmap(None, 4096, 3, 2, fd, 0) not in (None, ctypes.c_void_p(-1).value)  # rw, MAP_PRIVATE
    os.close(fd)  # (Python's own mmap would keep a duplicate of the descriptor)
if how == "thread-table":
    kept = threading.Event()
    def keep():
        assert ctypes.CDLL(None, use_errno=True).unshare(0x400) == 0
        kept.set()
        threading.Event().wait()
    threading.Thread(target=keep, daemon=True).start()
    kept.wait()
    os.close(fd)
    assert not any(os.path.realpath(f"/proc/self/fd/{n}").endswith("nvidia0") for n in os.listdir("/proc/self/fd"))
print("held", minor, flush=True)
signal.pause()
"""

# A root process holding the node (what nvidia-persistenced or the server itself does).
ROOT_HOLDER = """import os, signal, sys
fd = os.open(sys.argv[1], os.O_RDWR)
print("held", flush=True)
signal.pause()
"""


@pytest.fixture
def jobs_root(shared_tmp, unix_accounts):
    root = shared_tmp / "jobs"
    root.mkdir(mode=0o755)
    return root


@pytest.fixture
def gpu_dev(shared_tmp, unix_accounts):
    """The fake GPU and control node, locked down as a server that isolates jobs leaves them (root 0600)."""
    dev = shared_tmp / "dev"
    dev.mkdir(mode=0o755)
    os.mknod(dev / "nvidia0", stat.S_IFCHR | 0o600, os.makedev(1, GPU))
    os.mknod(dev / "nvidia1", stat.S_IFCHR | 0o600, os.makedev(1, MAPPABLE_GPU))
    os.mknod(dev / "nvidiactl", stat.S_IFCHR | 0o600, os.makedev(*CTL))
    report = gpu_access.lock_down([str(dev / "nvidia[0-9]*"), str(dev / "nvidiactl")])
    assert not report.problems, report
    return dev


@pytest.fixture
def sweep_log(caplog):
    logger = logging.getLogger("hive-test-gpu-sweep")
    caplog.set_level(logging.WARNING, logger=logger.name)
    return logger


@pytest.fixture
def processes():
    """Processes the test starts; whatever is left is killed (by pid) and reaped at the end."""
    started: list[subprocess.Popen] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait()


@pytest.fixture
async def launchers():
    """The launchers a test makes; whatever their tasks left (a task a failed test never told to end) is
    killed with their cgroups at the end."""
    made: list[LocalLauncher] = []
    yield made
    for launcher in made:
        cgroups.remove_scope(launcher.isolation.cgroup_name, launcher.cgroup_scope)
        await launcher.close()


def _launcher(launchers, jobs_root, dev, logger, interval=0.0) -> LocalLauncher:
    iso = Isolation(run_as="owner", cgroups="auto", gpu_device_glob=str(dev / "nvidia[0-9]*"),
                    gpu_control_globs=[str(dev / "nvidiactl")], gpu_sweep_interval_s=interval)
    launcher = LocalLauncher(jobs_root / ".local-launcher", isolation=iso, jobs_root=str(jobs_root), log=logger)
    launchers.append(launcher)
    return launcher


def _gpu_task(launcher, jobs_root, dev, job_id, mode, gpu=GPU) -> tuple[LaunchRequest, object]:
    """A 1-GPU task of hive-stu-a running TASK in its job dir (with the FIFO it waits on)."""
    wd = jobs_root / job_id
    owner = launcher.task_owner(A)
    for d in (wd, wd / "logs"):
        private_dir(d, owner, stop_at=jobs_root)
    (wd / "task.py").write_text(TASK)
    os.mkfifo(wd / "stop", 0o600)
    os.chown(wd / "stop", *owner)
    task = TaskLaunch(job_id=job_id, task="main-0", group="main", index=0, rank=0, node="node-0",
                      gpu_indices=(gpu,), gpu_uuids=None,
                      command=f"exec /usr/bin/python3 task.py {_node(dev, gpu)} {mode}",
                      env={"HIVE_JOB_ID": job_id}, working_dir=str(wd), log_path=str(wd / "logs" / "main-0.log"),
                      user=A)
    return LaunchRequest(job_id=job_id, user=A, kind="batch", tasks=(task,)), wd


def _node(dev, gpu) -> str:
    return f"{dev}/nvidia{0 if gpu == GPU else 1}"


def _task_python(launcher, job_id) -> int:
    """The host pid of the task's own Python (the one holding its GPU)."""
    def find():
        for pid in launcher.cgroup(job_id, "main-0").pids():
            try:
                if "task.py" in psutil.Process(pid).cmdline():
                    return pid
            except psutil.Error:
                continue
        return None
    return wait_until(find, "the task's python in its cgroup")


def _start(processes, argv, **kwargs) -> subprocess.Popen:
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/", **kwargs)
    processes.append(p)
    line = p.stdout.readline()
    assert line.startswith("held"), (line, p.wait(), p.stderr.read())
    return p


def _as_student(unix_accounts, *argv: str) -> list[str]:
    pw = unix_accounts[A]
    return ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--init-groups", "--", *argv]


def _take_gpu_out(how, processes, unix_accounts, launcher, job_id, wd, dev, gpu=GPU) -> subprocess.Popen:
    """The student's own process takes the task's GPU: through /proc/<pid>/root, or over its socket."""
    where = str(wd / "sock") if how == "scm-rights" else f"/proc/{_task_python(launcher, job_id)}/root{_node(dev, gpu)}"
    return _start(processes, _as_student(unix_accounts, "/usr/bin/python3", "-c", OUTSIDE, how, where))


async def _finish(launcher, wd, job_id):
    with open(wd / "stop", "w") as f:  # the task's end, when the test says so
        f.write("stop\n")

    async def exited():
        return next((e for e in await launcher.poll() if e.job_id == job_id), None)
    return await wait_until_async(exited, f"{job_id} to end")


def _killed_and_logged(proc, caplog, dev, unix_accounts, gpu=GPU):
    assert proc.wait(timeout=60) == -signal.SIGKILL, proc.stderr.read()
    lines = [r.getMessage() for r in caplog.records if f"killed pid {proc.pid} " in r.getMessage()]
    assert len(lines) == 1, caplog.text
    assert f"of user {A}" in lines[0] and "(python3)" in lines[0], lines
    assert f"{_node(dev, gpu)} (GPU {gpu}, " in lines[0], lines
    return lines[0]


@pytest.mark.parametrize("how", ["proc-root", "scm-rights", "thread-table", "mapping"])
async def test_a_gpu_descriptor_taken_out_of_a_task_dies_when_the_task_ends(
        how, jobs_root, gpu_dev, sweep_log, caplog, processes, launchers, unix_accounts):
    """The gap: the student's own process opens the running task's node through /proc/<pid>/root (or gets
    its descriptor over a Unix socket, or keeps it in a thread's own descriptor table) and holds it. When
    the task ends, the sweep of its GPUs kills that process (SIGKILL) and the log names it; a root process
    holding the node is left alone. (No periodic sweep here: the one at the task's end does it.)"""
    gpu = MAPPABLE_GPU if how == "mapping" else GPU
    launcher = _launcher(launchers, jobs_root, gpu_dev, sweep_log)
    job_id = f"j-out-{how}"
    request, wd = _gpu_task(launcher, jobs_root, gpu_dev, job_id, "send" if how == "scm-rights" else "keep", gpu)
    await launcher.start(request)
    wait_until(lambda: (wd / "ready").exists(), "the task holding its GPU")
    outside = _take_gpu_out(how, processes, unix_accounts, launcher, job_id, wd, gpu_dev, gpu)
    root = _start(processes, [sys.executable, "-c", ROOT_HOLDER, _node(gpu_dev, gpu)])

    ended = await _finish(launcher, wd, job_id)
    log = (wd / "logs" / "main-0.log").read_text()
    assert ended.exit_code == 0 and f"task still holds 1 {gpu}" in log, log
    line = _killed_and_logged(outside, caplog, gpu_dev, unix_accounts, gpu)
    assert "outside any job" in line
    assert ("a memory mapping)" in line) == (how == "mapping") and (" fd " in line) != (how == "mapping"), line
    assert root.poll() is None, "a root process holding the node was killed"


async def test_the_periodic_sweep_kills_a_taken_descriptor_and_spares_the_task_and_root(
        jobs_root, gpu_dev, sweep_log, caplog, processes, launchers, unix_accounts):
    """While the task runs: a sweep (what the service's loop runs every gpu_sweep_interval_s) kills the
    student's process holding the task's GPU outside any job; the task's own process holding its own GPU
    is not touched (it ends normally, still holding it), nor is root's."""
    launcher = _launcher(launchers, jobs_root, gpu_dev, sweep_log, interval=5)
    assert launcher.gpu_sweep_interval_s == 5
    request, wd = _gpu_task(launcher, jobs_root, gpu_dev, "j-periodic", "keep")
    await launcher.start(request)
    wait_until(lambda: (wd / "ready").exists(), "the task holding its GPU")
    task_python = _task_python(launcher, "j-periodic")
    outside = _take_gpu_out("proc-root", processes, unix_accounts, launcher, "j-periodic", wd, gpu_dev)
    root = _start(processes, [sys.executable, "-c", ROOT_HOLDER, str(gpu_dev / "nvidia0")])

    await launcher.sweep_gpus()
    _killed_and_logged(outside, caplog, gpu_dev, unix_accounts)
    assert psutil.Process(task_python).status() != psutil.STATUS_ZOMBIE
    assert f"killed pid {task_python} " not in caplog.text
    await launcher.sweep_gpus()  # and again: the task's own holder is never a stranger
    ended = await _finish(launcher, wd, "j-periodic")
    log = (wd / "logs" / "main-0.log").read_text()
    assert ended.exit_code == 0 and f"task still holds 1 {GPU}" in log, log
    assert root.poll() is None, "a root process holding the node was killed"


async def test_the_service_loop_sweeps_every_interval(tmp_path, jobs_root, gpu_dev, sweep_log, caplog, processes,
                                                      launchers, unix_accounts):
    """The service's loop runs the sweep by itself every c.Isolation.gpu_sweep_interval_s: a student's
    process that holds a GPU descriptor outside any job (here: handed to it at its start) dies, no job
    ending needed."""
    from hive_lab_server.jobs.service import HiveService
    from hive_lab_server.store import Store
    from hive_scheduler import Scheduler, load_cluster_config

    launcher = _launcher(launchers, jobs_root, gpu_dev, sweep_log, interval=0.05)
    cfg = load_cluster_config({"nodes": 1, "gpus_per_node": 1, "gpu_type": "T4", "vcs": {"default": 1}})
    svc = HiveService(scheduler=Scheduler(cfg), config=cfg, store=Store(f"sqlite:///{tmp_path / 's.sqlite'}"),
                      launcher=launcher, jobs_root=jobs_root, poll_interval_s=0.02)
    fd = os.open(gpu_dev / "nvidia0", os.O_RDWR)
    try:
        holder = _start(processes, _as_student(unix_accounts, "/usr/bin/python3", "-c",
                                               f"import os, signal; print('held', os.minor(os.fstat({fd}).st_rdev), "
                                               f"flush=True); signal.pause()"), pass_fds=(fd,))
    finally:
        os.close(fd)
    await svc.start()
    try:
        await wait_until_async(lambda: holder.poll() is not None, "the sweep of the service's loop")
    finally:
        await svc.stop()
    _killed_and_logged(holder, caplog, gpu_dev, unix_accounts)


def test_who_may_hold_which_node():
    """The rule itself: root may; a process of a running task may hold the GPUs it was granted and the
    control nodes if it was granted any GPU; nothing else may, and the reason says where it was."""
    gpu7, gpu3 = GpuNode("/dev/nvidia7", os.makedev(195, 7), 7), GpuNode("/dev/nvidia3", os.makedev(195, 3), 3)
    ctl = GpuNode("/dev/nvidiactl", os.makedev(195, 255), None)
    grants = [TaskGrant("j-1", "main-0", frozenset({7}), frozenset({100, 101})),
              TaskGrant("j-2", "main-0", frozenset(), frozenset({200})),
              TaskGrant("j-old", "main-0", None, frozenset({300}))]

    def why(pid, node, uids=(1000, 1000, 1000, 1000)):
        return verdict(Holding(pid, uids, "python3", node, "fd 3", ""), grants)

    assert why(101, gpu7) is None and why(101, ctl) is None
    assert why(101, gpu3) == "in job j-1 (task main-0), which was not granted GPU 3"
    assert why(200, ctl) == "in job j-2 (task main-0), which was not granted any GPU"
    assert why(200, gpu7) == "in job j-2 (task main-0), which was not granted GPU 7"
    assert why(300, gpu3) is None  # a task recorded by an older server: its GPUs are not known
    assert why(999, gpu7) == "outside any job"
    assert why(999, gpu7, uids=(0, 0, 0, 0)) is None
    assert why(999, gpu7, uids=(1000, 0, 0, 0)) == "outside any job"  # a set-uid root program run by a user


async def test_a_job_holding_a_gpu_it_was_not_granted_loses_that_process(
        jobs_root, gpu_dev, sweep_log, caplog, launchers, unix_accounts):
    """Two GPU jobs of the same student: the one granted GPU 5 hands its descriptor over a Unix socket to
    the one granted GPU 7. A sweep kills the process of the GPU 7 job that holds GPU 5 (the log says it
    was not granted GPU 5); the GPU 5 job keeps its own and ends normally."""
    launcher = _launcher(launchers, jobs_root, gpu_dev, sweep_log)
    giver, giver_wd = _gpu_task(launcher, jobs_root, gpu_dev, "j-giver", "send", MAPPABLE_GPU)
    await launcher.start(giver)
    wait_until(lambda: (giver_wd / "ready").exists(), "the GPU 5 job holding its GPU")
    taker, taker_wd = _gpu_task(launcher, jobs_root, gpu_dev, "j-taker", "keep", GPU)
    (taker_wd / "outside.py").write_text(OUTSIDE)
    taker = LaunchRequest(job_id=taker.job_id, user=A, kind="batch", tasks=(
        replace(taker.tasks[0], command=f"exec /usr/bin/python3 outside.py scm-rights {giver_wd / 'sock'}"),))
    await launcher.start(taker)
    taker_log = taker_wd / "logs" / "main-0.log"
    wait_until(lambda: f"held {MAPPABLE_GPU}" in taker_log.read_text(), "the GPU 7 job holding GPU 5")

    await launcher.sweep_gpus()
    async def exits():
        return {e.job_id: e for e in await launcher.poll()}.get("j-taker")
    taken = await wait_until_async(exits, "the GPU 7 job's process killed")
    assert taken.exit_code == 128 + signal.SIGKILL, taker_log.read_text()
    assert "in job j-taker (task main-0), which was not granted GPU 5" in caplog.text, caplog.text
    ended = await _finish(launcher, giver_wd, "j-giver")
    giver_log = (giver_wd / "logs" / "main-0.log").read_text()
    assert ended.exit_code == 0 and f"task still holds 1 {MAPPABLE_GPU}" in giver_log, giver_log
