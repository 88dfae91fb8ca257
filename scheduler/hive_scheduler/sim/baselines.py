"""Baseline schedulers to compare HiveD's cells against, with the core ``Scheduler``'s call interface.

Both are first-fit GPU allocators over a flat list of nodes (no cells, no topology guarantee). They take
the same calls as ``hive_scheduler.Scheduler`` (``submit``, ``finish``, ``preemption_done``,
``set_node_health``, ``set_gpu_health``, ``reconfigure``, ``schedule``; each returns the decisions it made,
objects with ``to_json()``) so one simulator driver runs all three policies.

``quota`` -- YARN CapacityScheduler style, as in the HiveD paper's comparison:

- each VC's quota is a number of GPUs (per GPU type): the GPUs of its HiveD virtual cells, counted, with
  no topology attached;
- a guaranteed job (priority >= 0) may start when its VC's running guaranteed GPUs plus the job's stay
  within the quota and its tasks fit first-fit: tasks in request order, each on the first node (config
  order) with enough free healthy GPUs of the type (lowest indices) and CPUs/memory. It may land on any
  node, so free quota can be scattered in fragments no gang fits into: the *sharing anomaly*;
- order: guaranteed jobs by (priority desc, submit order) across VCs, then opportunistic jobs in submit
  order; a job that does not fit never blocks the ones behind it;
- opportunistic jobs (priority -1) use any free GPUs outside the quotas' accounting; they are the only
  ones ever preempted, and only for a guaranteed job within its quota that does not fit otherwise: the
  most recently started opportunistic jobs are chosen until the job fits, their GPUs are held for it
  until they have stopped. No preemption inside a VC (YARN's intra-queue preemption is off by default);
- ``within`` and ``pinned_cell`` are topology requests: checked for validity (a pin must belong to the
  job's VC) and otherwise ignored.

``fifo`` -- one global queue, no VCs: jobs start strictly in submit order (the head job blocks everything
behind it until it fits), first fit as above; priorities, VCs, ``within`` and pins are ignored; no
preemption.

Bad hardware: a GPU or node marked down takes no new work; running jobs keep running, as in the core.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from ..errors import RequestError
from .shape import ClusterShape, NodeShape, cluster_shape

__all__ = ["QuotaScheduler", "FifoScheduler", "BaselineDecision", "make_baseline"]

MAX_PRIORITY = 1000


@dataclass
class BaselineDecision:
    t: float
    job: str
    event: str
    placement: list[dict[str, Any]] | None = None
    opportunistic: bool | None = None
    reason: str | None = None
    victims: list[str] | None = None
    by: str | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"t": self.t, "job": self.job, "event": self.event}
        for key in ("placement", "opportunistic", "reason", "victims", "by", "error"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


@dataclass
class _Node:
    shape: NodeShape
    used: set[int] = field(default_factory=set)
    bad: set[int] = field(default_factory=set)
    down: bool = False
    cpus_used: float = 0.0
    mem_used: int = 0

    def free_gpus(self, gpu_type: str | None) -> list[int]:
        if self.down:
            return []
        return [
            i for i, t in enumerate(self.shape.gpu_types)
            if i not in self.used and i not in self.bad and (gpu_type is None or t == gpu_type)
        ]


@dataclass
class _Job:
    req: Any
    seq: int
    gpus: int
    state: str = "waiting"  # waiting | running | stopping (victim being preempted)
    placement: list[dict[str, Any]] = field(default_factory=list)
    opportunistic: bool = False
    victims: set[str] = field(default_factory=set)  # preemptor: victims not yet stopped
    held: list[tuple[str, int]] = field(default_factory=list)  # preemptor: (node, gpu) freed for it
    held_for: str | None = None  # victim: the preemptor its GPUs go to (None once that one is withdrawn)
    stopped_by: str | None = None  # victim: the preemptor that chose it
    last_reason: str | None = None


def _task_list(req: Any) -> list[tuple[str, int, str | None, float, int]]:
    out = []
    for group in req.tasks:
        for i in range(group.count):
            out.append((f"{group.name}-{i}", group.gpus, group.gpu_type, group.cpus or 0, group.memory_mb or 0))
    return out


class _FirstFit:
    """Shared machinery: nodes, first-fit gang placement, job bookkeeping."""

    name = "baseline"

    def __init__(self, config: Any):
        self._seq = 0
        self._used: dict[str, dict[str | None, int]] = {}
        self._queue: dict[str, _Job] = {}  # waiting jobs, in the order they (re)entered the queue
        self._used_total = 0  # GPUs of running jobs (an upper bound on what is free follows from it)
        self._jobs: dict[str, _Job] = {}
        self._load(config)

    # -- cluster model ------------------------------------------------------------------------------
    def _load(self, config: Any) -> None:
        shape = config if isinstance(config, ClusterShape) else cluster_shape(config)
        old = getattr(self, "_nodes", {})
        self.shape = shape
        self._nodes: dict[str, _Node] = {}
        for ns in shape.nodes:
            node = _Node(ns)
            if ns.name in old:
                node.bad = {g for g in old[ns.name].bad if g < ns.gpu_count}
                node.down = old[ns.name].down
            self._nodes[ns.name] = node
        self._used_total = 0
        for job in self._jobs.values():
            if job.state != "waiting":
                self._occupy(job.placement, job.req)

    def gpu_count(self) -> int:
        return self.shape.total_gpus

    def free_gpu_count(self) -> int:
        return sum(len(n.free_gpus(None)) for n in self._nodes.values())

    def _occupy(self, placement: list[dict[str, Any]], req: Any, sign: int = 1) -> None:
        tasks = {t[0]: t for t in _task_list(req)}
        for p in placement:
            node = self._nodes.get(p["node"])
            if node is None:  # the node left the cluster in a reconfiguration
                continue
            _, _, _, cpus, mem = tasks[p["task"]]
            before = len(node.used)
            if sign > 0:
                node.used.update(g for g in p["gpus"] if g < node.shape.gpu_count)
            else:
                node.used.difference_update(p["gpus"])
            self._used_total += len(node.used) - before
            node.cpus_used += sign * cpus
            node.mem_used += sign * mem

    def _fit(self, req: Any, extra: dict[str, set[int]] | None = None) -> list[dict[str, Any]] | None:
        """First-fit placement of every task, or None. ``extra``: GPUs to treat as free (held ones)."""
        extra = extra or {}
        demand = sum(g.count * g.gpus for g in req.tasks)
        if demand > self.shape.total_gpus - self._used_total + sum(len(v) for v in extra.values()):
            return None  # not enough GPUs free in the whole cluster: no need to look at nodes
        empty: set[int] = set()
        taken: dict[str, set[int]] = {}
        cpu_taken: dict[str, float] = {}
        mem_taken: dict[str, int] = {}
        placement = []
        for task, gpus, gpu_type, cpus, mem in _task_list(req):
            chosen = None
            for name, node in self._nodes.items():
                extra_here = extra.get(name, empty)
                if node.down or (node.shape.gpu_count - len(node.used) < gpus and not extra_here):
                    continue  # cheap test first: used GPUs alone already leave too few
                if node.cpus_used + cpu_taken.get(name, 0) + cpus > node.shape.cpus:
                    continue
                if node.mem_used + mem_taken.get(name, 0) + mem > node.shape.memory_mb:
                    continue
                free_all = sorted(
                    (set(node.free_gpus(None)) | {g for g in extra_here if g not in node.bad})
                    - taken.get(name, set())
                )
                if gpu_type is not None:
                    free = [g for g in free_all if node.shape.gpu_types[g] == gpu_type]
                else:  # one type per task: the first type (by index) with enough free GPUs
                    free = []
                    for t in dict.fromkeys(node.shape.gpu_types[g] for g in free_all):
                        same = [g for g in free_all if node.shape.gpu_types[g] == t]
                        if len(same) >= gpus:
                            free = same
                            break
                if len(free) >= gpus:
                    chosen = (name, free[:gpus])
                    break
            if chosen is None:
                return None
            name, gl = chosen
            taken.setdefault(name, set()).update(gl)
            cpu_taken[name] = cpu_taken.get(name, 0) + cpus
            mem_taken[name] = mem_taken.get(name, 0) + mem
            placement.append({"task": task, "node": name, "gpus": list(gl)})
        return placement

    def _validate(self, req: Any) -> None:
        if req.id in self._jobs:
            raise RequestError("id", f"job {req.id!r} already exists; use a new job id")
        if not isinstance(req.priority, int) or not -1 <= req.priority <= MAX_PRIORITY:
            raise RequestError(
                "priority", f"priority must be -1 (opportunistic) or 0..{MAX_PRIORITY}, got {req.priority!r}"
            )
        types = set(self.shape.gpu_types)
        for group in req.tasks:
            if group.gpu_type is not None and group.gpus and group.gpu_type not in types:
                raise RequestError(
                    "tasks.gpu_type",
                    f"task group {group.name!r} asks for GPU type {group.gpu_type!r}; "
                    f"the cluster has {', '.join(sorted(types)) or 'no GPUs'}",
                )
            most = self.shape.max_gpus_per_node(group.gpu_type) if group.gpus else 0
            if group.gpus > most:
                raise RequestError(
                    "tasks.gpus",
                    f"task group {group.name!r} asks for {group.gpus} GPUs per task; "
                    f"no node has more than {most}",
                )

    def _account(self, job: _Job, sign: int) -> None:
        """Hook: quota bookkeeping when a job starts (+1) or stops (-1)."""

    def _start(self, job: _Job, placement: list[dict[str, Any]], now: float) -> BaselineDecision:
        job.state = "running"
        self._queue.pop(job.req.id, None)
        job.placement = placement
        self._occupy(placement, job.req)
        self._account(job, +1)
        return BaselineDecision(now, job.req.id, "started", placement=placement, opportunistic=job.opportunistic)

    def _release(self, job: _Job) -> None:
        self._occupy(job.placement, job.req, sign=-1)
        self._account(job, -1)
        job.placement = []

    # -- what each baseline decides (FifoScheduler, QuotaScheduler) ---------------------------------
    def _is_opportunistic(self, req: Any) -> bool:
        """The job runs opportunistically (outside any guarantee)."""
        raise NotImplementedError

    def _reason(self, job: _Job) -> str:
        """Why ``job`` waits."""
        raise NotImplementedError

    def schedule(self, now: float) -> list[BaselineDecision]:
        """Start what may start now, in the baseline's order."""
        raise NotImplementedError

    # -- calls --------------------------------------------------------------------------------------
    def submit(self, job: Any, now: float) -> list[BaselineDecision]:
        self._validate(job)
        self._seq += 1
        gpus = sum(g.count * g.gpus for g in job.tasks)
        self._jobs[job.id] = _Job(req=job, seq=self._seq, gpus=gpus, opportunistic=self._is_opportunistic(job))
        self._queue[job.id] = self._jobs[job.id]
        out = self.schedule(now)
        rec = self._jobs.get(job.id)
        if rec is not None and rec.state == "waiting" and rec.last_reason is None:
            rec.last_reason = self._reason(rec)
            out.append(BaselineDecision(now, job.id, "queued", reason=rec.last_reason))
        return out

    def finish(self, job_id: str, now: float) -> list[BaselineDecision]:
        job = self._jobs.get(job_id)
        if job is None:
            raise RequestError("job_id", f"unknown job {job_id!r}")
        out = [BaselineDecision(now, job_id, "finished")]
        self._drop(job, now)
        return out + self.schedule(now)

    def cancel(self, job_id: str, now: float) -> list[BaselineDecision]:
        """Withdraw a job: the same as ``finish`` (the SchedulerCore protocol)."""
        return self.finish(job_id, now)

    def _drop(self, job: _Job, now: float) -> None:
        del self._jobs[job.req.id]
        self._queue.pop(job.req.id, None)
        if job.state != "waiting":
            self._release(job)

    def preemption_done(self, job_id: str, now: float, requeue: bool = True) -> list[BaselineDecision]:
        raise RequestError("job_id", f"job {job_id!r} is not being preempted ({self.name} never preempts)")

    def set_node_health(self, node: str, healthy: bool, now: float) -> list[BaselineDecision]:
        if node not in self._nodes:
            raise RequestError("node", f"unknown node {node!r}")
        self._nodes[node].down = not healthy
        return self.schedule(now) if healthy else []

    def set_gpu_health(self, node: str, gpu: int, healthy: bool, now: float) -> list[BaselineDecision]:
        if node not in self._nodes or not 0 <= gpu < self._nodes[node].shape.gpu_count:
            raise RequestError("gpu", f"unknown GPU {gpu} on node {node!r}")
        bad = self._nodes[node].bad
        if healthy:
            bad.discard(gpu)
            return self.schedule(now)
        bad.add(gpu)
        return []

    def reconfigure(self, config: Any, now: float) -> list[BaselineDecision]:
        self._load(config)
        return self.schedule(now)

    def _waiting(self) -> list[_Job]:
        """Waiting jobs in seq order (the queue is kept in the order jobs (re)entered it)."""
        return list(self._queue.values())

    # subclasses: _is_opportunistic, _reason, schedule


class FifoScheduler(_FirstFit):
    name = "fifo"

    def _is_opportunistic(self, req: Any) -> bool:
        return False

    def _reason(self, job: _Job) -> str:
        ahead = 0
        for j in self._queue.values():  # in seq order
            if j.seq >= job.seq:
                break
            ahead += 1
        if ahead:
            return f"{ahead} job(s) ahead in the global FIFO queue"
        free = self.free_gpu_count()
        return f"needs {job.gpus} GPU(s) placed first-fit; {free} free in the cluster, not enough on the nodes"

    def schedule(self, now: float) -> list[BaselineDecision]:
        out = []
        for job in self._waiting():
            placement = self._fit(job.req)
            if placement is None:
                break  # strict FIFO: the head blocks the queue
            out.append(self._start(job, placement, now))
        return out


class QuotaScheduler(_FirstFit):
    name = "quota"

    def __init__(self, config: Any):
        self._holders: dict[str, None] = {}  # preemptors holding GPUs freed by their victims (insertion order)
        super().__init__(config)

    def _is_opportunistic(self, req: Any) -> bool:
        return req.priority < 0

    def _validate(self, req: Any) -> None:
        super()._validate(req)
        if req.vc not in self.shape.vc_gpus:
            raise RequestError(
                "vc", f"unknown virtual cluster {req.vc!r}; the cluster has {', '.join(self.shape.vcs) or 'none'}"
            )
        if req.pinned_cell is not None and self.shape.pinned.get(req.pinned_cell) != req.vc:
            raise RequestError("pinned_cell", f"pinned cell {req.pinned_cell!r} is not in VC {req.vc!r}")
        if req.priority >= 0:
            quota = self.shape.vc_gpus[req.vc]
            for gtype, need in self._demand_by_type(req).items():
                have = sum(quota.values()) if gtype is None else quota.get(gtype, 0)
                if need > have:
                    what = "GPUs" if gtype is None else f"{gtype} GPUs"
                    raise RequestError(
                        "tasks", f"job asks for {need} {what}; VC {req.vc!r} has a quota of {have}"
                    )

    @staticmethod
    def _demand_by_type(req: Any) -> dict[str | None, int]:
        d: dict[str | None, int] = {}
        for g in req.tasks:
            if g.gpus:
                d[g.gpu_type] = d.get(g.gpu_type, 0) + g.count * g.gpus
        return d

    def _account(self, job: _Job, sign: int) -> None:
        if job.opportunistic:
            return
        used = self._used.setdefault(job.req.vc, {})
        used[None] = used.get(None, 0) + sign * job.gpus
        for gtype, n in self._demand_by_type(job.req).items():
            if gtype is not None:
                used[gtype] = used.get(gtype, 0) + sign * n

    def _vc_used(self, vc: str) -> int:
        return self._used.get(vc, {}).get(None, 0)

    def _within_quota(self, job: _Job) -> bool:
        quota = self.shape.vc_gpus.get(job.req.vc, {})
        used = self._used.get(job.req.vc, {})
        if sum(quota.values()) < used.get(None, 0) + job.gpus:
            return False
        for gtype, need in self._demand_by_type(job.req).items():
            if gtype is not None and used.get(gtype, 0) + need > quota.get(gtype, 0):
                return False
        return True

    def _reason(self, job: _Job) -> str:
        vc = job.req.vc
        if job.victims:
            return f"waiting for {len(job.victims)} opportunistic job(s) to stop: {', '.join(sorted(job.victims))}"
        if job.opportunistic:
            return f"opportunistic: needs {job.gpus} free GPU(s); {self.free_gpu_count()} free in the cluster"
        quota = sum(self.shape.vc_gpus.get(vc, {}).values())
        used = self._vc_used(vc)
        if not self._within_quota(job):
            return f"VC {vc} is using {used}/{quota} quota GPUs; the job needs {job.gpus}"
        return (
            f"VC {vc} has {quota - used} unused quota GPUs but no first-fit placement of "
            f"{job.gpus} GPU(s) exists ({self.free_gpu_count()} free in the cluster, fragmented)"
        )

    def _all_held(self) -> set[tuple[str, int]]:
        return {h for job_id in self._holders for h in self._jobs[job_id].held}

    def _fit_outside_holds(self, job: _Job, own: Iterable[tuple[str, int]] = ()) -> list[dict[str, Any]] | None:
        """First fit that neither uses GPUs held for another preemptor nor ignores ``own`` held GPUs."""
        held = self._all_held() - set(own)
        for node, g in held:  # hide GPUs held for others
            if node in self._nodes:
                self._nodes[node].used.add(g)
        try:
            extra: dict[str, set[int]] = {}
            for node, g in own:
                extra.setdefault(node, set()).add(g)
            return self._fit(job.req, extra)
        finally:
            for node, g in held:
                if node in self._nodes:
                    self._nodes[node].used.discard(g)

    def schedule(self, now: float) -> list[BaselineDecision]:
        out: list[BaselineDecision] = []
        waiting = self._waiting()
        guaranteed = sorted((j for j in waiting if not j.opportunistic), key=lambda j: (-j.req.priority, j.seq))
        opportunistic = sorted((j for j in waiting if j.opportunistic), key=lambda j: j.seq)
        for job in guaranteed:
            if job.victims or not self._within_quota(job):
                continue
            placement = self._fit_outside_holds(job, job.held)
            if placement is not None:
                self._start_with_holds(job, placement, now, out)
                continue
            victims = self._choose_victims(job)
            if victims:
                job.victims = set(victims)
                for v in victims:
                    self._jobs[v].state = "stopping"
                    self._jobs[v].held_for = job.req.id
                    self._jobs[v].stopped_by = job.req.id
                out.append(BaselineDecision(now, job.req.id, "preempting", victims=list(victims)))
        for job in opportunistic:
            placement = self._fit_outside_holds(job)
            if placement is not None:
                out.append(self._start(job, placement, now))
        return out

    def _start_with_holds(self, job: _Job, placement, now: float, out: list) -> None:
        job.held = []
        self._holders.pop(job.req.id, None)
        job.victims = set()
        out.append(self._start(job, placement, now))

    def _choose_victims(self, job: _Job) -> list[str]:
        candidates = sorted(
            (j for j in self._jobs.values() if j.opportunistic and j.state == "running"),
            key=lambda j: (-j.seq, j.req.id),
        )
        freed: list[tuple[str, int]] = list(job.held)
        chosen: list[str] = []
        for victim in candidates:
            chosen.append(victim.req.id)
            freed += [(p["node"], g) for p in victim.placement for g in p["gpus"]]
            if self._fit_outside_holds(job, freed) is not None:
                return chosen
        return []

    def _hand_over(self, victim: _Job) -> None:
        """The victim stopped: its GPUs are held for its preemptor (if that one still waits)."""
        gpus = [(p["node"], g) for p in victim.placement for g in p["gpus"]]
        preemptor = self._jobs.get(victim.held_for or "")
        if preemptor is not None and preemptor.state == "waiting":
            preemptor.held += gpus
            self._holders[preemptor.req.id] = None
            preemptor.victims.discard(victim.req.id)

    def preemption_done(self, job_id: str, now: float, requeue: bool = True) -> list[BaselineDecision]:
        victim = self._jobs.get(job_id)
        if victim is None or victim.state != "stopping":
            raise RequestError("job_id", f"job {job_id!r} is not being preempted (no preempting decision named it)")
        self._hand_over(victim)
        by = victim.stopped_by
        self._release(victim)
        victim.held_for = victim.stopped_by = None
        out: list[BaselineDecision] = []
        if requeue:
            victim.state = "waiting"
            self._seq += 1
            victim.seq = self._seq
            self._queue[job_id] = victim
            out.append(BaselineDecision(now, job_id, "preempted", by=by))
            victim.last_reason = f"preempted by {by}; queued again"
            out.append(BaselineDecision(now, job_id, "queued", reason=victim.last_reason))
        else:
            del self._jobs[job_id]
            out.append(BaselineDecision(now, job_id, "preempted", by=by))
        return out + self.schedule(now)

    def _drop(self, job: _Job, now: float) -> None:
        if job.state == "stopping":
            self._hand_over(job)
        for v in sorted(job.victims):  # a withdrawn preemptor: the preemption of its victims is called off
            victim = self._jobs.get(v)
            if victim is not None and victim.state == "stopping" and victim.stopped_by == job.req.id:
                victim.state = "running"
                victim.held_for = victim.stopped_by = None
        job.held = []
        self._holders.pop(job.req.id, None)
        super()._drop(job, now)


def make_baseline(policy: str, config: Any) -> _FirstFit:
    if policy == "quota":
        return QuotaScheduler(config)
    if policy == "fifo":
        return FifoScheduler(config)
    raise ValueError(f"unknown baseline policy {policy!r}; choose quota or fifo")
