"""The ``Job`` handle returned by ``%%submit`` and ``Client.handle``."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

from .format import FINISHED, status_line


class Job:
    """A job on the server. Attributes read the last fetched state; ``status`` fetches anew."""

    monitor = None  # its live display in a kernel (hive_lab.widgets.job_monitor), once shown
    watcher = None  # the thread keeping that display current

    def __init__(self, client, job: str | dict):
        self.client = client
        if isinstance(job, dict):
            self.id = job["id"]
            self.info = job
        else:
            self.id = job
            self.info = {"id": job}

    # -- state -----------------------------------------------------------------------------------

    def refresh(self) -> dict:
        self.info = self.client.job(self.id)
        return self.info

    @property
    def status(self) -> str:
        """The job's state now (``queued``, ``running``, ``succeeded`` ...), fetched from the server."""
        return self.refresh()["state"]

    @property
    def state(self) -> str:
        """The last known state (no request)."""
        return self.info.get("state", "unknown")

    @property
    def done(self) -> bool:
        return self.state in FINISHED

    @property
    def reason(self) -> str | None:
        return self.info.get("reason")

    @property
    def exit_code(self) -> int | None:
        return self.info.get("exit_code")

    def wait(self, timeout: float | None = None, *, on_change=None) -> "Job":
        """Block until the job has finished (``TimeoutError`` after ``timeout`` s). ``on_change(info)``
        is called whenever the state or reason changes."""
        deadline = None if timeout is None else time.monotonic() + timeout
        delay, last = 0.1, None
        while True:
            info = self.refresh()
            key = (info.get("state"), info.get("reason"))
            if key != last:
                last = key
                delay = 0.1
                if on_change is not None:
                    on_change(info)
            if info.get("state") in FINISHED:
                return self
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {self.id} is still {info.get('state')} after {timeout:g} s")
            time.sleep(delay if deadline is None else max(0.0, min(delay, deadline - time.monotonic())))
            delay = min(delay * 1.5, 2.0)

    # -- actions ---------------------------------------------------------------------------------

    def cancel(self) -> dict:
        self.info = self.client.cancel(self.id)
        return self.info

    def pause(self, reason: str = "") -> dict:
        """Pause the job (checkpoint signal if it runs; out of the queue until ``resume()``)."""
        self.info = self.client.pause(self.id, reason)
        return self.info

    def resume(self, reason: str = "") -> dict:
        """Queue the paused job again; it starts with ``HIVE_RESUMED=1``."""
        self.info = self.client.resume(self.id, reason)
        return self.info

    def migrate(self, gpu_type: str, reason: str = "") -> dict:
        """Admins: move the job to GPUs of ``gpu_type`` through a checkpoint."""
        self.info = self.client.migrate(self.id, gpu_type, reason)
        return self.info

    def resize(self, gpus: int, reason: str = "") -> dict:
        """Admins: give the elastic job ``gpus`` GPUs (within its ``min_gpus``..``max_gpus``)."""
        self.info = self.client.resize(self.id, gpus, reason)
        return self.info

    def logs(self, task: str | None = None) -> str:
        """The task's log so far (the first task when not named)."""
        return self.client.log_text(self.id, task=task)

    def follow(self, task: str | None = None, offset: int = 0) -> Iterator[str]:
        """Log text as it is written, until the task ends."""
        return self.client.follow_logs(self.id, task=task, offset=offset)

    def outputs(self) -> list[dict]:
        """Files the job wrote to its output dir: ``[{"path": "model.pt", "size": 123}]``."""
        return self.client.outputs(self.id)

    def read_output(self, path: str) -> bytes:
        return self.client.output(self.id, path)

    def download(self, dest: str | os.PathLike = ".") -> list:
        """Copy the output files into ``dest``; returns the local paths."""
        return self.client.download_outputs(self.id, dest)

    # -- display ---------------------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"<Job {status_line(self.info)}>"

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(repr(self))

    def _ipython_display_(self) -> None:
        """A cell's result: in a kernel a display that follows the job until it ends (never a stale
        "scheduled"); see ``hive_lab.widgets.job_monitor.display_job``."""
        from .widgets.job_monitor import display_job

        display_job(self)
