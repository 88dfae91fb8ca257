"""Gavel's policies live: a round driver that time-shares each VC's GPU types among its jobs.

With ``c.HiveLabApp.queue_policy`` set to one of Gavel's policies (``max_min_fairness_perf``, ...),
the core orders jobs first-come-first-served and, every ``round_length_s`` (360 s, as Gavel), the
driver: takes each VC's time-shareable jobs (batch jobs with GPUs that are queued, paused or running
and not being stopped), builds the throughput matrix (Gavel's figures for a declared ``job_type``,
else the rates the job reported with ``hive_lab.progress``, else 1 step/s on every type), solves the
policy for an allocation (``hive_scheduler.hetero``, HiGHS) and picks the round's jobs with Gavel's
round mechanism (``rounds.choose_round``: priority = allocation / time received). Then it carries
the choice out through the lifecycle: chosen jobs are resumed (a paused one) or migrated (another
GPU type than they run on or ask for), the others are paused, each with the reason
``round N of <policy>``. A VC only shares its own GPUs (its guarantee), so HiveD's guarantee holds.

The policy is solved again only when its inputs changed (``round_cache``: jobs arrived, ended or were
resized; the VC's usable GPUs changed; a throughput moved by more than ``rtol``); otherwise the round
reuses the VC's last allocation and only the time each job received moves the round's choice on.
``solves`` counts the solves; ``solve_reasons`` says, per VC, why the last plan solved (None: reused).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any, Mapping, Protocol

import numpy as np

from hive_lab_server.timeshare.progress import ProgressTracker
from hive_lab_server.timeshare.round_cache import DEFAULT_RTOL, Inputs, Solved, what_changed
from hive_lab_server.wire.states import JobState

log = logging.getLogger("hive_lab_server")
S = JobState
# Gavel's names, but "fifo", which stays the core's own order
LIVE_POLICIES = ("fifo_perf", "gandiva", "max_min_fairness", "max_min_fairness_perf", "finish_time_fairness",
                 "finish_time_fairness_perf", "min_total_duration", "min_total_duration_perf",
                 "max_sum_throughput_perf")
REMAINING_STEPS = 1e6  # a job that never said its total (hive_lab.progress(steps, total=N)) looks this long


class RoundHost(Protocol):
    """What the round driver reads of the service and asks it to do (``HiveService`` is one).

    The driver sits below ``jobs/``: it is handed its host and names only this, never the service's
    module, so ``timeshare`` and ``jobs`` do not import each other."""

    config: Any  # the cluster config (hive_scheduler.ClusterConfig)
    scheduler: Any  # the core (its vc_doomed_by_chain view)
    progress: ProgressTracker
    active: Mapping[str, Any]  # job id -> the live job (id, vc, spec, lc.state, lc.intent)
    dependencies: Any  # its ``held``: the jobs that wait for other jobs (depends_on)

    def now(self) -> float: ...

    def read_progress(self, job_id: str, row: dict[str, Any] | None = None) -> dict[str, Any] | None: ...

    def placed_gpu_type(self, job: Any) -> str | None: ...

    async def pause(self, job_id: str, reason: str, wait_s: float = 0.0) -> dict[str, Any]: ...

    def resume(self, job_id: str, reason: str) -> dict[str, Any]: ...

    async def migrate(self, job_id: str, gpu_type: str, reason: str = "", wait_s: float = 0.0) -> dict[str, Any]: ...

    async def resize(self, job_id: str, gpus: int, reason: str = "", wait_s: float = 0.0) -> dict[str, Any]: ...


class RoundDriver:
    def __init__(self, service: RoundHost, policy: str, round_s: float = 360.0, rtol: float = DEFAULT_RTOL):
        from hive_scheduler.hetero.policies import make_policy

        self.svc = service
        self.policy_name = policy
        self.policy = make_policy(policy)
        self.round_s = round_s
        self.rtol = rtol  # a throughput that moved by more than this (relative) asks for a new solve
        self.round = 0
        self.received: dict[str, dict[str, float]] = defaultdict(dict)  # job -> GPU type -> seconds run
        self.last_choice: dict[str, str] = {}
        self.solved: dict[str, Solved] = {}  # VC -> the inputs of its last solve and the allocation
        self.solves = 0
        self.solve_reasons: dict[str, str | None] = {}
        self.resized_in: dict[str, int] = {}  # job -> the round that last resized it (elastic_rounds)
        self.last_problem: dict[str, Any] = {}  # VC -> the Problem of its last solve (what the policy saw)

    # --- the cluster as Gavel sees it ---------------------------------------------------------

    def vc_gpus(self, vc: str) -> dict[str, int]:
        """GPUs per type that the VC's guarantee holds and that it can use now: less its doomed GPUs
        (bad or drained hardware its cells are bound to, or that leaves them nowhere to bind)."""
        cfg = self.svc.config
        out: dict[str, int] = defaultdict(int)
        spec = cfg.virtual_clusters[vc]
        for v in spec.virtual_cells:
            out[cfg.chains[v.chain].gpu_type] += cfg.cell_types[v.cell_type].leaf_count * v.number
        for pid in spec.pinned_cells:
            cell = cfg.pinned_cells[pid]
            chain = next(c for c in cfg.chains.values() if cell.type in c.types)
            out[chain.gpu_type] += cfg.cell_types[cell.type].leaf_count
        for chain, bad in self.svc.scheduler.vc_doomed_by_chain(vc).items():
            if bad and chain in cfg.chains:
                out[cfg.chains[chain].gpu_type] -= bad
        return {t: n for t, n in sorted(out.items()) if n > 0}

    def throughput(self, job: Any, gpu_types: list[str], gpus: int) -> np.ndarray:
        known = self.svc.progress.known(job.spec.job_type, gpus) or {}
        learned = self.svc.progress.jobs.get(job.id)
        if learned is None and job.lc.attempt:
            # rates live in memory only; after a restart (or for a job that is not running) the job's
            # log, which every attempt appends to, is the record: read it before solving without it
            try:
                self.svc.read_progress(job.id)
            except Exception as exc:  # noqa: BLE001 - no log yet, or unreadable: 1 step/s as for any job
                log.info("hive-lab: reading the progress of %s failed: %s", job.id, exc)
            learned = self.svc.progress.jobs.get(job.id)
        row = []
        for t in gpu_types:
            value = known.get(t.lower())
            if value is None and learned is not None and t in learned.rates:
                value = learned.rates[t].per_s
            row.append(float(value) if value else 1.0)
        return np.array(row)

    # --- one round ----------------------------------------------------------------------------

    def remaining_steps(self, jobs: list[Any]) -> np.ndarray:
        """Each job's steps left: its reported ``total`` minus its steps so far (read when the VC is
        solved), else ``REMAINING_STEPS`` (every job that never said its total looks equally long)."""
        out = []
        for j in jobs:
            p = self.svc.progress.jobs.get(j.id)
            left = p.remaining_steps if p is not None else None
            out.append(float(max(left, 1)) if left is not None else REMAINING_STEPS)
        return np.array(out)

    def candidates(self, vc: str) -> list[Any]:
        out = []
        for job in self.svc.active.values():
            if job.vc != vc or job.spec.kind != "batch" or job.lc.intent is not None:
                continue
            if job.id in self.svc.dependencies.held:  # waits for other jobs (depends_on), not for GPUs
                continue
            if job.lc.state not in (S.QUEUED, S.PAUSED, S.RUNNING, S.SCHEDULED):
                continue
            if job.spec.total_gpus <= 0:
                continue
            out.append(job)
        return sorted(out, key=lambda j: j.seq)

    def plan(self) -> dict[str, str | None]:
        """Job -> the GPU type it runs on this round (None: it waits, paused). Changes no job; it solves a
        VC's policy only when ``round_cache.what_changed`` says its inputs changed (and keeps the result)."""
        from hive_scheduler.hetero.policies import PackedAllocation, Problem
        from hive_scheduler.hetero.rounds import choose_round

        choice: dict[str, str | None] = {}
        for vc in sorted(self.svc.config.virtual_clusters):
            jobs = self.candidates(vc)
            gpus_by_type = self.vc_gpus(vc)
            if not jobs or not gpus_by_type:
                self.solved.pop(vc, None)
                self.solve_reasons.pop(vc, None)
                continue
            types = list(gpus_by_type)
            gpus = np.array([gpus_by_type[t] for t in types], dtype=float)
            sf = np.array([j.spec.total_gpus for j in jobs])
            thr = np.array([self.throughput(j, types, int(s)) for j, s in zip(jobs, sf)])
            inputs = Inputs(jobs=tuple((j.id, int(s)) for j, s in zip(jobs, sf)),
                            gpus=tuple((t, gpus_by_type[t]) for t in types), throughput=thr)
            cached = self.solved.get(vc)
            why = what_changed(cached.inputs if cached else None, inputs, self.rtol)
            self.solve_reasons[vc] = why
            if why is None:
                x = cached.allocation  # the same jobs, GPUs and throughputs: the same allocation
            else:
                now = self.svc.now()
                problem = Problem(
                    job_ids=list(range(len(jobs))), gpu_types=types, gpus=gpus, throughput=thr, scale_factor=sf,
                    remaining_steps=self.remaining_steps(jobs), priority_weight=np.ones(len(jobs)),
                    time_since_start=np.array([max(1.0, now - j.request.submit_time) for j in jobs]),
                    job_keys=[(j.spec.job_type or j.id, int(s)) for j, s in zip(jobs, sf)])
                self.last_problem[vc] = problem
                x = self.policy.allocate(problem)
                if isinstance(x, PackedAllocation):  # packing is simulated only: keep the single-job units
                    single = {u[0]: x.x[i] for i, u in enumerate(x.units) if len(u) == 1}
                    x = np.array([single.get(i, np.zeros(len(types))) for i in range(len(jobs))])
                self.solves += 1
                self.solved[vc] = Solved(inputs, x)
                log.info("hive-lab: %s: solved VC %s again (%s)", self.policy_name, vc, why)
            received = np.array([[self.received[j.id].get(t, 0.0) for t in types] for j in jobs])
            order = sorted(range(len(types)), key=lambda k: -thr[:, k].mean())  # fastest type first
            chosen = choose_round([(i,) for i in range(len(jobs))], x, received, (thr > 0).astype(float), sf, gpus,
                                  order, strict=self.policy.strict)
            for i, job in enumerate(jobs):
                t = chosen.get((i,))
                choice[job.id] = types[t] if t is not None else None
        return choice

    async def grow_shrink(self, choice: dict[str, str | None], why: str) -> None:
        """Gandiva's grow-shrink: resize the elastic jobs of each VC (elastic_rounds.plan_resizes)."""
        from hive_lab_server.timeshare.elastic_rounds import plan_resizes
        from hive_lab_server.errors import ServiceError

        for vc in sorted(self.svc.config.virtual_clusters):
            # the round's jobs of the VC (those it just paused or moved too), oldest first
            jobs = sorted((self.svc.active[j] for j in choice if j in self.svc.active and self.svc.active[j].vc == vc),
                          key=lambda j: j.seq)
            if not jobs:
                continue
            plan = plan_resizes(
                vc, jobs, choice, self.vc_gpus(vc), self.svc.moves.placed_gpu_type,
                runs=lambda j: j.lc.state is S.RUNNING and j.lc.intent is None,
                cooling=lambda job_id: self.resized_in.get(job_id) == self.round - 1)
            for r in plan:
                for gpus in r.sizes:  # largest first; a size the core can never place is refused unchanged
                    try:
                        await self.svc.moves.resize(r.job_id, gpus, f"{why}: {r.why.format(gpus=gpus)}")
                    except ServiceError as exc:
                        log.info("hive-lab: %s: resizing %s to %d GPUs: %s", why, r.job_id, gpus, exc)
                        continue
                    self.resized_in[r.job_id] = self.round
                    break

    async def run_round(self) -> dict[str, str | None]:
        """Plan the round and carry it out; returns the plan."""
        self.round += 1
        choice = self.plan()
        why = f"round {self.round} of {self.policy_name}"
        # the jobs that wait go first: their GPUs are freed for the chosen ones
        for job_id, gpu_type in sorted(choice.items(), key=lambda kv: kv[1] is not None):
            job = self.svc.active.get(job_id)
            if job is None:
                continue
            try:
                if gpu_type is None:
                    if job.lc.state is not S.PAUSED:
                        await self.svc.moves.pause(job_id, why)
                    continue
                current = self.svc.moves.placed_gpu_type(job) if job.lc.state in (S.RUNNING, S.SCHEDULED) else None
                asked = {t.gpu_type for t in job.spec.tasks if t.gpus}
                if (current or (asked.pop() if len(asked) == 1 else None)) != gpu_type:
                    await self.svc.moves.migrate(job_id, gpu_type, f"{why}: faster type" if current else why)
                if self.svc.active.get(job_id) is not None and self.svc.active[job_id].lc.state is S.PAUSED:
                    self.svc.moves.resume(job_id, why)
                self.received[job_id][gpu_type] = self.received[job_id].get(gpu_type, 0.0) + self.round_s
            except Exception as exc:  # a job that ended or started stopping meanwhile: next round
                log.info("hive-lab: %s: %s: %s", why, job_id, exc)
        if self.policy_name == "gandiva":
            await self.grow_shrink(choice, why)
        for job_id in [j for j in self.received if j not in self.svc.active]:
            del self.received[job_id]
        for job_id in [j for j in self.resized_in if j not in self.svc.active]:
            del self.resized_in[job_id]
        self.last_choice = {k: v for k, v in choice.items() if v}
        return choice
