"""What-if: what would ``submit(job, now)`` decide for ``job`` right now? A query: it changes nothing.

The answer comes from the placement code itself, run inside a ``trial`` that is undone (the same
primitives a real attempt uses for a gang that fails half-way), so it cannot drift from what a real
submit does:

- ``start``: the job would run at once on ``placement`` (nodes and GPU indices);
- ``preempt``: it would take ``placement`` from the opportunistic jobs in ``victims``, or (placement
  empty) free room by preempting (lazily: demoting) the lower-priority jobs of its VC in ``victims``;
  which GPUs it then takes (and so which opportunistic jobs it preempts as well) the preemption
  decides when it happens: carrying it out changes jobs in ways no transaction records, so it is not
  rehearsed here;
- ``wait``: it would be queued, for ``reason`` (the same sentence a queued job shows).

Between calls every VC's queue has been passed (waiting jobs ahead of it did not fit the current
state), so a new job is tried at once unless an overtaken job of its VC holds the queue back
(anti-starvation); this module follows ``Scheduler.submit`` in that. No sequence number, clock, queue,
ledger or dirty flag changes; the property test ``tests/scheduler/test_core_what_if.py`` checks that views
and every later decision are the same with or without what-if calls in between. ``core`` is the
``Scheduler`` (not imported here: ``scheduler.py`` imports this module, as ``views``/``recovery``); this
module reads its public view (docs/core-api.md), never its private attributes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .errors import RequestError
from .jobs import FREE, NOFIT, OPPORTUNISTIC, WAITING, HeldBack, Job
from .physical import place_opportunistic
from .shares import job_share, share_proxy
from .state import Trial
from .types import JobRequest, TaskPlacement
from .validation import validate_request
from .views import wait_reason


@dataclass(frozen=True)
class WhatIf:
    """The answer of ``Scheduler.what_if``."""

    outcome: str  # "start" | "preempt" | "wait"
    placement: tuple[TaskPlacement, ...] = ()
    victims: tuple[str, ...] = ()
    reason: str | None = None
    opportunistic: bool = False

    def to_dict(self) -> dict:
        return {"outcome": self.outcome, "placement": [p.to_dict() for p in self.placement],
                "victims": list(self.victims), "reason": self.reason, "opportunistic": self.opportunistic}


def task_placements(req: JobRequest, res: list) -> tuple[TaskPlacement, ...]:
    """The task placements of a placement result ``res`` ((group, index, node, leaves) per task), in
    rank order: as ``Installer.install`` names them."""
    firsts, acc = [], 0
    for tg in req.tasks:
        firsts.append(acc)
        acc += tg.count
    out = []
    for gi, ti, node, leaves in res:
        if node is None:
            continue
        tg = req.tasks[gi]
        out.append(TaskPlacement(task=f"{tg.name}-{ti}", group=tg.name, index=ti, rank=firsts[gi] + ti,
                                 node=node.name, gpus=tuple(sorted(leaf.gpu for leaf in leaves)),
                                 cpus=tg.cpus, memory_mb=tg.memory_mb))
    out.sort(key=lambda p: p.rank)
    return tuple(out)


def what_if(core, req: JobRequest, now: float) -> WhatIf:
    """What ``core.submit(req, now)`` would decide for ``req`` (RequestError for a request submit refuses)."""
    if not isinstance(req, JobRequest):
        raise RequestError("job", f"expected a JobRequest, got {type(req).__name__}")
    validate_request(core, req)
    now = max(float(now), core.now)
    j = Job(req, core.next_seq)
    opp = req.priority == -1
    over = core.admission.blocked(j, {})
    if over is not None:  # its owner is at a per-user limit: submit queues it, as here
        j.fail = over
        return _waiting(core, j)
    if not opp:
        held = _held_back_by(core, j, now)
        if held is not None:
            j.fail = HeldBack(held)
            return _waiting(core, j)
    size = job_share(req)
    if size:  # a share packs onto a GPU its VC shares already, else opens one as a one-GPU task would
        got = core.shares.pick(j, size)
        if got is not None:
            leaf, first = got
            tg = req.tasks[0]
            return WhatIf("start", (TaskPlacement(task=f"{tg.name}-0", group=tg.name, index=0, rank=0,
                                                  node=leaf.node_obj.name, gpus=(leaf.gpu,), cpus=tg.cpus,
                                                  memory_mb=tg.memory_mb, share=float(tg.gpus),
                                                  share_slot=first),), (), None, opp)
        j = share_proxy(j)
    # (the trial enters the job in the job table, as placement looks its job up, and takes it out again:
    # insertion order is kept)
    with core.trial(j) as txn:
        res = place_opportunistic(core.state, j, txn) if opp else _place_now(core, j, txn)
        if res is not None:
            placement = task_placements(j.req, res)
            if size:  # the GPU it would open, its first block (as submit's placement does)
                placement = tuple(replace(p, share=float(req.tasks[0].gpus), share_slot=0) for p in placement)
            jobs = core.job_table
            victims = sorted({leaf.job for _, _, _, leaves in res for leaf in leaves
                              if leaf.job is not None and leaf.job != req.id}, key=lambda v: jobs[v].seq)
        txn.undo_to(0)
        victims_lower = [] if res is not None or opp else _lower_victims(core, j)
    if res is not None:
        return WhatIf("preempt" if victims else "start", placement, tuple(victims), None, opp)
    if victims_lower:
        names = ", ".join(victims_lower)
        return WhatIf("preempt", (), tuple(victims_lower),
                      f"would preempt {names} (lower priority in VC {req.vc}) and start once "
                      f"{'they have' if len(victims_lower) > 1 else 'it has'} stopped (lazy ones run on as "
                      "opportunistic work unless their GPUs are needed; opportunistic work on the GPUs it "
                      "takes is preempted too)", False)
    j.fail = NOFIT
    return _waiting(core, j)


def _place_now(core, j: Job, txn: Trial):
    """A real attempt's placement without preemption: free GPUs, else GPUs running opportunistic
    work (whose jobs become victims); with ``private_placement``, where the VC's private cluster would place it."""
    req = j.req
    vc = core.state.vcs[req.vc]
    if req.pinned_cell is not None:
        free = vc.pins[req.pinned_cell].free
    else:
        free = sum(vc.free[c] for c in core.state.job_chains(req, vc))
    if req.total_gpus > free:
        return None
    if core.private_placement and core.state.opp_leaves > 0:
        return core.placement.place(j, OPPORTUNISTIC, txn)
    res = core.placement.place(j, FREE, txn)
    if res is None and core.state.opp_leaves > 0:
        txn.undo_to(0)
        res = core.placement.place(j, OPPORTUNISTIC, txn)
    return res


def _lower_victims(core, j: Job) -> list[str]:
    """The lower-priority jobs of its VC the job would preempt (the preemption search: it undoes itself)."""
    vc = core.state.vcs[j.req.vc]
    if not any(p < j.req.priority for p in vc.prio_count):
        return []
    return [x.req.id for x in sorted(core.preemption.victims(j), key=lambda x: x.seq)]


def _held_back_by(core, j: Job, now: float) -> str | None:
    """The overtaken job of its VC that would hold the new job back (a scheduling pass stops there)."""
    vc = core.state.vcs[j.req.vc]
    if not core.starving(vc, now):
        return None
    key = core.queue_key(j)
    jobs = core.job_table
    for qkey, jid in vc.queue:
        w = jobs[jid]
        if not core.order.dynamic and (qkey, jid) > key:
            break  # behind the new job in the queue: it cannot hold it back
        if w.bypass_since is not None and now - w.bypass_since >= core.starvation_after:
            return jid
    return None


def _waiting(core, j: Job) -> WhatIf:
    queue = core.state.opp_queue if j.req.priority == -1 else core.state.vcs[j.req.vc].queue
    key = core.queue_key(j)
    ahead = sum(1 for k in queue if k < key) if not core.order.dynamic or j.req.priority == -1 else \
        sum(1 for _, jid in queue if core.job_table[jid].req.submit_time <= j.req.submit_time)
    j.state = WAITING
    return WhatIf("wait", (), (), wait_reason(core, j, ahead), j.req.priority == -1)
