"""One thread per running container: copy its logs into the task's log file, then record how it ended.

The docker SDK blocks, so each task's follow-stream lives in its own daemon thread (never on the event
loop). Logs are always written from the container's first byte at file offset 0: the bytes are the
same every time (Docker keeps the container's whole log until the container is removed), so after a
server restart (``adopt``) or a lost daemon connection the thread simply streams again from the start,
rewriting identical bytes and then appending, with no duplicated or missing lines. Once the container
has stopped, its exit code and ``State.OOMKilled`` become the ``TaskExit``; the launcher removes the
container only after the service has stored that exit (``ack``), so a crash in between loses nothing. A
container created but never started (the server died between the two calls) is reported as such: nobody
will start it, and recovery must not wait for it.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Callable

from hive_lab_server.execution.launchers.base import TaskExit

log = logging.getLogger(__name__)

FINAL_STATES = ("exited", "dead")


class ContainerWatcher(threading.Thread):
    def __init__(
        self,
        client_factory: Callable[[], object],
        container_id: str,
        job_id: str,
        task: str,
        log_path: str,
        report: Callable[[TaskExit, str], None],
        stopped_by_us: Callable[[], bool],
        append: bool = False,
    ):
        super().__init__(name=f"hive-docker-{job_id}-{task}", daemon=True)
        # a fresh attempt's container writes after the earlier attempts' output (a job paused, migrated
        # or preempted keeps one log, as with the other launchers); an adopted one rewrites the log
        self.base = os.path.getsize(log_path) if append and os.path.exists(log_path) else 0
        self.client_factory = client_factory
        self.container_id = container_id
        self.job_id = job_id
        self.task = task
        self.log_path = log_path
        self.report = report
        self.stopped_by_us = stopped_by_us
        self.closing = threading.Event()
        self.finished = threading.Event()
        self._stream = None

    def close(self) -> None:
        """Stop watching (the container keeps running)."""
        self.closing.set()
        stream = self._stream
        if stream is not None:
            try:
                stream.close()
            except Exception:
                pass

    def run(self) -> None:
        try:
            self._run()
        finally:
            self.finished.set()

    def _run(self) -> None:
        import docker.errors
        import requests.exceptions

        backoff = 0.2
        while not self.closing.is_set():
            try:
                client = self.client_factory()
                container = client.containers.get(self.container_id)
                self._copy_logs(container)
                if self.closing.is_set():
                    return
                container.reload()
                if container.status in FINAL_STATES:
                    self._finish(container)
                    return
                if container.status == "created":  # only a crashed launch leaves one (start follows create)
                    self.report(TaskExit(self.job_id, self.task, None, "never started: the server stopped "
                                         "between creating and starting its container"), container.id)
                    return
                # the stream ended while the container runs: the daemon went away and came back
            except docker.errors.NotFound:
                self.report(TaskExit(self.job_id, self.task, None, "lost: the container disappeared"), "")
                return
            except (requests.exceptions.RequestException, docker.errors.DockerException, OSError) as exc:
                if self.closing.is_set():
                    return
                log.warning("docker: watching %s/%s: %s; retrying", self.job_id, self.task, exc)
            self.closing.wait(backoff)
            backoff = min(backoff * 2, 5.0)

    def _copy_logs(self, container) -> None:
        os.makedirs(os.path.dirname(self.log_path) or ".", exist_ok=True)
        mode = "r+b" if os.path.exists(self.log_path) else "wb"
        with open(self.log_path, mode) as out:
            out.seek(self.base)
            stream = container.logs(stream=True, follow=True, stdout=True, stderr=True)
            self._stream = stream
            try:
                for chunk in stream:
                    out.write(chunk)
                    out.flush()
            finally:
                self._stream = None
            if not self.closing.is_set():
                out.truncate()

    def _finish(self, container) -> None:
        state = container.attrs.get("State", {})
        code = state.get("ExitCode")
        if state.get("OOMKilled"):
            reason = "OOMKilled"
        elif self.stopped_by_us():
            reason = "stopped"
        elif state.get("Error"):
            reason = state["Error"]
        else:
            reason = ""
        self.report(TaskExit(self.job_id, self.task, code, reason), container.id)
