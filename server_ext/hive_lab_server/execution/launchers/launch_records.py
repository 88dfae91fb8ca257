"""Launches a cluster engine accepted, written down before they are submitted and kept until the service
has stored their exits (``ack``).

The engine (Slurm) is the record of a job while it is queued or running, but it forgets a job soon after
it ends. A server that dies between ``sbatch`` and storing the job's start, and comes back after the job
ended, would otherwise find nothing and run it again. With a record written first, a restarted launcher
knows every launch that may have happened and reports each task's exit (its exit file, else lost).
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib

from hive_lab_server.execution.staging import write_private


class LaunchRecords:
    """``<dir>/<job>.json``: ``{"job_id": ..., "tasks": {task: log path}}`` of the tasks not acknowledged."""

    def __init__(self, directory: pathlib.Path):
        self.dir = pathlib.Path(directory)

    def _path(self, job_id: str) -> pathlib.Path:
        return self.dir / f"{hashlib.sha1(job_id.encode()).hexdigest()[:20]}.json"

    def write(self, job_id: str, tasks: dict[str, str]) -> None:
        """Before the engine is asked: from here on, a restart reports these tasks."""
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)
        write_private(self._path(job_id), json.dumps({"job_id": job_id, "tasks": tasks}))

    def forget(self, job_id: str, tasks: set[str] | None = None) -> None:
        """The service stored these tasks' exits (or the engine refused the job): their record goes."""
        path = self._path(job_id)
        left = {} if tasks is None else {t: p for t, p in self.tasks_of(job_id).items() if t not in tasks}
        if left:
            write_private(path, json.dumps({"job_id": job_id, "tasks": left}))
        else:
            path.unlink(missing_ok=True)

    def tasks_of(self, job_id: str) -> dict[str, str]:
        try:
            return dict(json.loads(self._path(job_id).read_text())["tasks"])
        except (OSError, ValueError, KeyError, TypeError):
            return {}

    def all(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        for path in sorted(self.dir.glob("*.json")) if self.dir.is_dir() else ():
            try:
                rec = json.loads(path.read_text())
                out[str(rec["job_id"])] = {str(t): str(p) for t, p in rec["tasks"].items()}
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                continue
        return out
