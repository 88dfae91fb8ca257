"""The ``local`` launcher: every task is a subprocess on this machine.

Each task runs in its own session (so its own process group) and working dir, with stdout and
stderr appended to its log file. A tiny ``/bin/sh`` wrapper records the task's exit code in a
file, and the launcher writes ``<state_dir>/<job>/<task>.json`` (pid + process start time), so
tasks keep running when the server dies (even by SIGKILL) and a restarted server finds them again:
``running()`` lists live ones, ``adopt()`` tracks them, and ``poll()`` reports exits that happened
while the server was down (from the exit files; ``lost`` when there is none).

Isolation (``c.Isolation``, see ``hive_lab_server.execution.isolation``): when the server runs as root, each task
runs as its owner's Unix account (the wrapper stays root to join the task's cgroup and record the exit,
then ``setpriv`` drops to the account), never as root unless the admin allows it; each task gets its
own cgroup (limits from its request, other GPUs' device nodes denied, killed as a whole when the task
ends or is stopped, so ``setsid`` daemons die with it); a task granted GPUs gets its own device nodes
of them in its mount namespace, never a group (``isolation/gpu_access.py``), and when it ends whatever
still holds one of its GPUs without the right to (a descriptor taken out of it) is killed before its exit
is reported; ``sweep_gpus`` does the same for every GPU when the service's loop asks
(``isolation/gpu_holders.py``); its output reaches its log through a size-limiting copier. Constructed
directly (tests) without ``isolation``/``parent`` it runs everything as the server's own user, as before.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from typing import Any, Callable

import psutil
from traitlets import List, Unicode

from hive_lab_server.execution.isolation import Account, AccountError, Isolation
from hive_lab_server.execution.isolation import cgroups, gpu_access
from hive_lab_server.execution.isolation.safe_files import UnsafePath, check_regular, open_beneath
from hive_lab_server.execution.isolation.task_exec import encode_spec
from hive_lab_server.execution.launchers.base import LaunchError, Launcher, LaunchRequest, TaskExit
from hive_lab_server.execution.launchers.log_copiers import LogCopiers

__all__ = ["LocalLauncher"]

#: a one-task start is made on the event loop only while the loop runs at most this late (LocalLauncher.start,
#: ``loop_busy``): a lone submit's latency without a flood's exec waits on the loop
ON_LOOP_MAX_LAG_S = 0.01

# The task's wrapper, run by /bin/sh as root (when the server isolates jobs) with an environment built from
# scratch (ROOT_ENV) and absolute tool paths: nothing of the user's reaches it. "$1": the exit file; "$2":
# how many cgroup.procs files follow (it joins those cgroups first thing); the rest: the task_exec
# command line (isolation/task_exec.py), which drops to the owner's account and only then reads the
# command, its environment and its working dir (from a file descriptor) and runs it. The wrapper then
# writes the exit status to "$1" (and, first, the CPU time of what it waited for, the shell's ``times``,
# to "$1.cpu"). TERM/INT/HUP/USR1 are caught first thing (not ignored, so the task itself still gets
# them) to let the wrapper outlive the task and record its status; a TERM/INT/HUP that comes before the
# command started (a cancel right after the launch) means the command is not started at all (else it
# would miss the signal and run through the whole stop grace). Two-phase start: the wrapper waits for a
# "go" line on its stdin, which the launcher writes only once every task of the job has its record in the
# state dir; a server that dies before that closes the pipe, and the wrapper leaves without running
# anything. So a task never runs unrecorded, and a gang's tasks run only when all of them were launched. The command's own shell catches USR1 too
# (the checkpoint signal, docs/checkpoint.md): it reaches the job's processes, and a compound command's
# shell keeps waiting for them while they save their checkpoint.
WRAPPER = """trap 'stop=143' TERM; trap 'stop=130' INT; trap 'stop=129' HUP; trap : USR1
exitf=$1; n=$2; shift 2
while [ "$n" -gt 0 ]; do
  printf '%s\\n' $$ > "$1" || { echo "hive-lab: cannot join cgroup $1" >&2; exit 125; }
  shift; n=$((n - 1))
done
IFS= read -r go || go=
[ "$go" = go ] || exit 125
if [ -n "$stop" ]; then code=$stop
else
"$@" </dev/null
code=$?
fi
times > "$exitf.cpu" 2>/dev/null
printf "%s\\n" "$code" > "$exitf.tmp" && /bin/mv -f "$exitf.tmp" "$exitf"
exit $code
"""

# What root-run helpers (the wrapper, task_exec, the log copier) get as their environment: nothing else.
ROOT_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}

TASK_EXEC = str(pathlib.Path(__file__).resolve().parent.parent / "isolation" / "task_exec.py")

# Server secrets the tasks must not inherit.
SECRET_ENV = ("JUPYTER_TOKEN", "JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN", "JUPYTER_TOKEN_FILE", "JUPYTERHUB_OAUTH_CLIENT_SECRET")

# how long the exits of GPU tasks wait for the sweep of their GPUs (isolation/gpu_holders.py) at most
END_SWEEP_WAIT_S = 10.0

log = logging.getLogger(__name__)
_TIMES = re.compile(r"(\d+)m([\d.]+)s")  # "0m1.250000s" in the output of the shell's ``times``


@dataclass
class _Task:
    job_id: str
    task: str
    pid: int
    create_time: float
    proc: subprocess.Popen | None  # None when adopted after a restart (not our child)
    copier: int = 0  # pid of the log copier (isolation/log_limit.py), 0 when output goes to the log directly
    gpus: tuple[int, ...] | None = None  # the GPUs it was granted (None: a record of an older server)


def _nobody() -> tuple[int, int]:
    """uid, gid of ``nobody`` (an account that is no task's), for the log copier."""
    import pwd

    try:
        pw = pwd.getpwnam("nobody")
        return pw.pw_uid, pw.pw_gid
    except KeyError:
        return 65534, 65534


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


class LocalLauncher(Launcher):
    name = "local"
    supports_images = False  # tasks are processes on this machine

    hidden_env = List(Unicode(), list(SECRET_ENV), config=True,
                      help="environment variables of the server that tasks do not inherit (its secrets)")

    def __init__(self, state_dir: str | os.PathLike, base_env: dict[str, str] | None = None, *,
                 isolation: Isolation | None = None, jobs_root: str | None = None,
                 parent: Any = None, config: Any = None, **traits: Any):
        traits = {k: v for k, v in traits.items() if k in self.class_trait_names() and v is not None}
        super().__init__(parent=parent, config=config, **traits)
        self.state_dir = pathlib.Path(state_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        if isolation is None:
            isolation = Isolation(parent=parent) if parent is not None else Isolation.server_identity()
        self.isolation = isolation
        self.cgroup_version = cgroups.detect(isolation.cgroups)
        self.jobs_root = pathlib.Path(jobs_root) if jobs_root else None
        self.cgroup_scope = hashlib.sha1(str(self.state_dir.resolve()).encode()).hexdigest()[:12]
        env = dict(os.environ if base_env is None else base_env)
        for key in self.hidden_env:
            env.pop(key, None)
        self.base_env = env
        self._tasks: dict[str, dict[str, _Task]] = {}
        #: whether the service's event loop runs behind (set by the server: its loop lag over ON_LOOP_MAX_LAG_S)
        self.loop_busy: Callable[[], bool] = lambda: False
        self._pending: list[TaskExit] = []
        self._scanned = False
        self._reported: set[tuple[str, str]] = set()  # orphan exits reported, not yet acknowledged
        # acknowledged exits whose records a worker thread removes (``ack``), oldest first; under the lock
        self._forgetting: dict[tuple[str, str], None] = {}
        self._forget_lock = threading.Lock()
        self._forget_worker: asyncio.Future | None = None
        # a PID and mount namespace per task needs root; the log copier runs as nobody (never as root)
        self._namespaces = isolation.namespaces and os.geteuid() == 0 and isolation.run_as != "server"
        self._copiers = LogCopiers(isolation.max_log_bytes, _nobody() if os.geteuid() == 0 else None, ROOT_ENV)
        # no GPU descriptor outlives its task (isolation/gpu_holders.py): where the nodes are locked down
        self._gpu_sweep = None
        if os.geteuid() == 0 and isolation.isolates() and isolation.lock_gpu_devices:
            from hive_lab_server.execution.isolation.gpu_holders import GpuSweep, gpu_nodes

            self._gpu_sweep = GpuSweep(lambda: gpu_nodes(isolation.gpu_device_glob, isolation.gpu_control_globs),
                                       self._task_grants, self.log)
            self.gpu_sweep_interval_s = isolation.gpu_sweep_interval_s

    # --- files --------------------------------------------------------------------------------

    def _paths(self, job_id: str, task: str) -> tuple[pathlib.Path, pathlib.Path]:
        d = self.state_dir / _safe(job_id)
        return d / f"{_safe(task)}.json", d / f"{_safe(task)}.exit"

    def _forget(self, job_id: str, task: str) -> None:
        info, exitf = self._paths(job_id, task)
        for p in (info, exitf, exitf.with_suffix(".exit.tmp"), exitf.with_suffix(".exit.cpu")):
            p.unlink(missing_ok=True)
        try:
            info.parent.rmdir()
        except OSError:
            pass

    @staticmethod
    def _read_exit(path: pathlib.Path) -> int | None:
        try:
            return int(path.read_text().strip())
        except (OSError, ValueError):
            return None

    @staticmethod
    def _read_cpu_seconds(exitf: pathlib.Path) -> float | None:
        """User + system CPU time of the task's processes the wrapper waited for (its ``times`` line 2;
        daemons that escaped the task are not in it), or None when it was not recorded."""
        try:
            lines = exitf.with_suffix(".exit.cpu").read_text().splitlines()
        except OSError:
            return None
        parts = _TIMES.findall(lines[1]) if len(lines) > 1 else []
        if len(parts) != 2:
            return None
        return round(sum(int(m) * 60 + float(sec) for m, sec in parts), 3)

    # --- liveness -----------------------------------------------------------------------------

    @staticmethod
    def _alive(t: _Task) -> bool:
        if t.proc is not None:
            return t.proc.poll() is None
        try:
            p = psutil.Process(t.pid)
            return abs(p.create_time() - t.create_time) < 0.01 and p.status() != psutil.STATUS_ZOMBIE
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return False

    def _signal(self, t: _Task, sig: int) -> None:
        if t.proc is None and not self._alive(t):
            return  # never signal a group whose leader may have been replaced
        try:
            os.killpg(t.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    # --- Launcher interface -------------------------------------------------------------------

    def account(self, user: str) -> Account | None:
        """The account ``user``'s tasks run as (None: the server's own); LaunchError when none may."""
        try:
            return self.isolation.account_for(user)
        except AccountError as exc:
            raise LaunchError(str(exc)) from None

    def task_owner(self, user: str) -> tuple[int, int] | None:
        account = self.account(user)
        return None if account is None else (account.uid, account.gid)

    def task_pids(self) -> dict[int, str]:
        return {t.pid: job_id for job_id, by_task in list(self._tasks.items()) for t in list(by_task.values())}

    def cgroup(self, job_id: str, task: str) -> cgroups.TaskCgroup | None:
        return cgroups.TaskCgroup.of(self.cgroup_version, self.isolation.cgroup_name,
                                     f"{self.cgroup_scope}/{_safe(job_id)}", _safe(task))

    def _open_log(self, log_path: str, account: Account | None) -> int:
        """The task's log, opened for appending without following a link the job planted there."""
        path = pathlib.Path(log_path)
        if not os.path.lexists(path.parent):
            path.parent.mkdir(parents=True, mode=0o700)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        if self.jobs_root is not None and self.jobs_root in path.parents:
            fd = open_beneath(self.jobs_root, path.relative_to(self.jobs_root).as_posix(), flags, 0o600)
        else:
            fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            uids = {os.geteuid()} | ({account.uid} if account else set())
            st = check_regular(fd, uids)
            if account is not None and st.st_uid != account.uid:
                os.fchown(fd, account.uid, account.gid)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _task_exec_argv(self, tl, account: Account | None, spec_fd: int) -> list[str]:
        """task_exec's command line: everything on it is the launcher's (ids, device paths), none the user's.

        No task gets a group that opens GPUs (a setgid file would carry it out of the task): a task granted
        GPUs gets per-task nodes of them (``--own``) in its mount namespace, the others' are masked."""
        argv = [sys.executable, "-I", "-S", TASK_EXEC, "--spec-fd", str(spec_fd)]
        if account is not None:
            argv += ["--uid", str(account.uid), "--gid", str(account.gid),
                     "--groups", ",".join(map(str, account.groups))]
        if self._namespaces:
            argv.append("--namespaces")
            masked = cgroups.gpu_device_paths_to_mask(self.isolation.gpu_device_glob, tl.gpu_indices)
            if masked:
                argv += ["--mask-node", gpu_access.mask_node(self.state_dir)]
                for path in masked:
                    argv += ["--mask", path]
            own = gpu_access.granted_nodes(self.isolation.gpu_device_glob, self.isolation.gpu_control_globs,
                                           tl.gpu_indices) if account is not None else []
            if own:
                argv += ["--own-dir", str(self._own_dir())]
                for path in own:
                    argv += ["--own", path]
        return argv

    def _own_dir(self) -> pathlib.Path:
        """Where task_exec mounts the tmpfs of a task's own device nodes (each task in its own namespace):
        a root-only dir in the root-only state dir."""
        path = self.state_dir / ".gpu-nodes"
        path.mkdir(mode=0o700, exist_ok=True)
        return path

    def _check_gpu_confinement(self, request: LaunchRequest, account: Account | None) -> None:
        """A task of another account granted GPUs needs its own mount namespace (its own device nodes);
        without one it could reach them only through a group, which a setgid file carries out of it."""
        if account is None or self._namespaces or not any(tl.gpu_indices for tl in request.tasks):
            return
        why = ("c.Isolation.namespaces is off" if not self.isolation.namespaces
               else "the server does not run as root")
        raise LaunchError(f"job {request.job_id} was granted GPUs, but its tasks cannot get their own device "
                          f"nodes because {why}; set c.Isolation.namespaces = True on a server running as root "
                          f"(GPUs are never handed out through a group)")

    def _task_env(self, tl, account: Account | None) -> dict[str, str]:
        env = dict(self.base_env)
        if account is not None:
            env.update(account.env())
        env.update(tl.env)
        return env

    def _task_spec_fd(self, tl, account: Account | None) -> int:
        """A memory file with what the user controls (command, environment, working dir), read by task_exec
        only after it dropped to the owner's account."""
        data = encode_spec("trap : USR1\n" + tl.command, tl.working_dir, self._task_env(tl, account))
        fd = os.memfd_create("hive-task-spec")
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.lseek(fd, 0, os.SEEK_SET)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _spawn(self, tl, account: Account | None, exitf: pathlib.Path,
               cg: cgroups.TaskCgroup | None) -> tuple[subprocess.Popen, int, int]:
        """The task's wrapper, waiting for its "go" (see WRAPPER); (process, log copier pid, go fd)."""
        if not os.path.isdir(tl.working_dir):  # entered only by task_exec, as the owner; say it early
            raise FileNotFoundError(2, f"the working dir {tl.working_dir} does not exist")
        procs_files = cg.procs_files() if cg else []
        if account is None and not self._namespaces:
            # no identity switch: the wrapper already runs as the task's own user (a personal install, or
            # Isolation.run_as = "server"), so the task's environment may be its own (no task_exec: a
            # Python start per task costs ~10x the wrapper itself)
            spec_fd = None
            wrapper_env = self._task_env(tl, None)
            command = ["/bin/sh", "-c", "trap : USR1\n" + tl.command]
            cwd = tl.working_dir
        else:
            spec_fd = self._task_spec_fd(tl, account)
            wrapper_env = ROOT_ENV
            command = self._task_exec_argv(tl, account, spec_fd)
            cwd = "/"
        args = ["/bin/sh", "-c", WRAPPER, "hive-task", str(exitf), str(len(procs_files)), *procs_files, *command]
        logfd = self._open_log(tl.log_path, account)
        limit = self.isolation.max_log_bytes
        r = w = None
        copier = 0
        try:
            out = logfd
            if limit > 0:
                r, w = os.pipe()
                copier = self._copiers.start(r, logfd)  # (the spare started ahead, when there is one)
                out = w
            go_r, go_w = os.pipe()
            try:
                proc = subprocess.Popen(args, cwd=cwd, env=wrapper_env, stdin=go_r, stdout=out,
                                        stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
                                        pass_fds=(spec_fd,) if spec_fd is not None else ())
            except BaseException:
                os.close(go_w)
                raise
            finally:
                os.close(go_r)
            return proc, copier, go_w
        finally:
            for fd in (logfd, r, w, spec_fd):  # (spec_fd None on the path without an identity switch)
                if fd is not None:
                    os.close(fd)

    async def start(self, request: LaunchRequest) -> None:
        # A lone one-task job is started on the event loop: its cgroup, one spawn (vfork: the loop waits for
        # the exec only) and its record take about a millisecond, less than the two thread hops they replace,
        # each a wait for the GIL and the OS scheduler on a busy machine (issue 40: submit -> running). A
        # gang's spawns go to a thread, so requests are answered meanwhile (8 spawns in a row would hold up
        # every other request), and so does any start while the loop is behind (``loop_busy``: a write flood's
        # jobs), where the loop's waits for the children's execs would add to every request's.
        if len(request.tasks) == 1 and not self.loop_busy():
            started = self._start_tasks(request)
        else:
            started = await asyncio.to_thread(self._start_tasks, request)
        self._tasks[request.job_id] = {t.task: t for t in started}
        if self.isolation.max_log_bytes > 0:  # the next task's log copier, started ahead (log_copiers.py),
            # once the caller's turn (its "running" commit) is over: a spawn beside it takes its CPU
            loop = asyncio.get_running_loop()
            loop.call_soon(loop.run_in_executor, None, self._refill_copiers)

    def _refill_copiers(self) -> None:
        try:
            self._copiers.refill()
        except Exception:  # noqa: BLE001 - no spare: the next task spawns its copier itself
            self.log.exception("hive-lab: starting a spare log copier failed")

    def _start_tasks(self, request: LaunchRequest) -> list[_Task]:
        """Spawn, record, then release ("go") every task of ``request``; on a failure none is left running."""
        account = self.account(request.user)
        self._check_gpu_confinement(request, account)
        self._forget_acknowledged(request.job_id)  # (a retry: its last attempt's records, if still there)
        started: list[_Task] = []
        go: list[int] = []  # the wrappers' "go" pipes, written once every task is recorded
        try:
            for tl in request.tasks:
                info, exitf = self._paths(request.job_id, tl.task)
                info.parent.mkdir(parents=True, exist_ok=True)
                for p in (info, exitf):
                    p.unlink(missing_ok=True)
                cg = None
                if self.cgroup_version != "off":
                    limits = cgroups.Limits(
                        cpus=tl.cpus, memory_bytes=tl.memory_mb * 2**20, pids_max=self.isolation.pids_max,
                        deny_devices=cgroups.gpu_devices_to_deny(self.isolation.gpu_device_glob, tl.gpu_indices))
                    cg = cgroups.TaskCgroup.create(self.cgroup_version, self.isolation.cgroup_name,
                                                   f"{self.cgroup_scope}/{_safe(request.job_id)}", _safe(tl.task), limits)
                proc, copier, go_fd = self._spawn(tl, account, exitf, cg)
                go.append(go_fd)
                try:
                    ctime = psutil.Process(proc.pid).create_time()
                except psutil.NoSuchProcess:  # already gone: still ours to reap
                    ctime = 0.0
                t = _Task(request.job_id, tl.task, proc.pid, ctime, proc, copier, tuple(tl.gpu_indices))
                started.append(t)
                tmp = info.with_suffix(".json.tmp")
                # (its GPUs too: the GPU sweep reads who may hold which GPU from these records, which exist
                # before any task runs)
                tmp.write_text(json.dumps({"job_id": request.job_id, "task": tl.task, "pid": proc.pid,
                                           "create_time": ctime, "log_path": tl.log_path, "copier": copier,
                                           "gpus": list(tl.gpu_indices)}))
                os.replace(tmp, info)
            for fd in go:  # every task has its record: all of them may run now
                os.write(fd, b"go\n")
        except OSError as exc:
            for t in started:
                self._signal(t, signal.SIGKILL)
                if t.proc is not None:
                    t.proc.wait()
                self._reap_cgroup(t.job_id, t.task)
                self._forget(t.job_id, t.task)
            self._reap_cgroup(request.job_id, tl.task)  # the one being started when it failed
            why = str(exc) if isinstance(exc, UnsafePath) else (exc.strerror or str(exc))
            raise LaunchError(f"cannot start task {tl.task} of {request.job_id}: {why}") from exc
        finally:
            for fd in go:
                os.close(fd)
        return started

    def _reap_cgroup(self, job_id: str, task: str) -> str:
        """Kill what is left in the task's cgroup (daemons), remove it; the OOM note if there was one."""
        cg = self.cgroup(job_id, task)
        if cg is None:
            return ""
        cg.kill()
        oom = cg.oom_killed()
        cg.remove()
        return "OOMKilled: the task went over its memory request (the kernel's OOM killer ended it)" if oom else ""

    async def checkpoint(self, job_id: str, grace_s: float) -> None:
        live = [t for t in self._tasks.get(job_id, {}).values() if self._alive(t)]
        for t in live:
            self._signal(t, signal.SIGUSR1)
        deadline = time.monotonic() + max(0.0, grace_s)
        while live and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
            live = [t for t in live if self._alive(t)]

    async def stop(self, job_id: str, grace_s: float) -> None:
        tasks = list(self._tasks.get(job_id, {}).values())
        live = [t for t in tasks if self._alive(t)]
        for t in live:
            self._signal(t, signal.SIGTERM)
        deadline = time.monotonic() + max(0.0, grace_s)
        while live and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
            live = [t for t in live if self._alive(t)]
        for t in live:
            self._signal(t, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while live and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
            live = [t for t in live if self._alive(t)]
        for t in tasks:  # leftovers of the task (its own background processes, setsid daemons)
            try:
                os.killpg(t.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            cg = self.cgroup(t.job_id, t.task)
            if cg is not None:
                await asyncio.to_thread(cg.kill)

    @staticmethod
    def _drain_copier(pid: int, timeout_s: float = 5.0) -> None:
        """Let the log copier write the task's last output (it ends once every writer is gone, which the
        cgroup kill ensures) so the log is complete when the exit is reported."""
        if not pid:
            return
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    return
            except ChildProcessError:  # not our child (adopted after a restart)
                if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                    return
            time.sleep(0.005)

    def _exit_of(self, t: _Task) -> TaskExit:
        _, exitf = self._paths(t.job_id, t.task)
        code = self._read_exit(exitf)
        cg = self.cgroup(t.job_id, t.task)
        peak = cg.peak_memory_bytes() if cg is not None else None
        oom = self._reap_cgroup(t.job_id, t.task)
        self._drain_copier(t.copier)
        measured = {"cpu_seconds": self._read_cpu_seconds(exitf),
                    "peak_memory_mb": None if peak is None else round(peak / 2**20, 1)}
        if oom and code is not None:
            return TaskExit(t.job_id, t.task, code, oom, **measured)
        if code is not None:
            return TaskExit(t.job_id, t.task, code, "", **measured)
        if t.proc is not None and t.proc.returncode is not None:
            rc = t.proc.returncode
            if rc < 0:
                return TaskExit(t.job_id, t.task, 128 - rc, oom or f"killed by {signal.Signals(-rc).name}", **measured)
            return TaskExit(t.job_id, t.task, rc, "", **measured)
        return TaskExit(t.job_id, t.task, None, "lost", **measured)

    async def poll(self) -> list[TaskExit]:
        """The tasks' exits since the last poll. Reaping an exit (its cgroup's leftovers killed and
        removed: ``_exit_of``) costs milliseconds, so the loop gets a turn after each job whose tasks ended
        (a flood of short jobs once held reads up for over a second); one job's exits are reaped together."""
        out, self._pending = self._pending, []
        ended: list[_Task] = []
        if not self._scanned:
            self._scanned = True
            out.extend(self._scan_orphan_exits(ended))
        for job_id in list(self._tasks):
            tasks = self._tasks.get(job_id)
            if tasks is None:
                continue  # (gone while the loop had its turn)
            reaped = len(ended)
            for name in list(tasks):
                t = tasks[name]
                if self._alive(t):
                    continue
                try:  # the task's own leftovers go with it (and those in its cgroup in _exit_of)
                    os.killpg(t.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                out.append(self._exit_of(t))
                ended.append(t)
                del tasks[name]  # its records stay until the service acknowledges the exit (ack)
            if not tasks:
                del self._tasks[job_id]
            if len(ended) > reaped:
                await asyncio.sleep(0)  # a turn for the loop before the next job's reaping
        if self._gpu_sweep is not None and any(t.gpus is None or t.gpus for t in ended):
            unknown = any(t.gpus is None for t in ended)  # a record of an older server: sweep every GPU
            await self._sweep_after(None if unknown else {g for t in ended for g in t.gpus})
        return out

    async def _sweep_after(self, gpus: set[int] | None) -> None:
        """The GPUs of tasks that just ended: whatever still holds one (a descriptor a process of the owner
        took out of the task) is killed before the exits are reported, so the next job gets GPUs nobody
        else holds. Bounded: a sweep held up (a process's memory map that cannot be read) only delays it."""
        try:
            await asyncio.wait_for(asyncio.shield(self._gpu_sweep.run(gpus)), END_SWEEP_WAIT_S)
        except asyncio.TimeoutError:
            self.log.warning("hive-lab: the GPU sweep after a task's end takes over %s s; reporting the exit meanwhile",
                             END_SWEEP_WAIT_S)
        except Exception:  # noqa: BLE001 - a failed sweep never loses an exit
            self.log.exception("hive-lab: the GPU sweep after a task's end failed")

    async def sweep_gpus(self) -> None:
        if self._gpu_sweep is not None:
            await self._gpu_sweep.run()

    def _task_grants(self):
        """Who may hold which GPU now (run in the sweep's thread): every recorded task with its GPUs and
        its processes (its cgroup's, or without cgroups its wrapper's descendants). Records exist before a
        task runs anything and stay until its exit is acknowledged (its cgroup is empty by then)."""
        from hive_lab_server.execution.isolation.gpu_holders import TaskGrant

        grants = []
        for t in self._records():
            cg = self.cgroup(t.job_id, t.task)
            pids = cg.pids() if cg is not None else set()
            if cg is None and self._alive(t):
                try:
                    wrapper = psutil.Process(t.pid)
                    pids = {t.pid, *(c.pid for c in wrapper.children(recursive=True))}
                except psutil.Error:
                    pids = set()
            if pids:
                grants.append(TaskGrant(t.job_id, t.task, None if t.gpus is None else frozenset(t.gpus),
                                        frozenset(pids)))
        return grants

    def _records(self):
        """The tasks recorded in the state directory (those whose exits are acknowledged left out)."""
        with self._forget_lock:
            gone = set(self._forgetting)
        for info in sorted(self.state_dir.glob("*/*.json")):
            try:
                rec = json.loads(info.read_text())
                if (rec["job_id"], rec["task"]) in gone:
                    continue
                gpus = rec.get("gpus")
                yield _Task(rec["job_id"], rec["task"], int(rec["pid"]), float(rec["create_time"]), None,
                            int(rec.get("copier") or 0), None if gpus is None else tuple(int(g) for g in gpus))
            except (OSError, ValueError, KeyError):
                continue

    def _scan_orphan_exits(self, ended: list[_Task]) -> list[TaskExit]:
        """Exits of tasks started by an earlier server process that nobody adopted (added to ``ended``)."""
        out = []
        for t in self._records():
            if t.task in self._tasks.get(t.job_id, {}) or self._alive(t):
                continue
            out.append(self._exit_of(t))
            ended.append(t)
            self._reported.add((t.job_id, t.task))
        return out

    def ack(self, exits: list[TaskExit]) -> None:
        """The exits are stored: their records go, on a worker thread (a few unlinks a task, which took
        the event loop 1.5 ms a unit of exits at the median and 15-20 ms at the p99 under a flood of short
        jobs: issue 40). Until then they are not records (``_records``), and a start of any task of their
        job removes them first (``_forget_acknowledged``), so a late removal never takes a new attempt's files."""
        keys = [(e.job_id, e.task) for e in exits]
        for key in keys:
            self._reported.discard(key)
        with self._forget_lock:
            self._forgetting.update(dict.fromkeys(keys))
        self._forget_soon()

    def _forget_soon(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # (no event loop: a synchronous caller) at once
            self._forget_acknowledged()
            return
        if self._forget_worker is None or self._forget_worker.done():
            self._forget_worker = loop.run_in_executor(None, self._forget_acknowledged)
            self._forget_worker.add_done_callback(self._forget_more)

    def _forget_more(self, _: object) -> None:
        with self._forget_lock:
            more = bool(self._forgetting)
        if more:  # (acknowledged while the worker was finishing)
            self._forget_soon()

    def _forget_acknowledged(self, job_id: str | None = None) -> None:
        """Remove the records of the acknowledged exits (of ``job_id``'s tasks only, when given), oldest first:
        the worker's, the last ones at close, and a job's own before it starts (they share its directory, which
        the last one's removal takes with it). One that cannot be removed is logged; the next restart reports
        it again, which changes nothing."""
        while True:
            with self._forget_lock:
                key = next((k for k in self._forgetting if job_id is None or k[0] == job_id), None)
                if key is None:
                    return
                del self._forgetting[key]
                try:
                    self._forget(*key)
                except OSError:
                    self.log.exception("hive-lab: removing the records of %s's task %s failed", *key)

    async def running(self) -> dict[str, set[str]]:
        found: dict[str, set[str]] = {}
        for job_id, tasks in self._tasks.items():
            for name, t in tasks.items():
                if self._alive(t):
                    found.setdefault(job_id, set()).add(name)
        for t in self._records():
            if t.task not in found.get(t.job_id, set()) and self._alive(t):
                found.setdefault(t.job_id, set()).add(t.task)
        return found

    async def adopt(self, request: LaunchRequest) -> None:
        self._forget_acknowledged(request.job_id)  # (records of exits acknowledged are gone, as they were at once before)
        tracked = self._tasks.setdefault(request.job_id, {})
        for tl in request.tasks:
            if tl.task in tracked:
                continue
            info, _ = self._paths(request.job_id, tl.task)
            try:
                rec = json.loads(info.read_text())
                t = _Task(request.job_id, tl.task, int(rec["pid"]), float(rec["create_time"]), None,
                          int(rec.get("copier") or 0), tuple(tl.gpu_indices))
            except (OSError, ValueError, KeyError):
                self._pending.append(TaskExit(request.job_id, tl.task, None, "lost"))
                continue
            tracked[tl.task] = t  # poll() reports it (exit file or lost) once it is gone
        if not tracked:
            self._tasks.pop(request.job_id, None)

    def host_address(self, node: str) -> str:
        """Every task runs here, whatever node the core chose."""
        return "127.0.0.1"

    async def close(self) -> None:
        """Tasks keep running (a restarted server adopts them); the spare log copier leaves, and the records of
        the acknowledged exits go."""
        self._forget_acknowledged()
        self._copiers.close()
        if self._gpu_sweep is not None:
            self._gpu_sweep.close()
