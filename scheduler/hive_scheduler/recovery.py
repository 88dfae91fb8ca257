"""Putting running jobs back: ``adopt`` (after a restart) and ``reconfigure`` (new cluster config).

Both keep running work running. A guaranteed job whose GPUs can no longer be covered by its VC's
cells (bound where they are, or bindable from free buddy cells) continues as opportunistic
(``demoted``); nothing running is ever killed by the core. Both are the scheduler's calls, written
here as functions of it (as ``what_if``), through its public calls (``begin_call``, ``enter_job``,
``reset_state``, ``put_back``, ``enqueue``, ``run_passes``); the job's own installation is
``install.Installer``'s: one install path for commit and recovery.
"""

from __future__ import annotations

from typing import Any

from .config import load_cluster_config
from .decisions import Decision
from .errors import ConfigError, RequestError
from .jobs import PREEMPTING, RUNNING, WAITING, Requeued
from .install import take_resources
from .shares import job_share
from .types import JobRequest, TaskPlacement
from .validation import validate_request


def adopt(core, job: JobRequest, placement: Any, opportunistic: bool, now: float) -> list[Decision]:
    """``Scheduler.adopt``: put back a job that is really running with exactly ``placement`` (list of
    TaskPlacement or dicts), through the install path."""
    if not isinstance(job, JobRequest):
        raise RequestError("job", f"expected a JobRequest, got {type(job).__name__}")
    validate_request(core, job, as_opportunistic=bool(opportunistic))
    res = resolve_placement(core.state, job, placement)
    slot = adopt_share_slot(job, placement, res, bool(opportunistic))
    now = core.begin_call(now)
    j = core.enter_job(job)
    out: list[Decision] = []
    core.installer.adopt_running(j, res, bool(opportunistic), now, out,
                                 "adopted as opportunistic: its GPUs are not within VC {vc}'s free guaranteed cells",
                                 share_slot=slot)
    core.run_passes(now, out)
    return out


def resolve_placement(state, job: JobRequest, placement: Any):
    """``placement`` as ``[(group index, task index, node, physical leaves)]`` on ``state``'s nodes;
    RequestError (naming the field) when it does not match the job or its GPUs are taken."""
    nodes = state.nodes
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
            shared = job_share(job)
            if len(gpus) != (1 if shared else tg.gpus):
                raise RequestError(f"placement[{i}].gpus", f"task {name} asks for {tg.gpus} GPUs but {len(gpus)} are given")
            leaves = []
            for g in gpus:
                leaf = node.gpu_leaves.get(g)
                if leaf is None:
                    raise RequestError(f"placement[{i}].gpus", f"node {node.name} has no GPU {g!r}")
                if (node.name, g) in seen or (leaf.job is not None and not (shared and leaf.shares is not None)) \
                        or leaf.reserved_by is not None:
                    raise RequestError(f"placement[{i}].gpus", f"GPU {g} of node {node.name} is already in use")
                if tg.gpu_type and state.chain_gpu[leaf.chain] != tg.gpu_type:
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


def adopt_share_slot(job: JobRequest, placement, res, opportunistic: bool) -> int:
    """The eighths a share job being adopted takes (its stored ``share_slot`` when still free, else the
    best free block); RequestError when its GPU has no room left."""
    size = job_share(job)
    if not size:
        return 0
    d = placement[0].to_dict() if isinstance(placement[0], TaskPlacement) else placement[0]
    slot = d.get("share_slot", 0)
    leaf = res[0][3][0]
    sg = leaf.shares
    if sg is None:
        return slot if isinstance(slot, int) and 0 <= slot < 8 and slot % size == 0 else 0
    if isinstance(slot, int) and sg.block_free(slot, size):
        return slot
    best = sg.best_block(size)
    if best is None:
        raise RequestError("placement[0].gpus", f"GPU {leaf.gpu} of node {leaf.node} has no free "
                           f"{size}/8 of its memory and compute left")
    return best


# ---------------------------------------------------------------------- reconfiguration
def reconfigure(core, config: Any, now: float) -> list[Decision]:
    """``Scheduler.reconfigure``: switch to a new cluster config, keeping running work running
    (ConfigError: nothing changed).

    A new cluster state, then the running jobs adopted into it through the install path and the
    waiting ones queued again. Tasks on nodes/GPUs the new config removes keep running where they
    are (``detached``): their GPUs take no new work, and a guaranteed job still holds its VC's
    share for them (demoted when the VC can no longer cover it).

    As HiveD's reconfiguration lazy-preempts them, a guaranteed job whose GPUs its VC's new cells no
    longer cover is demoted (runs on as opportunistic, preemptible by its VC's guaranteed work, no
    longer counted in the guarantee): its VC has fewer cells of that shape, a task's GPUs would need
    two cells that are not one cell of the VC, or its GPUs moved to another chain (cells split)."""
    cfg = load_cluster_config(config)
    now = core.begin_call(now)
    old_chain_gpu = dict(core.state.chain_gpu)
    running = [j for j in core.job_table.values() if j.state == RUNNING]
    # nodes that stay must still hold the CPUs/memory their running tasks use
    use: dict[str, list] = {}
    gpus_of = _gpu_map(cfg)
    for j in running:
        for p in j.placement:
            if p.node in cfg.nodes and all(g in gpus_of.get(p.node, ()) for g in p.gpus):
                acc = use.setdefault(p.node, [0.0, 0])
                acc[0] += p.cpus
                acc[1] += p.memory_mb
    for name, (cpus, mem) in use.items():
        info = cfg.nodes[name]
        if cpus > info.cpus + 1e-9 or mem > info.memory_mb:
            raise ConfigError(f"nodeResources.{name}", f"running jobs use {cpus:g} CPUs / {mem} MB there but the "
                              f"new config gives {info.cpus:g} / {info.memory_mb}")
    # what each running task runs on, in the old state (GPU types of tasks that become detached)
    gpu_types = {j.req.id: {p.task: (old_chain_gpu[j.pleaves[0].chain] if j.pleaves else None)
                            for p in j.placement} for j in running}
    for j in running:
        for leaf in j.pleaves:
            for p in j.placement:
                if p.node == leaf.node and leaf.gpu in p.gpus:
                    gpu_types[j.req.id][p.task] = old_chain_gpu[leaf.chain]
        for p, t in j.detached:
            gpu_types[j.req.id][p.task] = t
    # the chain each running GPU was in: a task whose GPUs the new config puts in another chain (its cells
    # split off into cells of another type) lost the virtual cells it held (HiveD lazy-preempts it)
    old_chain = {(leaf.node, leaf.gpu): leaf.chain for j in running for leaf in j.pleaves}
    node_down, gpu_down = core.state.node_down, core.state.gpu_down
    jobs = sorted(core.job_table.values(), key=lambda j: j.seq)
    # a new state; bad hardware stays bad
    core.reset_state(cfg)
    state = core.state
    state.node_down = {n for n in node_down if n in state.nodes}
    state.gpu_down = {(n, g) for n, g in gpu_down if n in state.nodes and g in state.nodes[n].gpu_leaves}
    for n in state.node_list:
        n.healthy = n.name not in state.node_down
        for idx in sorted(n.gpu_leaves):
            state.apply_health(n.gpu_leaves[idx])
    out: list[Decision] = []
    order = sorted(running, key=lambda j: (j.opp, -j.req.priority, j.started_at or 0.0, j.seq))
    for j in order:
        core.put_back(j)
    for j in order:
        res, detached = [], []
        for p in j.placement:
            gi = next(i for i, t in enumerate(j.req.tasks) if t.name == p.group)
            node = core.state.nodes.get(p.node)
            if node is not None and all(g in node.gpu_leaves for g in p.gpus):
                res.append((gi, p.index, node, [node.gpu_leaves[g] for g in p.gpus]))
            else:
                detached.append((p, gpu_types[j.req.id].get(p.task)))
        was_opp = j.opp
        placement = j.placement
        j.reset_placement()
        j.preemptors = []
        ok_vc = j.req.vc in core.state.vcs
        if not was_opp and ok_vc:
            try:
                validate_request(core, j.req, new=False)
            except RequestError:
                ok_vc = False
        if not ok_vc and not was_opp:
            j.demoted = True
            out.append(Decision("demoted", j.req.id, now,
                                reason=f"reconfiguration: VC {j.req.vc} no longer guarantees this job; "
                                       "it keeps running as opportunistic"))
        if not ok_vc:
            # its VC is gone: it runs on, outside any queue or guarantee
            take_resources(j.req, res)
            core.installer.install(j, res, [], True, [], now, out, announce=False, placement=placement,
                          detached=tuple(detached))
            continue
        moved = any(old_chain.get((leaf.node, leaf.gpu), leaf.chain) != leaf.chain
                    for _, _, _, leaves in res for leaf in leaves)
        core.installer.adopt_running(j, res, was_opp, now, out,
                                     "reconfiguration: VC {vc}'s new guarantee no longer covers its GPUs; "
                                     "it keeps running as opportunistic", placement=placement,
                                     detached=tuple(detached), coverable=not moved)
    for j in jobs:
        if j.state == RUNNING:
            continue
        was_preempting = j.state == PREEMPTING
        j.reset_placement()
        j.state = WAITING
        j.preempted_by = None
        j.preemptors = []
        j.bypass_since = None
        j.opp = j.req.priority == -1
        j.demoted = False
        try:
            validate_request(core, j.req, new=False)
        except RequestError as e:
            out.append(Decision("rejected", j.req.id, now, error=f"after reconfiguration: {e}"))
            continue
        core.put_back(j)
        core.enqueue(j)
        if was_preempting:
            j.fail = Requeued("its reservation was dropped by a reconfiguration; waiting again")
            out.append(Decision("queued", j.req.id, now, reason=j.fail.reason))
    core.restore_submission_order()  # (views and tie-breaks follow it)
    core.run_passes(now, out)
    return out


def _gpu_map(cfg) -> dict[str, set]:
    """node -> its GPU indices in ``cfg`` (from the physical cells)."""
    out: dict[str, set] = {}
    stack = list(cfg.physical_cells)
    while stack:
        spec = stack.pop()
        if spec.level == 1:
            out.setdefault(spec.node, set()).add(spec.gpu)
        stack.extend(spec.children)
    return out
