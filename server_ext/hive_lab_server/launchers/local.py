"""The ``local`` launcher: every task is a subprocess on this machine.

Each task runs in its own session (so its own process group) and working dir, with stdout and
stderr appended to its log file. A tiny ``/bin/sh`` wrapper records the task's exit code in a
file, and the launcher writes ``<state_dir>/<job>/<task>.json`` (pid + process start time), so
tasks keep running when the server dies (even by SIGKILL) and a restarted server finds them again:
``running()`` lists live ones, ``adopt()`` tracks them, and ``poll()`` reports exits that happened
while the server was down (from the exit files; ``lost`` when there is none).

It runs everything as the server's own user, so it is meant for single-user machines and trusted
groups; use the docker launcher to isolate users.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import pathlib
import signal
import subprocess
import time
from dataclasses import dataclass

from typing import Any

import psutil
from traitlets import List, Unicode

from .base import LaunchError, Launcher, LaunchRequest, TaskExit

__all__ = ["LocalLauncher"]

# Runs "$1" with /bin/sh and writes its exit status to "$2". TERM/INT/HUP are caught (not ignored,
# so the task itself still gets them) to let the wrapper outlive the task and record its status.
WRAPPER = 'trap : TERM INT HUP\n/bin/sh -c "$1"\ncode=$?\nprintf "%s\\n" "$code" > "$2.tmp" && mv -f "$2.tmp" "$2"\nexit $code\n'

# Server secrets the tasks must not inherit.
SECRET_ENV = ("JUPYTER_TOKEN", "JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN", "JUPYTER_TOKEN_FILE", "JUPYTERHUB_OAUTH_CLIENT_SECRET")

log = logging.getLogger(__name__)


@dataclass
class _Task:
    job_id: str
    task: str
    pid: int
    create_time: float
    proc: subprocess.Popen | None  # None when adopted after a restart (not our child)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


class LocalLauncher(Launcher):
    name = "local"
    supports_images = False  # tasks are processes on this machine

    hidden_env = List(Unicode(), list(SECRET_ENV), config=True,
                      help="environment variables of the server that tasks do not inherit (its secrets)")

    def __init__(self, state_dir: str | os.PathLike, base_env: dict[str, str] | None = None, *,
                 parent: Any = None, config: Any = None, **traits: Any):
        traits = {k: v for k, v in traits.items() if k in self.class_trait_names() and v is not None}  # not jobs_root ...
        super().__init__(parent=parent, config=config, **traits)
        self.state_dir = pathlib.Path(state_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ if base_env is None else base_env)
        for key in self.hidden_env:
            env.pop(key, None)
        self.base_env = env
        self._tasks: dict[str, dict[str, _Task]] = {}
        self._pending: list[TaskExit] = []
        self._scanned = False
        self._reported: set[tuple[str, str]] = set()  # orphan exits reported, not yet acknowledged

    # --- files --------------------------------------------------------------------------------

    def _paths(self, job_id: str, task: str) -> tuple[pathlib.Path, pathlib.Path]:
        d = self.state_dir / _safe(job_id)
        return d / f"{_safe(task)}.json", d / f"{_safe(task)}.exit"

    def _forget(self, job_id: str, task: str) -> None:
        info, exitf = self._paths(job_id, task)
        for p in (info, exitf, exitf.with_suffix(".exit.tmp")):
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

    async def start(self, request: LaunchRequest) -> None:
        started: list[_Task] = []
        try:
            for tl in request.tasks:
                info, exitf = self._paths(request.job_id, tl.task)
                info.parent.mkdir(parents=True, exist_ok=True)
                for p in (info, exitf):
                    p.unlink(missing_ok=True)
                pathlib.Path(tl.log_path).parent.mkdir(parents=True, exist_ok=True)
                env = dict(self.base_env)
                env.update(tl.env)
                with open(tl.log_path, "ab", buffering=0) as logf:
                    proc = subprocess.Popen(
                        ["/bin/sh", "-c", WRAPPER, "hive-task", tl.command, str(exitf)],
                        cwd=tl.working_dir,
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=logf,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                        close_fds=True,
                    )
                try:
                    ctime = psutil.Process(proc.pid).create_time()
                except psutil.NoSuchProcess:  # already gone: still ours to reap
                    ctime = 0.0
                t = _Task(request.job_id, tl.task, proc.pid, ctime, proc)
                started.append(t)
                tmp = info.with_suffix(".json.tmp")
                tmp.write_text(json.dumps({"job_id": request.job_id, "task": tl.task, "pid": proc.pid,
                                           "create_time": ctime, "log_path": tl.log_path}))
                os.replace(tmp, info)
        except OSError as exc:
            for t in started:
                self._signal(t, signal.SIGKILL)
                if t.proc is not None:
                    t.proc.wait()
                self._forget(t.job_id, t.task)
            raise LaunchError(f"cannot start task {tl.task} of {request.job_id}: {exc.strerror or exc}") from exc
        self._tasks[request.job_id] = {t.task: t for t in started}

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
        for t in tasks:  # leftovers of the task (its own background processes)
            try:
                os.killpg(t.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def _exit_of(self, t: _Task) -> TaskExit:
        _, exitf = self._paths(t.job_id, t.task)
        code = self._read_exit(exitf)
        if code is not None:
            return TaskExit(t.job_id, t.task, code, "")
        if t.proc is not None and t.proc.returncode is not None:
            rc = t.proc.returncode
            if rc < 0:
                return TaskExit(t.job_id, t.task, 128 - rc, f"killed by {signal.Signals(-rc).name}")
            return TaskExit(t.job_id, t.task, rc, "")
        return TaskExit(t.job_id, t.task, None, "lost")

    async def poll(self) -> list[TaskExit]:
        out, self._pending = self._pending, []
        if not self._scanned:
            self._scanned = True
            out.extend(self._scan_orphan_exits())
        for job_id in list(self._tasks):
            tasks = self._tasks[job_id]
            for name in list(tasks):
                t = tasks[name]
                if self._alive(t):
                    continue
                out.append(self._exit_of(t))
                try:  # the task's own leftovers go with it
                    os.killpg(t.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                del tasks[name]  # its records stay until the service acknowledges the exit (ack)
            if not tasks:
                del self._tasks[job_id]
        return out

    def _records(self):
        for info in sorted(self.state_dir.glob("*/*.json")):
            try:
                rec = json.loads(info.read_text())
                yield _Task(rec["job_id"], rec["task"], int(rec["pid"]), float(rec["create_time"]), None)
            except (OSError, ValueError, KeyError):
                continue

    def _scan_orphan_exits(self) -> list[TaskExit]:
        """Exits of tasks started by an earlier server process that nobody adopted."""
        out = []
        for t in self._records():
            if t.task in self._tasks.get(t.job_id, {}) or self._alive(t):
                continue
            out.append(self._exit_of(t))
            self._reported.add((t.job_id, t.task))
        return out

    def ack(self, exits: list[TaskExit]) -> None:
        for e in exits:
            self._reported.discard((e.job_id, e.task))
            self._forget(e.job_id, e.task)

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
        tracked = self._tasks.setdefault(request.job_id, {})
        for tl in request.tasks:
            if tl.task in tracked:
                continue
            info, _ = self._paths(request.job_id, tl.task)
            try:
                rec = json.loads(info.read_text())
                t = _Task(request.job_id, tl.task, int(rec["pid"]), float(rec["create_time"]), None)
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
        """Tasks keep running (a restarted server adopts them)."""
