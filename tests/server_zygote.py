"""Test servers forked from one warm interpreter (a zygote), instead of a fresh ``python -m jupyter_server``.

A fresh server spends most of its start-up CPU importing: jupyter_server, jsonschema's format checkers (one
of them compiles some 40 Lark grammars), JupyterLab and hive-lab, about 3 of its 5 CPU seconds. The suite
starts hundreds of servers on a 2-core machine, so each pytest-xdist worker keeps one zygote that has
imported all of that once, and forks it for each server. The child is then the same program a fresh start
would run: it takes the caller's whole environment, working directory, argv and log file, starts a new
session, and runs the same entry point (``jupyter_server``'s or ``jupyterlab.labapp``'s ``main``); only the
imports are shared. Nothing in those packages reads the environment at import time that a test sets
(``tests/test_server_zygote.py`` checks the product's code for it); a server asked for with a different
``PYTHON*`` or ``LD_*`` variable (a test's own modules on ``PYTHONPATH``) is started fresh instead
(:func:`forkable`).

The zygote speaks JSON lines on its stdin/stdout: ``{"op": "spawn", ...}`` -> ``{"pid": N}``;
``{"op": "poll", "pid": N}`` -> ``{"returncode": null | int}`` (a signal as ``-signum``, as ``Popen`` says).
A server is the zygote's child, so only the zygote can reap it: :class:`ForkedServer` asks it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

#: what a server start imports: the server, its enabled extensions, and hive-lab's launchers (imported
#: lazily by the app, by name, on first use).
WARM_MODULES = (
    "jupyter_server.serverapp", "jupyter_server.__main__", "jupyterlab.labapp", "jupyterlab_server",
    "jupyter_lsp", "jupyter_server_terminals", "notebook_shim", "notebook.app",
    "hive_lab_server", "hive_lab_server.app",
    "hive_lab_server.execution.launchers.local", "hive_lab_server.execution.launchers.docker",
    "hive_lab_server.execution.launchers.slurm",
    "jupyter_client.manager", "jupyter_client.provisioning",
)

#: environment variables read when an interpreter starts (not later): a server asked for with other values
#: than the zygote's own must be a fresh interpreter.
START_TIME_PREFIXES = ("PYTHON", "LD_")


def forkable(env: dict[str, str], zygote_env: dict[str, str]) -> bool:
    keys = {k for k in set(env) | set(zygote_env) if k.startswith(START_TIME_PREFIXES) and k != "PYTHONUNBUFFERED"}
    return all(env.get(k) == zygote_env.get(k) for k in keys)


class Zygote:
    """The worker's handle on its zygote process (started on first use, ended with the worker)."""

    def __init__(self) -> None:
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self._lock = threading.Lock()
        self.proc = subprocess.Popen(
            [sys.executable, "-c",
             f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); import server_zygote; server_zygote.serve()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=self.env, cwd="/", text=True, bufsize=1)
        ready = self.proc.stdout.readline()
        if json.loads(ready or "{}").get("ready") is not True:
            raise RuntimeError(f"the server zygote did not start: {ready!r}")

    def ask(self, request: dict) -> dict:
        with self._lock:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            answer = self.proc.stdout.readline()
        if not answer:
            raise RuntimeError("the server zygote ended")
        return json.loads(answer)

    def spawn(self, argv: list[str], env: dict[str, str], cwd: str, log: str, lab: bool) -> "ForkedServer":
        pid = self.ask({"op": "spawn", "argv": argv, "env": env, "cwd": cwd, "log": log, "lab": lab})["pid"]
        return ForkedServer(self, pid)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class ForkedServer:
    """The part of ``subprocess.Popen`` a LiveServer uses, for a server the zygote forked."""

    def __init__(self, zygote: Zygote, pid: int):
        self.zygote = zygote
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.zygote.ask({"op": "poll", "pid": self.pid})["returncode"]
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"server {self.pid}", timeout)
            time.sleep(0.02)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # not reaped, so the pid is still this server's (a zombie at worst)
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


# --- the zygote process --------------------------------------------------------------------------------

def serve() -> None:
    import importlib

    for name in WARM_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # an extension this environment does not have
    if threading.active_count() != 1:  # a fork copies only the calling thread
        raise RuntimeError(f"importing the server started threads: {threading.enumerate()}")
    sys.path.pop(0)  # this file's directory, put there to import it
    _say({"ready": True})
    exited: dict[int, int] = {}
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "spawn":
            pid = os.fork()
            if pid == 0:
                _run_server(request)  # never returns
            _say({"pid": pid})
        elif request["op"] == "poll":
            pid = request["pid"]
            if pid not in exited:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    exited[pid] = os.waitstatus_to_exitcode(status)
            _say({"returncode": exited.get(pid)})
    os._exit(0)  # the worker is done with it; nothing here to clean up, and a full teardown costs seconds


def _say(answer: dict) -> None:
    os.write(1, (json.dumps(answer) + "\n").encode())


def _run_server(request: dict) -> None:
    """In the forked child: become the server process ``python -m jupyter_server <argv>`` would be."""
    code: object = 1
    try:
        os.setsid()
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(null)
        os.close(log)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.path.insert(0, os.getcwd())  # what `python -m` puts first
        sys.argv = list(request["argv"])
        if request["lab"]:
            from jupyterlab.labapp import main
        else:
            from jupyter_server.serverapp import main
        try:
            main()
            code = 0
        except SystemExit as stop:
            code = stop.code
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    raise SystemExit(code)  # a normal interpreter exit from here: atexit handlers run, as in a fresh server
