"""Putting running jobs back: ``adopt`` (after a restart) and ``reconfigure`` (new cluster config).

Both keep running work running. A guaranteed job whose GPUs can no longer be covered by its VC's
cells (bound where they are, or bindable from free buddy cells) continues as opportunistic
(``demoted``); nothing running is ever killed by the core.
"""

from __future__ import annotations

from typing import Any

from .config import load_cluster_config
from .decisions import Decision
from .errors import ConfigError, RequestError
from .types import JobRequest, TaskPlacement
from .validation import validate_request


class RecoveryMixin:
    def adopt(self, job: JobRequest, placement: Any, opportunistic: bool, now: float) -> list[Decision]:
        """Put back a job that is really running with exactly ``placement`` (list of TaskPlacement or dicts)."""
        if not isinstance(job, JobRequest):
            raise RequestError("job", f"expected a JobRequest, got {type(job).__name__}")
        validate_request(self, job, as_opportunistic=bool(opportunistic))
        res = self._resolve_placement(job, placement)
        now = self._tick(now)
        from .scheduler import _Job

        j = _Job(job, self._seq)
        self._seq += 1
        self._jobs[job.id] = j
        out: list[Decision] = []
        self._install_running(j, res, bool(opportunistic), now, out,
                              "adopted as opportunistic: its GPUs are not within VC {vc}'s free guaranteed cells")
        self._schedule(now, out)
        return out

    def _resolve_placement(self, job: JobRequest, placement: Any, nodes=None):
        nodes = nodes if nodes is not None else self._nodes
        if not isinstance(placement, (list, tuple)):
            raise RequestError("placement", "must be a list of task placements")
        by_task: dict[str, tuple] = {}
        for i, p in enumerate(placement):
            if isinstance(p, TaskPlacement):
                d = p.to_dict()
            elif isinstance(p, dict):
                d = p
            else:
                raise RequestError(f"placement[{i}]", "must be a TaskPlacement or a dict with task, node, gpus")
            task = d.get("task")
            if task in by_task:
                raise RequestError(f"placement[{i}].task", f"task {task!r} placed twice")
            by_task[task] = (i, d)
        res = []
        seen = set()
        for gi, tg in enumerate(job.tasks):
            for ti in range(tg.count):
                name = f"{tg.name}-{ti}"
                if name not in by_task:
                    raise RequestError("placement", f"task {name} is missing (expected {sum(t.count for t in job.tasks)} tasks)")
                i, d = by_task.pop(name)
                node = nodes.get(d.get("node"))
                if node is None:
                    raise RequestError(f"placement[{i}].node", f"unknown node {d.get('node')!r}")
                gpus = list(d.get("gpus") or [])
                if len(gpus) != tg.gpus:
                    raise RequestError(f"placement[{i}].gpus", f"task {name} asks for {tg.gpus} GPUs but {len(gpus)} are given")
                leaves = []
                for g in gpus:
                    leaf = node.gpu_leaves.get(g)
                    if leaf is None:
                        raise RequestError(f"placement[{i}].gpus", f"node {node.name} has no GPU {g!r}")
                    if (node.name, g) in seen or leaf.job is not None or leaf.reserved_by is not None:
                        raise RequestError(f"placement[{i}].gpus", f"GPU {g} of node {node.name} is already in use")
                    if tg.gpu_type and self._chain_gpu[leaf.chain] != tg.gpu_type:
                        raise RequestError(f"placement[{i}].gpus", f"GPU {g} of node {node.name} is not a {tg.gpu_type}")
                    seen.add((node.name, g))
                    leaves.append(leaf)
                res.append((gi, ti, node, leaves))
        if by_task:
            raise RequestError("placement", f"unknown tasks: {', '.join(sorted(map(str, by_task)))}")
        need: dict[str, list] = {}
        for gi, ti, node, leaves in res:
            tg = job.tasks[gi]
            acc = need.setdefault(node.name, [node, 0.0, 0])
            acc[1] += tg.cpus
            acc[2] += tg.memory_mb
        for name, (node, cpus, mem) in need.items():
            if cpus > node.cpus_free + 1e-9 or mem > node.memory_free:
                raise RequestError("placement", f"node {name} has {node.cpus_free:g} CPUs / {node.memory_free} MB free, "
                                   f"the job's tasks there use {cpus:g} / {mem}")
        return res

    def _install_running(self, j, res, opportunistic: bool, now: float, out: list, demote_reason: str) -> None:
        """Make ``j`` running on ``res`` ((group, index, node, leaves) per task)."""
        req = j.req
        guaranteed = req.priority != -1 and not opportunistic
        txn: list = []
        if guaranteed and not self._adopt_guaranteed(j, res, txn):
            self._rollback(txn)
            guaranteed = False
            if not opportunistic:
                j.demoted = True
                out.append(Decision("demoted", req.id, now, reason=demote_reason.format(vc=req.vc)))
        if opportunistic and req.priority != -1:
            j.demoted = True
        j.opp = not guaranteed
        firsts, acc = [], 0
        for tg in req.tasks:
            firsts.append(acc)
            acc += tg.count
        placements, leaves_all, j.res = [], [], []
        for gi, ti, node, leaves in res:
            tg = req.tasks[gi]
            placements.append(TaskPlacement(f"{tg.name}-{ti}", tg.name, ti, firsts[gi] + ti, node.name,
                                            tuple(sorted(lf.gpu for lf in leaves)), tg.cpus, tg.memory_mb))
            leaves_all.extend(leaves)
            if tg.cpus or tg.memory_mb:
                node.cpus_free -= tg.cpus
                node.memory_free -= tg.memory_mb
                j.res.append((node, tg.cpus, tg.memory_mb))
        placements.sort(key=lambda p: p.rank)
        j.placement = tuple(placements)
        for leaf in leaves_all:
            self._leaf_set(leaf, job=req.id, jopp=j.opp, reserved_by=None)
        j.pleaves = leaves_all
        if guaranteed:
            j.vleaves = [leaf.vcell for leaf in leaves_all]
            if j.vleaves:
                self._hold_register(j)
        j.state = "running"
        j.started_at = now

    def _adopt_guaranteed(self, j, res, txn: list) -> bool:
        req = j.req
        vc = self._vcs[req.vc]
        for _, _, _, leaves in res:
            for leaf in leaves:
                v = self._vcell_for(vc, leaf, req, txn)
                if v is None or v.job is not None:
                    return False
                self._vhold(v, req.id, txn)
        return True

    def _vcell_for(self, vc, leaf, req, txn: list):
        """The virtual GPU of ``vc`` that ``leaf`` is (binding a free VC cell around it if needed)."""
        v = leaf.vcell
        if v is not None:
            if v.vc != vc.name or v.root.pin != req.pinned_cell:
                return None
            return v
        if req.pinned_cell is not None:
            return None
        buddy = self._buddies[leaf.chain]
        tried = set()
        for r in sorted((r for r in vc.roots.get(leaf.chain, ()) if r.bound is None), key=lambda r: (r.level, r.id)):
            if r.level in tried:
                continue
            tried.add(r.level)
            anc = leaf
            while anc is not None and anc.level < r.level:
                anc = anc.parent
            if anc is None or anc.level != r.level:
                continue
            # a partly bad cell (bad GPUs kept it split) is bound around its bad GPUs, as placement does
            if buddy.take_exact(anc) or (anc.bad and buddy.take_partly_bad(anc)):
                self._bind(r, anc, txn)
                return leaf.vcell
        return None

    # ------------------------------------------------------------------ reconfiguration
    def reconfigure(self, config: Any, now: float) -> list[Decision]:
        """Switch to a new cluster config, keeping running jobs running (ConfigError: nothing changed)."""
        cfg = load_cluster_config(config)
        now = self._tick(now)
        new = type(self)(cfg, self.policy, self.starvation_after)
        new._now = self._now
        new._seq = self._seq
        # bad hardware stays bad
        new._node_down = {n for n in self._node_down if n in new._nodes}
        new._gpu_down = {(n, g) for n, g in self._gpu_down if n in new._nodes and g in new._nodes[n].gpu_leaves}
        for n in new._node_list:
            n.healthy = n.name not in new._node_down
            for idx in sorted(n.gpu_leaves):
                new._apply_health(n.gpu_leaves[idx])
        running = [j for j in self._jobs.values() if j.state == "running"]
        # every running task must still have its node, GPUs, CPUs and memory
        use: dict[str, list] = {}
        for j in running:
            for p in j.placement:
                node = new._nodes.get(p.node)
                if node is None:
                    raise ConfigError("physicalCluster", f"node {p.node} still runs job {j.req.id}; "
                                      "finish or drain its jobs before removing it")
                for g in p.gpus:
                    if g not in node.gpu_leaves:
                        raise ConfigError("physicalCluster", f"GPU {g} of node {p.node} still runs job {j.req.id}")
                acc = use.setdefault(p.node, [0.0, 0])
                acc[0] += p.cpus
                acc[1] += p.memory_mb
        for name, (cpus, mem) in use.items():
            node = new._nodes[name]
            if cpus > node.cpus + 1e-9 or mem > node.memory_mb:
                raise ConfigError(f"nodeResources.{name}", f"running jobs use {cpus:g} CPUs / {mem} MB there but the "
                                  f"new config gives {node.cpus:g} / {node.memory_mb}")
        out: list[Decision] = []
        order = sorted(running, key=lambda j: (j.opp, -j.req.priority, j.started_at or 0.0, j.seq))
        for j in order:
            res = [(gi, p.index, new._nodes[p.node], [new._nodes[p.node].gpu_leaves[g] for g in p.gpus])
                   for p in j.placement for gi in [next(i for i, t in enumerate(j.req.tasks) if t.name == p.group)]]
            was_opp = j.opp
            _reset(j)
            ok_vc = j.req.vc in new._vcs
            if not was_opp and ok_vc:
                try:
                    new._validate_for_reconfig(j.req)
                except RequestError:
                    ok_vc = False
            if not ok_vc and not was_opp:
                j.demoted = True
                out.append(Decision("demoted", j.req.id, now,
                                    reason=f"reconfiguration: VC {j.req.vc} no longer guarantees this job; "
                                           "it keeps running as opportunistic"))
            new._jobs[j.req.id] = j
            new._install_running(j, res, was_opp or not ok_vc, now, out,
                                 "reconfiguration: VC {vc}'s new guarantee no longer covers its GPUs; "
                                 "it keeps running as opportunistic")
            j.preemptors = []
        for j in self._jobs.values():
            if j.state == "running":
                continue
            was_preempting = j.state == "preempting"
            _reset(j)
            j.opp = j.req.priority == -1
            j.demoted = False
            try:
                new._validate_for_reconfig(j.req)
            except RequestError as e:
                out.append(Decision("rejected", j.req.id, now, error=f"after reconfiguration: {e}"))
                continue
            new._jobs[j.req.id] = j
            new._enqueue(j)
            if was_preempting:
                j.fail = ("taken", "its reservation was dropped by a reconfiguration; waiting again")
                out.append(Decision("queued", j.req.id, now, reason=j.fail[1]))
        # restore submission order of the job table (views and tie-breaks follow it)
        new._jobs = dict(sorted(new._jobs.items(), key=lambda kv: kv[1].seq))
        self.__dict__.update(new.__dict__)
        self._schedule(now, out)
        return out

    def _validate_for_reconfig(self, req: JobRequest) -> None:
        jobs = self._jobs
        self._jobs = {}
        try:
            validate_request(self, req)
        finally:
            self._jobs = jobs


def _reset(j) -> None:
    j.pleaves, j.vleaves, j.reserved, j.res = [], [], [], []
    j.waiting_on = []
    j.placement = ()
    j.fail = None
    if j.state != "running":
        j.state = "waiting"
        j.preempted_by = None
        j.preemptors = []
        j.bypass_since = None
