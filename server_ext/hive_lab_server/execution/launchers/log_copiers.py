"""The log copiers of the local launcher's tasks (``isolation/log_limit.py``), one kept started ahead.

A task's start used to spawn two processes, its log copier and its wrapper, one after the other before the
task could run; each spawn waits for the new process to exec, which on a busy machine is a scheduler wait
(issue 40: submit -> running). ``LogCopiers`` keeps one spare copier started ahead (``refill``, off the
path): it has dropped to its unprivileged account already and waits on a Unix socket for a task's pipe and
log (SCM_RIGHTS), so a start hands it those two descriptors instead of spawning. Without a spare (the first
task, or tasks started faster than spares are) a copier is spawned on the spot, as before.

Nothing is weaker than a copier spawned per task: the spare runs as the same account (``nobody`` when the
server is root), in its own session, with the same environment built from scratch, and it sees the task's
output only after it dropped privileges. A spare whose launcher is gone (closed, or the server died) reads
EOF on its socket and leaves.
"""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys
import threading

LOG_LIMITER = str(pathlib.Path(__file__).resolve().parent.parent / "isolation" / "log_limit.py")


class LogCopiers:
    """Starts copiers of at most ``limit`` bytes each, run as ``ids`` (uid, gid; None: the server's own)
    with environment ``env``."""

    def __init__(self, limit: int, ids: tuple[int, int] | None, env: dict[str, str]):
        self.limit = limit
        self.ids = ids
        self.env = env
        self._lock = threading.Lock()
        self._spare: tuple[subprocess.Popen, socket.socket] | None = None
        self._refilling = False
        self._closed = False

    def _argv(self, source: str) -> list[str]:
        argv = [sys.executable, "-I", "-S", LOG_LIMITER, str(self.limit), source]
        return argv + [str(self.ids[0]), str(self.ids[1])] if self.ids is not None else argv

    def start(self, pipe_r: int, logfd: int) -> int:
        """A copier from ``pipe_r`` into ``logfd`` (both stay the caller's to close): its pid."""
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is not None:
            proc, sock = spare
            try:
                socket.send_fds(sock, [b"t"], [pipe_r, logfd])
                return proc.pid
            except OSError:  # the spare is gone (killed): spawn one instead
                proc.poll()
            finally:
                sock.close()
        return subprocess.Popen(self._argv(str(logfd)), stdin=pipe_r, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=self.env, cwd="/", pass_fds=(logfd,),
                                start_new_session=True, close_fds=True).pid

    def refill(self) -> None:
        """Start a spare when there is none (blocking: a spawn; run it off the event loop)."""
        with self._lock:
            if self._spare is not None or self._refilling or self._closed:
                return
            self._refilling = True
        try:
            ours, theirs = socket.socketpair()
            try:
                proc = subprocess.Popen(self._argv("--receive"), stdin=theirs, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, env=self.env, cwd="/",
                                        start_new_session=True, close_fds=True)
            except BaseException:
                ours.close()
                raise
            finally:
                theirs.close()
            with self._lock:
                if self._closed:
                    ours.close()  # (it leaves on EOF)
                else:
                    self._spare = (proc, ours)
        finally:
            with self._lock:
                self._refilling = False

    def close(self) -> None:
        """The spare leaves (EOF on its socket); copiers serving tasks go on."""
        with self._lock:
            self._closed = True
            spare, self._spare = self._spare, None
        if spare is not None:
            spare[1].close()
            try:
                spare[0].wait(timeout=5)  # (reaped: no zombie left behind)
            except subprocess.TimeoutExpired:
                pass
