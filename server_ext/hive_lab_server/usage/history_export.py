"""The store's jobs as a history trace the simulator replays (``GET history``, ``hive-lab admin history``).

``history_rows(jobs, usage, since, until)`` is a pure function of stored rows (``jobs`` and ``job_usage``)
to rows of :data:`hive_scheduler.sim.history.HISTORY_COLUMNS`:

- the jobs submitted in ``[since, until]``, plus those submitted before and still queued or holding GPUs
  at ``since`` (``carried_over``: submitted at 0, with their run time inside the window);
- ``duration_s``: the seconds the job held GPUs (each attempt from placement to release, the usage
  records), all attempts together; a job still running counts up to ``until``;
- ``observed_wait_s``: submit to first placement, plus every gap between attempts (preempted and queued
  again, paused); a job that never ran waited until it left the queue (``end_time_s``) or ``until``;
- owners are pseudonyms (``user-001`` in order of first submit) unless ``real_names``; the groups kept
  (fair share's upper level) are VC-level groups, not people.
"""

from __future__ import annotations

import json
import math
from typing import Any, Iterable

from hive_scheduler.sim.history import HISTORY_COLUMNS

from hive_lab_server.wire.launch_spec import LaunchSpec, LaunchTaskGroup

__all__ = ["history_rows", "live_policy", "HISTORY_COLUMNS"]


def live_policy(queue_policy: str, overflow: bool, backfill: bool) -> dict[str, Any]:
    """How the live scheduler decides, in the replay's terms. A Gavel policy (rounds) is replayed as
    fifo inside each VC, and says so."""
    from hive_scheduler.policies import ORDERS

    order = queue_policy if queue_policy in ORDERS else "fifo"
    out = {"order": order, "overflow": bool(overflow), "queueing": "backfill" if backfill else "skip"}
    if order != queue_policy:
        out["note"] = (f"the live queue policy {queue_policy!r} decides in rounds, which the replay does not "
                       "model; the replay orders jobs fifo inside each VC")
    return out


def _tasks(spec: LaunchSpec, gpus: int) -> list[dict[str, Any]]:
    tasks = spec.tasks or (LaunchTaskGroup("main", 1, gpus),)
    return [{"name": t.name or "main", "count": int(t.count or 1), "gpus": t.gpus,
             **({"gpu_type": t.gpu_type} if t.gpu_type else {})} for t in tasks]


def _num(x: float) -> float | int:
    x = round(x, 3)
    return int(x) if x == int(x) else x


def history_rows(jobs: Iterable[dict[str, Any]], usage: Iterable[dict[str, Any]], since: float, until: float,
                 real_names: bool = False) -> list[dict[str, Any]]:
    attempts: dict[str, list[dict[str, Any]]] = {}
    for u in usage:
        attempts.setdefault(u["job_id"], []).append(u)
    names: dict[str, str] = {}
    chosen = []
    for job in sorted(jobs, key=lambda j: (j["submitted_at"], j["seq"])):
        submitted = float(job["submitted_at"])
        if submitted > until:
            continue
        held = sorted(attempts.get(job["id"], []), key=lambda a: (a["started_at"], a["attempt"]))
        carried = submitted < since
        if carried:
            ended_before = job.get("finished_at") is not None and job["finished_at"] <= since
            if ended_before:
                continue
        chosen.append((job, held, carried))
    for job, _, _ in chosen:
        names.setdefault(job["user"], job["user"])
    if not real_names:
        width = max(3, len(str(len(names))))
        names = {user: f"user-{i:0{width}d}" for i, user in enumerate(names, start=1)}
    rows = []
    for job, held, carried in chosen:
        submitted = float(job["submitted_at"])
        start_of_window = since if carried else submitted
        duration = 0.0
        wait = 0.0
        free_since = start_of_window  # waiting since (submit, or the end of the last attempt)
        for a in held:
            begin = max(float(a["started_at"]), start_of_window)
            end = min(float(a["ended_at"]) if a.get("ended_at") is not None else until, until)
            if end <= start_of_window:
                continue
            wait += max(0.0, begin - free_since)
            duration += max(0.0, end - begin)
            free_since = end
        ran = any((a.get("ended_at") is None or a["ended_at"] > start_of_window) for a in held)
        end_time = None
        if not ran:
            left = job.get("finished_at")
            if left is not None and left <= until:
                end_time = float(left) - since
                wait = float(left) - start_of_window
            else:
                wait = until - start_of_window
        gpus = int(job.get("gpus") or 0)
        spec = LaunchSpec.of(job.get("spec") or {})
        tasks = _tasks(spec, gpus)
        rows.append({
            "job_id": job["id"],
            "submit_time_s": _num(max(0.0, submitted - since)),
            "duration_s": _num(duration) if ran else None,
            "num_gpus": sum(t["count"] * math.ceil(t["gpus"]) for t in tasks),
            "gpu_type": job.get("gpu_type") or "",
            "vc": job["vc"],
            "user": names[job["user"]],
            "status": job["state"],
            "priority": int(job.get("priority") or 0),  # the core's: -1 opportunistic
            "kind": job.get("kind") or "batch",
            "user_group": job.get("user_group") or "",
            "time_limit_s": spec.time_limit_s,
            "tasks": json.dumps(tasks, separators=(",", ":"), sort_keys=True),
            "observed_wait_s": _num(wait),
            "end_time_s": None if end_time is None else _num(end_time),
            "carried_over": 1 if carried else 0,
        })
    return rows
