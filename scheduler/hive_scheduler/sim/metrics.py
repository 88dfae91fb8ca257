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
- sharing anomaly (HiveD paper, sec. 2): the total time guaranteed jobs (priority >= 0, at least one GPU)
  spent waiting while their VC's guaranteed GPUs not used by its guaranteed jobs were at least what the
  job asked for. ``sharing_anomaly_jobs`` counts the jobs that had any such time. The VC guarantee is the
  cluster model's, whatever the policy (``fifo`` has no VCs, so there it says what ignoring them costs).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping

from .events import SubmitEvent

__all__ = ["Metrics", "compute_metrics", "percentile"]


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
    sharing_anomaly_s: float
    sharing_anomaly_jobs: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _gpus_of(placement: Iterable[Mapping[str, Any]] | None) -> int:
    return sum(len(p.get("gpus") or ()) for p in placement or ())


def compute_metrics(
    policy: str,
    submits: Iterable[SubmitEvent],
    decisions: Iterable[Mapping[str, Any]],
    total_gpus: int,
    vc_guaranteed: Mapping[str, int],
) -> Metrics:
    """``decisions``: the decision lines (dicts) in the order they happened."""
    jobs = {s.job: s for s in submits}
    # A timeline of changes: (t, order, kind, payload). Submits come before decisions at the same time.
    timeline: list[tuple[float, int, int, Any]] = []
    for i, s in enumerate(jobs.values()):
        timeline.append((float(s.t), 0, i, ("submit", s.job, None)))
    for i, d in enumerate(decisions):
        timeline.append((float(d["t"]), 1, i, ("decision", d["job"], d)))
    timeline.sort(key=lambda x: (x[0], x[1], x[2]))

    waiting_since: dict[str, float] = {}
    queue_total: dict[str, float] = {}
    started_once: set[str] = set()
    running_gpus: dict[str, int] = {}
    running_since: dict[str, float] = {}
    guaranteed_running: dict[str, int] = {}  # job -> GPUs counted against its VC
    finished_at: dict[str, float] = {}
    rejected: set[str] = set()
    preemptions = 0
    busy_gpu_s = 0.0

    vc_used: dict[str, int] = {vc: 0 for vc in vc_guaranteed}
    # per VC: demand -> number of guaranteed jobs with that demand waiting now
    waiting_by_vc: dict[str, dict[int, int]] = {}
    waiting_jobs_by_vc: dict[str, dict[str, int]] = {}
    anomaly_s = 0.0
    anomaly_jobs: set[str] = set()

    def demand(job: str) -> int:
        return jobs[job].gpus if job in jobs else 0

    def is_guaranteed(job: str) -> bool:
        return job in jobs and jobs[job].priority >= 0 and demand(job) > 0

    def wait_start(job: str, t: float) -> None:
        waiting_since[job] = t
        if is_guaranteed(job):
            vc = jobs[job].vc
            per = waiting_by_vc.setdefault(vc, {})
            per[demand(job)] = per.get(demand(job), 0) + 1
            waiting_jobs_by_vc.setdefault(vc, {})[job] = demand(job)

    def wait_end(job: str, t: float, ran: bool) -> None:
        since = waiting_since.pop(job, None)
        if since is None:
            return
        if ran:
            queue_total[job] = queue_total.get(job, 0.0) + (t - since)
        if is_guaranteed(job):
            vc = jobs[job].vc
            per = waiting_by_vc[vc]
            per[demand(job)] -= 1
            if not per[demand(job)]:
                del per[demand(job)]
            del waiting_jobs_by_vc[vc][job]

    def stop_running(job: str, t: float) -> None:
        nonlocal busy_gpu_s
        if job in running_since:
            busy_gpu_s += running_gpus.pop(job) * (t - running_since.pop(job))
        gpus = guaranteed_running.pop(job, 0)
        if gpus:
            vc_used[jobs[job].vc] = vc_used.get(jobs[job].vc, 0) - gpus

    prev_t = None
    for t, _, _, (kind, job, d) in timeline:
        if prev_t is not None and t > prev_t:
            dt = t - prev_t
            for vc, per in waiting_by_vc.items():
                if not per:
                    continue
                free = vc_guaranteed.get(vc, 0) - vc_used.get(vc, 0)
                hit = sum(n for dem, n in per.items() if dem <= free)
                if hit:
                    anomaly_s += hit * dt
                    anomaly_jobs.update(j for j, dem in waiting_jobs_by_vc[vc].items() if dem <= free)
        prev_t = t
        if kind == "submit":
            wait_start(job, t)
            continue
        event = d["event"]
        if event == "started":
            wait_end(job, t, ran=True)
            started_once.add(job)
            running_gpus[job] = _gpus_of(d.get("placement"))
            running_since[job] = t
            if not d.get("opportunistic") and job in jobs and jobs[job].priority >= 0:
                guaranteed_running[job] = running_gpus[job]
                vc_used[jobs[job].vc] = vc_used.get(jobs[job].vc, 0) + running_gpus[job]
        elif event == "demoted":
            gpus = guaranteed_running.pop(job, 0)
            if gpus:
                vc_used[jobs[job].vc] -= gpus
        elif event == "preempted":
            preemptions += 1
            stop_running(job, t)
            wait_start(job, t)
        elif event == "finished":
            stop_running(job, t)
            wait_end(job, t, ran=False)
            finished_at[job] = t
        elif event == "rejected":
            wait_end(job, t, ran=False)
            rejected.add(job)

    end_t = prev_t if prev_t is not None else 0.0
    for job in list(running_since):
        stop_running(job, end_t)

    jct = [finished_at[j] - jobs[j].t for j in finished_at if j in jobs and j in started_once]
    queue = [queue_total.get(j, 0.0) for j in started_once]
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
        sharing_anomaly_s=anomaly_s,
        sharing_anomaly_jobs=len(anomaly_jobs),
    )
