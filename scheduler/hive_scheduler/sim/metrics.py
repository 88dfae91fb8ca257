"""Metrics of one replay, computed from the submit events and the decision stream alone.

Definitions (times in seconds):

- ``jobs``: submitted jobs; ``finished``, ``rejected``, ``unfinished`` (still waiting or running at the end).
- JCT (job completion time): ``finished`` time minus submit time, over finished jobs that started
  (a queued job withdrawn by ``finish`` is not completed work and is left out).
- queueing delay: total time a job waited to run (from submit to its first start, plus every wait
  after a preemption), over jobs that started.
- ``makespan``: the last ``finished`` decision minus the first submit.
- ``gpu_utilisation``: busy GPU-seconds / (cluster GPUs x makespan); a job's GPUs count from its
  ``started`` to its ``finished`` / ``preempted`` (a demoted job keeps running and keeps counting).
- ``preemptions``: ``preempted`` decisions.
- ``waits`` (per job, not printed): the time the job waited, ended by its start, its withdrawal, its
  rejection or the end of the replay; several waits after preemptions add up.
- sharing anomaly (HiveD, OSDI'20 sec. 2): the extra queueing a tenant suffers in the shared cluster
  compared with a private cluster made of exactly its own cells (the ``private`` policy,
  :mod:`hive_scheduler.sim.private`). Per guaranteed job (priority >= 0, at least one GPU):
  ``max(0, wait(policy) - wait(private))``; ``sharing_anomaly_s`` is their sum and
  ``sharing_anomaly_jobs`` counts the jobs where it is above zero. ``None`` when no private replay
  was given (``reference``).
- ``held_gpu_s``: GPU-seconds a VC's cells stayed held after a job's end, so that they keep the timing of
  its private cluster (the overflow lever's ghosts, :mod:`hive_scheduler.overflow`): the price of a
  sharing anomaly of 0 with overflow. ``None`` (and left out of ``to_dict``) for runs without them.
- ``by_vc``: per VC, ``jobs``, ``avg_queue_s`` (as above, over its jobs that started) and its share of the
  sharing anomaly (``sharing_anomaly_s``, ``sharing_anomaly_jobs``).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping

from .events import SubmitEvent

__all__ = ["Metrics", "compute_metrics", "percentile", "user_wait_spread"]


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method); 0.0 for no values."""
    if not values:
        return 0.0
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass
class Metrics:
    policy: str
    jobs: int
    finished: int
    rejected: int
    unfinished: int
    avg_jct_s: float
    median_jct_s: float
    p95_jct_s: float
    avg_queue_s: float
    p95_queue_s: float
    makespan_s: float
    gpu_utilisation: float
    preemptions: int
    sharing_anomaly_s: float | None
    sharing_anomaly_jobs: int | None
    by_vc: dict[str, dict[str, Any]] = field(default_factory=dict)
    # fairness between users: spread of the users' average waits (None with fewer than 2 users)
    user_wait_spread: dict[str, Any] | None = None
    held_gpu_s: float | None = None  # set by ``simulate`` for hived with overflow (see above)
    waits: dict[str, float] = field(default_factory=dict, repr=False)  # per job; left out of to_dict

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        del out["waits"]
        if out["held_gpu_s"] is None:  # (only runs with the ghosts have the figure)
            del out["held_gpu_s"]
        return out


def _gpus_of(placement: Iterable[Mapping[str, Any]] | None) -> int:
    return sum(len(p.get("gpus") or ()) for p in placement or ())


def compute_metrics(
    policy: str,
    submits: Iterable[SubmitEvent],
    decisions: Iterable[Mapping[str, Any]],
    total_gpus: int,
    reference: Mapping[str, float] | str | None = None,
) -> Metrics:
    """``decisions``: the decision lines (dicts) in the order they happened; ``reference``: the per-job
    waits of the ``private`` replay of the same events (``Metrics.waits``), for the sharing anomaly
    (``"self"``: this replay is the private one, its anomaly is 0)."""
    jobs = {s.job: s for s in submits}
    # Submits and decisions each come in time order; merged, submits go before decisions at the same time.
    pending = sorted(jobs.values(), key=lambda s: s.t)  # stable: file order at one instant
    waiting_since: dict[str, float] = {}
    queue_total: dict[str, float] = {}  # every wait, whatever ended it
    queue_ran: dict[str, float] = {}  # the waits that ended with a start
    started_once: set[str] = set()
    running_gpus: dict[str, int] = {}
    running_since: dict[str, float] = {}
    finished_at: dict[str, float] = {}
    rejected: set[str] = set()
    preemptions = 0
    busy_gpu_s = 0.0

    def wait_end(job: str, t: float, ran: bool = False) -> None:
        since = waiting_since.pop(job, None)
        if since is not None:
            queue_total[job] = queue_total.get(job, 0.0) + (t - since)
            if ran:
                queue_ran[job] = queue_ran.get(job, 0.0) + (t - since)

    def stop_running(job: str, t: float) -> None:
        nonlocal busy_gpu_s
        if job in running_since:
            busy_gpu_s += running_gpus.pop(job) * (t - running_since.pop(job))

    end_t = 0.0
    i, n_pending = 0, len(pending)
    next_submit = pending[0].t if pending else math.inf
    # (the loop runs once per decision: wait_end / stop_running are written out in it)
    for d in decisions:
        t = float(d["t"])
        while next_submit <= t:
            waiting_since[pending[i].job] = float(next_submit)
            i += 1
            next_submit = pending[i].t if i < n_pending else math.inf
        end_t = t
        job, event = d["job"], d["event"]
        if event == "started":
            since = waiting_since.pop(job, None)
            if since is not None:
                queue_total[job] = queue_total.get(job, 0.0) + (t - since)
                queue_ran[job] = queue_ran.get(job, 0.0) + (t - since)
            started_once.add(job)
            placement = d.get("placement")
            running_gpus[job] = len(placement[0].get("gpus") or ()) if placement and len(placement) == 1 \
                else _gpus_of(placement)  # (_gpus_of, written out for the common one-task job)
            running_since[job] = t
        elif event == "finished":
            if job in running_since:
                busy_gpu_s += running_gpus.pop(job) * (t - running_since.pop(job))
            since = waiting_since.pop(job, None)
            if since is not None:
                queue_total[job] = queue_total.get(job, 0.0) + (t - since)
            finished_at[job] = t
        elif event == "preempted":
            preemptions += 1
            stop_running(job, t)
            waiting_since[job] = t
        elif event == "rejected":
            wait_end(job, t)
            rejected.add(job)
    while i < n_pending:  # submits after the last decision
        waiting_since[pending[i].job] = end_t = float(pending[i].t)
        i += 1

    for job in list(running_since):
        stop_running(job, end_t)
    for job in list(waiting_since):
        wait_end(job, end_t)
    waits = {j: queue_total.get(j, 0.0) for j in jobs}

    anomaly: dict[str, float] | None = None
    if reference == "self":
        reference = waits
    if reference is not None:
        anomaly = {}
        for j, s in jobs.items():
            if s.priority >= 0 and s.gpus > 0:
                extra = waits[j] - reference.get(j, 0.0)
                if extra > 1e-9:
                    anomaly[j] = extra

    jct = [finished_at[j] - jobs[j].t for j in finished_at if j in jobs and j in started_once]
    queue = [queue_ran.get(j, 0.0) for j in started_once if j in jobs]
    by_vc: dict[str, dict[str, Any]] = {}
    for j, s in jobs.items():
        row = by_vc.setdefault(s.vc, {"jobs": 0, "started": 0, "queue_s": 0.0, "sharing_anomaly_s": None,
                                      "sharing_anomaly_jobs": None})
        row["jobs"] += 1
        if j in started_once:
            row["started"] += 1
            row["queue_s"] += queue_ran.get(j, 0.0)
        if anomaly is not None:
            row["sharing_anomaly_s"] = (row["sharing_anomaly_s"] or 0.0) + anomaly.get(j, 0.0)
            row["sharing_anomaly_jobs"] = (row["sharing_anomaly_jobs"] or 0) + (j in anomaly)
    for row in by_vc.values():
        started = row.pop("started")
        row["avg_queue_s"] = row.pop("queue_s") / started if started else 0.0
    first_submit = min((s.t for s in jobs.values()), default=0.0)
    makespan = (max(finished_at.values()) - first_submit) if finished_at else 0.0
    util = busy_gpu_s / (total_gpus * makespan) if total_gpus and makespan > 0 else 0.0
    finished_jobs = sum(1 for j in finished_at if j in started_once)
    return Metrics(
        policy=policy,
        jobs=len(jobs),
        finished=finished_jobs,
        rejected=len(rejected),
        unfinished=len(jobs) - finished_jobs - len(rejected) - sum(1 for j in finished_at if j not in started_once),
        avg_jct_s=statistics.fmean(jct) if jct else 0.0,
        median_jct_s=statistics.median(jct) if jct else 0.0,
        p95_jct_s=percentile(jct, 95),
        avg_queue_s=statistics.fmean(queue) if queue else 0.0,
        p95_queue_s=percentile(queue, 95),
        makespan_s=makespan,
        gpu_utilisation=min(util, 1.0),
        preemptions=preemptions,
        sharing_anomaly_s=None if anomaly is None else sum(anomaly.values()),
        sharing_anomaly_jobs=None if anomaly is None else len(anomaly),
        by_vc=dict(sorted(by_vc.items())),
        user_wait_spread=user_wait_spread(jobs.values(), waits),
        waits=waits,
    )


def user_wait_spread(submits: Iterable[SubmitEvent], waits: Mapping[str, float]) -> dict[str, Any] | None:
    """Each user's average wait (over their jobs), then how spread those averages are across users:
    median, p95, max, and p95/median, max/median (None when the median is 0). None for < 2 users."""
    per_user: dict[str, list[float]] = {}
    for s in submits:
        per_user.setdefault(s.user, []).append(waits.get(s.job, 0.0))
    if len(per_user) < 2:
        return None
    avgs = [statistics.fmean(v) for v in per_user.values()]
    med, p95, top = statistics.median(avgs), percentile(avgs, 95), max(avgs)
    return {"users": len(avgs), "median_s": med, "p95_s": p95, "max_s": top,
            "p95_over_median": p95 / med if med > 0 else None,
            "max_over_median": top / med if med > 0 else None}
