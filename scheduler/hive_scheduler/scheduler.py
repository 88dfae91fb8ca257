"""The Scheduler: HiveD at job level (see docs/core-api.md for the contract).

Calls change state and return the decisions they caused; queries are pure. All iteration is over
lists or insertion-ordered dicts built in call order, and ties are broken by ids, so the same
config and calls always give the same decisions.
"""

from __future__ import annotations

import contextlib
from bisect import bisect_left, insort
from collections import Counter
from itertools import islice
from operator import itemgetter
from types import MappingProxyType
from typing import Any, Iterator, Mapping, Sequence

from .config import ClusterConfig, load_cluster_config
from .decisions import Decision, JobView
from .errors import ConfigError, RequestError
from .fit import FitCheck
from .admission import AdmissionGate
from .install import Installer
from . import recovery as _recovery
from .jobs import FREE, NOFIT, OPPORTUNISTIC, PREEMPTING, RUNNING, WAITING, HeldBack, Job, Requeued, Reserved
from .limits import LimitTable, UserLimits
from . import estimates as _estimates
from .physical import place_opportunistic
from .placement import GuaranteedPlacement
from .fair_share import FairShareSettings, UsageLedger
from .policies import ORDERS, get_order
from .preemption import PreemptionSearch
from .shares import SharedGPUs, job_share, share_proxy
from .starvation import fence_of, reserve_cells
from .state import ClusterState, Trial
from .types import JobRequest
from .validation import validate_request
from . import views as _views

_FIFO_KEY = ORDERS["fifo"].key  # opportunistic jobs wait in one cluster-wide FIFO queue
_JOB_ID = itemgetter(1)  # of a queue entry (key, job id)


class Scheduler:
    """HiveD-style scheduler over one cluster config (satisfies ``protocol.LiveSchedulerCore``).

    Its parts, each an explicit object or module (no mixins): the cluster state and its primitives
    (``self.state``, a ``state.ClusterState``: the only way any part reads or changes cells, nodes,
    buddies, VC states and counters); placement (``physical``: functions of the state;
    ``self.placement``, a ``placement.GuaranteedPlacement``); the preemption search
    (``preemption.PreemptionSearch``); shared GPUs (``self.shares``, a ``shares.SharedGPUs``); the one
    install path (``self.installer``, an ``install.Installer``); the queue order (a
    ``policies.QueueOrder``). The calls ``adopt``/``reconfigure`` (``recovery``), ``what_if`` and the
    queries (``views``) are functions of the scheduler that use only its public view, ``trial()`` and
    ``fork()`` (docs/core-api.md "The public view"); the start estimates (``self.estimator``) and the fit
    check hold their own twins. This class holds the jobs, the calls and the scheduling passes; the
    state-bound parts are made anew with each new state.

    ``policy`` orders jobs inside a VC: a registered ``QueueOrder`` by name (``fifo`` | ``priority``
    | ``drf`` built in). ``starvation_after``
    (seconds, None = never): a guaranteed job that waited that long since a later job of its VC
    overtook it *starves*: it reserves the cells it will start in and the jobs behind it start only
    outside them (``starvation.py``; no head-of-line blocking before that, no starvation after).
    ``starvation_hold=True``: the rule before issue 38, a starving job holds back *every* job behind it in
    its VC until it starts (kept to measure against; it idles the VC's other GPUs meanwhile).

    ``backfill`` (default False): reservations instead of skipping. The first guaranteed job of a VC
    (in queue order) that does not fit holds a reservation at its estimated start (``estimate_starts``);
    a job behind it starts now only if its ``time_limit_s`` ends by then (it never delays the
    reservation); jobs without a limit wait behind it. ``strict_order``: the same reservations but no
    backfill (nobody passes them). See docs/core-api.md "Backfill".

    ``private_placement`` (default False): a guaranteed job is placed where its VC's private cluster
    would place it: opportunistic work in the VC's cells (e.g. other VCs' overflowed jobs) does not steer
    the choice; it is preempted. False: GPUs free of opportunistic work first, so nothing is preempted while
    the VC has room elsewhere; but the VC's cells then fill (and fragment) unlike on its private cluster,
    and later jobs of the VC may wait longer than there (the sharing anomaly; issue 25). The simulator's
    overflow lever turns it on.
    """

    def __init__(self, config: Any, policy: str = "fifo", starvation_after: float | None = 3600.0,
                 fair_share: FairShareSettings | None = None, backfill: bool = False, strict_order: bool = False,
                 private_placement: bool = False, starvation_hold: bool = False, trusted: bool = False):
        order = get_order(policy) if isinstance(policy, str) else None
        if order is None:
            raise ConfigError("policy", f"unknown policy {policy!r} (choose one of {', '.join(ORDERS)})")
        cfg = config if isinstance(config, ClusterConfig) else load_cluster_config(config)
        self.policy = policy
        self._order = order
        self.starvation_after = starvation_after
        self.starvation_hold = bool(starvation_hold)
        self.reset_state(cfg)
        self._seq = 0
        self._now = 0.0
        self._qkey = order.key
        # decayed GPU-seconds per user/group; advanced at each call only under orders that read it
        self._ledger = UsageLedger(fair_share)
        self._track_usage = order.name == "fair_share"
        # per-user limits per VC (kept across reconfiguration); set_user_limits changes them
        self._gate = AdmissionGate(lambda: self._jobs.values())
        self.backfill = bool(backfill)
        # reservations and nobody passes them (the estimates' twin under backfill; what backfill is measured against)
        self._strict = bool(strict_order)
        self._fair_share = fair_share
        self.estimator = _estimates.StartEstimates(self)  # estimate_starts (it holds the twin it replays on)
        self._reservations: dict | None = None   # backfill: this instant's estimates, until state changes
        self._trusted = bool(trusted)  # a twin (``fork``): replays validated jobs and needs no reasons
        self.private_placement = bool(private_placement)
        self.version = 0   # counts calls that may have changed the state (caches of derived views key on it)
        # a VC's pass stops trying jobs once each shape still ahead has failed (False: it walks them all, as
        # the differential tests compare)
        self.pass_shortcut = True
        # a submit skips its VC's pass when that pass would decide nothing new (``_pass_needed``; False: it
        # runs, as the differential tests compare)
        self.pass_skip = True
        self._untried = False  # a pass left a job untried (``_attempt``: its reservation was taken over now)
        self._passes_deferred = False  # ``finish_many``: the passes wait for the last job's release

    def reset_state(self, cfg: ClusterConfig) -> None:
        """A fresh cluster state for ``cfg`` with no jobs (construction and reconfiguration, which then
        puts its running and waiting jobs back: ``put_back``, ``enqueue``)."""
        self.config = cfg
        self.state = ClusterState(cfg)
        self._jobs: dict[str, Job] = {}
        self._job_table = MappingProxyType(self._jobs)
        self.placement = GuaranteedPlacement(self.state, self._jobs)
        self.shares = SharedGPUs(self.state, self._jobs)
        self.installer = Installer(self.state, self._jobs, self.shares)
        self.preemption = PreemptionSearch(self.placement, self.shares.victims, self._stopping_in)
        self._stopping: dict[str, None] = {}  # non-lazy victims being stopped (see ``_stopping_in``)
        self._fit = FitCheck(self)  # check_can_ever_fit (it holds an empty twin of this cluster)

    # ================================================================== calls
    def submit(self, job: JobRequest, now: float, *, explain: bool = True) -> list[Decision]:
        """Queue ``job`` and schedule. ``explain=False``: its ``queued`` decision carries no reason (for a
        caller that discards it, as the overflow wrapper does for a job's shadow; the reason costs a walk
        of the VC's state)."""
        if not self._trusted:
            if not isinstance(job, JobRequest):
                raise RequestError("job", f"expected a JobRequest, got {type(job).__name__}")
            validate_request(self, job)
        now = self.begin_call(now)
        j = Job(job, self._seq)
        self._seq += 1
        self._jobs[job.id] = j
        out: list[Decision] = []
        over = self._gate.blocked(j, {}) if self._gate.tables else None  # (no VC has per-user limits: the common case)
        if over is not None:  # waits for its owner's own jobs; nobody else's pass changes
            self.enqueue(j, mark=False)
            j.fail = over
        elif job.priority == -1:
            fast = not self.state.opp_dirty
            self.enqueue(j, mark=not fast)
            if fast:
                self._attempt_opp(j, now, out, None)
        else:
            vc = self.state.vcs[job.vc]
            # (with reservations a new job must queue behind the VC's waiting jobs: the pass decides)
            fast = not vc.dirty and not self.starving(vc, now) and not (vc.queue and (self.backfill or self._strict))
            if not fast and not vc.dirty and vc.held_for is not None and not self._pass_needed(j, vc, now):
                self._queue_behind(j, vc)
            else:
                self.enqueue(j, mark=not fast)
                if fast and self._attempt(j, now, out, None):
                    self._mark_bypassed(vc, now)
        self.run_passes(now, out)
        if j.state == WAITING:
            out.append(Decision("queued", job.id, now,
                                reason=None if self._trusted or not explain else _views.wait_reason(self, j)))
        return out

    def check_can_ever_fit(self, job: JobRequest) -> None:
        """Raise RequestError if ``job`` could not be placed even with every GPU of the cluster free and
        healthy: its gang (all tasks at once) does not fit in the cells its VC guarantees (or, for an
        opportunistic job, in the whole cluster), so it would wait forever. A query: it changes nothing.

        Asks the placement code itself, on an empty twin of this cluster (the tries are rolled back);
        the answer depends only on the config and the job's shape, so it is remembered per shape. Not
        part of ``submit`` (recovery must re-queue what it stored); callers that accept jobs from
        people ask it first."""
        self._fit.check(job)

    def what_if(self, job: JobRequest, now: float):
        """What ``submit(job, now)`` would decide for ``job`` now (start where / preempt whom / wait why),
        without changing anything: see ``what_if.py``."""
        from .what_if import what_if

        return what_if(self, job, now)

    def adopt(self, job: JobRequest, placement: Any, opportunistic: bool, now: float) -> list[Decision]:
        """Put back a job that is really running with exactly ``placement`` (list of TaskPlacement or
        dicts), after a restart: see ``recovery.py``."""
        return _recovery.adopt(self, job, placement, opportunistic, now)

    def reconfigure(self, config: Any, now: float) -> list[Decision]:
        """Switch to a new cluster config, keeping running work running (ConfigError: nothing
        changed): see ``recovery.py``."""
        return _recovery.reconfigure(self, config, now)

    # ------------------------------------------------------------------ per-user limits (admission gate)
    def set_user_limits(self, vc: str, limits: LimitTable | dict | None, now: float) -> list[Decision]:
        """Replace VC ``vc``'s per-user limits (``LimitTable``, its dict form, or None = none) and
        schedule: jobs waiting on a raised limit start at once. Lowering a limit stops nothing; the
        owner's next jobs wait. RequestError (nothing changes) for an unknown VC or malformed limits."""
        if vc not in self.state.vcs:
            raise RequestError("vc", f"unknown VC {vc!r}")
        try:
            table = LimitTable.from_dict(limits)
        except ValueError as e:
            raise RequestError(getattr(e, "field", None) or "limits", str(e)) from None
        now = self.begin_call(now)
        self._gate.set(vc, table)
        self.state.vcs[vc].dirty = True
        self.state.opp_dirty = True
        out: list[Decision] = []
        self.run_passes(now, out)
        return out

    def user_limits(self, vc: str) -> LimitTable:
        """VC ``vc``'s per-user limits (empty when none are set)."""
        if vc not in self.state.vcs:
            raise RequestError("vc", f"unknown VC {vc!r}")
        return self._gate.table(vc)

    def effective_limits(self, vc: str, user: str, groups=()) -> UserLimits:
        """The limits in effect for ``user`` (member of ``groups``) in ``vc``: user > groups > default."""
        return self.user_limits(vc).resolve(user, groups)

    def check_limits(self, job: JobRequest, time_limit_s: float | None = None, also_waiting: int = 0) -> None:
        """Raise ``LimitRefusal`` (a RequestError naming the limit) if ``job``'s owner may not queue it
        in its VC: it asks for more GPUs, a higher priority or a longer time limit than their limits
        allow, or they already have ``max_queued_jobs`` waiting (``also_waiting``: theirs about to be
        submitted). A query: it changes nothing."""
        self._gate.check_submit(job, time_limit_s, also_waiting)

    def finish(self, job_id: str, now: float) -> list[Decision]:
        j = self.job_record(job_id)
        now = self.begin_call(now)
        out: list[Decision] = []
        called_off: list[Job] = []
        if j.state == WAITING:
            self._dequeue(j)
        elif j.state == PREEMPTING:
            called_off = self._call_off(j)
        preemptors = self._take_preemptors(j)
        self._release(j)
        del self._jobs[job_id]
        out.append(Decision("finished", job_id, now))
        for v in called_off:
            self._regain_guarantee(v, now, out)
        self._victim_gone(job_id, preemptors, now, out)
        self.run_passes(now, out)
        return out

    def finish_many(self, job_ids: Sequence[str], now: float) -> list[Decision]:
        """``finish`` of each of ``job_ids`` in turn, at one instant, with the scheduling passes run once,
        after the last of them, instead of once after each: jobs that end together (the launcher reports
        their exits in one batch) give their GPUs back together, and each VC's queue is walked once for
        them (with 10,000 jobs waiting a pass is ~1-5 ms, and every ended job paid one). The jobs the core
        does not hold are skipped (``finish`` refuses them). What the one pass starts may differ from what
        the passes between the finishes would have started; both are what the core decides for those
        releases at that instant (the simulator, whose replays must match, finishes one by one)."""
        out: list[Decision] = []
        with self.passes_deferred(out):
            for job_id in job_ids:
                if job_id in self._jobs:
                    out += self.finish(job_id, now)
        return out

    @contextlib.contextmanager
    def passes_deferred(self, out: list) -> Iterator[None]:
        """Within it, calls leave the scheduling passes they make due (their VCs stay dirty) instead of
        running them; on leaving, the passes run once, at the core's clock, their decisions appended to
        ``out`` (``finish_many``; the overflow wrapper's, which finishes through its own ``finish``)."""
        outer = self._passes_deferred
        self._passes_deferred = True
        try:
            yield
        finally:
            self._passes_deferred = outer
            if not outer:
                self.run_passes(self._now, out)

    def cancel(self, job_id: str, now: float) -> list[Decision]:
        """Withdraw a job (waiting, preempting or running): the same as ``finish``. A preemptor that
        is withdrawn calls its preemption off: victims not yet stopped keep running."""
        return self.finish(job_id, now)

    # ------------------------------------------------------------------ group commit: submits that can be undone
    def submit_if_waiting(self, job: JobRequest, now: float) -> Decision | None:
        """``submit`` for a job that can only wait, in a form that ``withdraw_waiting`` undoes exactly.

        If ``submit`` would just queue ``job`` and change nothing else (it cannot start now without
        preempting, its VC has no lower-priority work it could preempt, no scheduling pass is due),
        queue it and return its ``queued`` decision (the one ``submit`` would give). Otherwise change
        nothing and return None: the caller uses ``submit``. A caller that stores its jobs (the
        service's group commit) can so decide several submits, store them in one transaction and, if
        the store refuses, withdraw them as if they had never been submitted."""
        if not isinstance(job, JobRequest):
            raise RequestError("job", f"expected a JobRequest, got {type(job).__name__}")
        validate_request(self, job)
        now = self.begin_call(now)
        if self.state.opp_dirty or any(vc.dirty for vc in self.state.vcs.values()):
            return None  # submit would run a scheduling pass: other jobs may start
        if job_share(job):
            return None  # a share of a GPU packs onto shared GPUs: submit's own placement decides
        if job.priority != -1:
            vc = self.state.vcs[job.vc]
            if self.starving(vc, now) or any(p < job.priority for p in vc.prio_count):
                return None  # submit would hold the VC back, or may preempt
            if vc.queue and (self.backfill or self._strict):
                return None  # submit would run the VC's pass (reservations decide who may pass)
        j = Job(job, self._seq)
        over = self._gate.blocked(j, {})
        if over is not None:  # its owner is at a per-user limit: submit queues it with that reason
            self._seq += 1
            self._jobs[job.id] = j
            self.enqueue(j, mark=False)
            j.fail = over
            return Decision("queued", job.id, now, reason=_views.wait_reason(self, j))
        with self.trial(j) as txn:  # every placement submit could make without preempting (a superset of what it tries)
            if job.priority == -1:
                res = place_opportunistic(self.state, j, txn)
            else:
                free = vc.pins[job.pinned_cell].free if job.pinned_cell is not None else \
                    sum(vc.free[c] for c in self.state.job_chains(job, vc))
                res = self._place_best(j, txn) if job.total_gpus <= free else None
        if res is not None:
            return None
        self._seq += 1
        self._jobs[job.id] = j
        self.enqueue(j, mark=False)
        j.fail = NOFIT
        return Decision("queued", job.id, now, reason=_views.wait_reason(self, j))

    def withdraw_waiting(self, job_ids: list[str]) -> None:
        """Undo ``submit_if_waiting`` of ``job_ids`` (the latest submits, nothing else called since):
        they leave the queue and the core as if never submitted. RequestError (nothing changed) if one
        of them is unknown or no longer waiting."""
        for job_id in job_ids:
            j = self.job_record(job_id)
            if j.state != WAITING or j.preemptors or j.waiting_on:
                raise RequestError("job_id", f"job {job_id} is not just waiting; it cannot be withdrawn")
        for job_id in reversed(job_ids):
            j = self._jobs.pop(job_id)
            self._dequeue(j)
            if j.seq == self._seq - 1:
                self._seq -= 1

    def lend(self, job_id: str, now: float) -> list[Decision]:
        """``job_id`` keeps its place in its VC (the virtual GPUs it holds, or will hold once it starts) but
        none of the physical ones: it gives back its GPUs, CPUs and memory, opportunistic work may run
        there, and it never evicts any. Its VC's guaranteed placements still see its GPUs held; when they
        are wanted back (it ends, or is preempted), whatever runs there is preempted as any opportunistic
        work in a VC's cells. For the overflow wrapper's ghosts (``overflow.py``): a job that ended early
        whose VC's cells keep its private cluster's timing. A share job, or an opportunistic one, is not
        lent (nothing changes). Returns what starts in the GPUs it gave back."""
        j = self.job_record(job_id)
        if j.share or j.req.priority < 0 or j.demoted:
            return []
        j.lent = True
        if j.state != RUNNING or not (j.pleaves or j.res):  # it lends from its start (``_commit``, ``install``)
            return []
        leaf_set = self.state.leaf_set
        for leaf in j.pleaves:
            if leaf.job == job_id:
                leaf_set(leaf, None, False)
        for node, cpus, mem in j.res:
            node.cpus_free += cpus
            node.memory_free += mem
        j.pleaves, j.res = [], []
        self.state.mark_all_dirty()
        return self.schedule(now)

    def preemption_done(self, job_id: str, now: float, requeue: bool = True) -> list[Decision]:
        j = self.job_record(job_id)
        if j.preempted_by is None:
            raise RequestError("job_id", f"job {job_id} is not being preempted (no preempting decision named it)")
        now = self.begin_call(now)
        out: list[Decision] = []
        by = j.preempted_by
        preemptors = self._take_preemptors(j)
        self._release(j)
        j.preempted_by = None
        out.append(Decision("preempted", job_id, now, by=by))
        error = None
        if requeue:
            try:  # a job demoted by a reconfiguration may no longer fit its VC at all
                validate_request(self, j.req, new=False)
            except RequestError as e:
                error = str(e)
        queued_at = None
        if requeue and error is None:
            j.opp = j.req.priority == -1
            j.demoted = False
            j.started_at = None
            self.enqueue(j)
            queued_at = len(out)
        else:
            del self._jobs[job_id]
            if error is not None:
                out.append(Decision("rejected", job_id, now, error=f"cannot be queued again: {error}"))
        self._victim_gone(job_id, preemptors, now, out)
        self.run_passes(now, out)
        if queued_at is not None:  # the log says it is queued again, right after `preempted`
            reason = _views.wait_reason(self, j) if j.state == WAITING else f"preempted by {by}; queued again"
            out.insert(queued_at, Decision("queued", job_id, now, reason=reason))
        return out

    def set_node_health(self, node: str, healthy: bool, now: float) -> list[Decision]:
        state = self.state
        if node not in state.nodes:
            raise RequestError("node", f"unknown node {node!r}")
        now = self.begin_call(now)
        if healthy:
            state.node_down.discard(node)
        else:
            state.node_down.add(node)
        n = state.nodes[node]
        n.healthy = bool(healthy)
        for idx in sorted(n.gpu_leaves):
            state.apply_health(n.gpu_leaves[idx])
        state.mark_all_dirty()
        out: list[Decision] = []
        if not healthy:
            self._replan_reservations([n.gpu_leaves[i] for i in sorted(n.gpu_leaves)], now, out)
        self.run_passes(now, out)
        return out

    def set_gpu_health(self, node: str, gpu: int, healthy: bool, now: float) -> list[Decision]:
        state = self.state
        if node not in state.nodes:
            raise RequestError("node", f"unknown node {node!r}")
        leaves = state.nodes[node].gpu_leaves
        if gpu not in leaves:
            raise RequestError("gpu", f"node {node} has no GPU {gpu!r} (it has {sorted(leaves)})")
        now = self.begin_call(now)
        if healthy:
            state.gpu_down.discard((node, gpu))
        else:
            state.gpu_down.add((node, gpu))
        state.apply_health(leaves[gpu])
        out: list[Decision] = []
        if not healthy:
            self._replan_reservations([leaves[gpu]], now, out)
        self.run_passes(now, out)
        return out

    def schedule(self, now: float) -> list[Decision]:
        now = self.begin_call(now)
        out: list[Decision] = []
        self.run_passes(now, out)
        return out

    def _replan_reservations(self, leaves: list, now: float, out: list) -> None:
        """A preemptor never starts on GPUs that went bad while it waited for its victims: it gives
        up its reservation and is queued again (then placed anew; its victims are still stopped)."""
        hit: dict[str, None] = {}
        for leaf in leaves:
            if not leaf.healthy and leaf.reserved_by is not None:
                hit[leaf.reserved_by] = None
        for jid in sorted(hit, key=lambda x: self._jobs[x].seq):
            p = self._jobs[jid]
            if p.state != PREEMPTING:
                continue
            bad = sorted(f"{leaf.node}/{leaf.gpu}" for leaf in p.reserved if not leaf.healthy)
            self._cancel_reservation(p, now, out, f"GPUs it reserved went bad ({', '.join(bad)}); "
                                                  "it waits to be placed again")

    # ================================================================== queries (views.py; they change nothing)
    def job(self, job_id: str) -> JobView:
        """One job as the caller sees it, with the reason it waits (RequestError if unknown)."""
        return _views.job(self, job_id)

    def jobs(self) -> list[JobView]:
        """Every job: per VC its running ones, then its waiting ones in queue order, then opportunistic."""
        return _views.job_views(self)

    def cluster_view(self) -> dict:
        return _views.cluster_view(self)

    def vc_view(self) -> dict[str, dict]:
        return _views.vc_view(self)

    def vc_doomed_by_chain(self, name: str) -> dict[str, int]:
        """chain -> VC ``name``'s guaranteed GPUs on bad (or drained) hardware: doomed, not usable now."""
        return _views.vc_doomed_by_chain(self, name)

    def gpu_count(self) -> int:
        return _views.gpu_count(self)

    def free_gpu_count(self) -> int:
        """GPUs that are healthy, unused and unreserved (pinned ones included)."""
        return _views.free_gpu_count(self)

    # ================================================================== the public view (read-only) and the twins' tools
    # What the core's helpers (views, what_if, estimates, recovery, fit) read and call: docs/core-api.md
    # "The public view". Change nothing you read through it; the core's own loops use its dicts directly.
    @property
    def job_table(self) -> Mapping[str, Job]:
        """Every job's record by id, in submission order (a read-only mapping)."""
        return self._job_table

    @property
    def now(self) -> float:
        """The core's clock: the latest time any call gave it."""
        return self._now

    @property
    def next_seq(self) -> int:
        """The sequence number the next submitted job gets (ties between jobs break by it)."""
        return self._seq

    @property
    def order(self):
        """The ``policies.QueueOrder`` that orders each VC's queue (``policy`` is its name)."""
        return self._order

    @property
    def strict_order(self) -> bool:
        """Reservations and nobody passes them (see the class docstring)."""
        return self._strict

    @property
    def admission(self) -> AdmissionGate:
        """The per-user limits and their checks (query it: ``blocked``, ``usage``; change limits with
        ``set_user_limits``)."""
        return self._gate

    @property
    def limit_tables(self) -> Mapping[str, LimitTable]:
        """VC -> its per-user limits, for the VCs that have any (a read-only mapping)."""
        return MappingProxyType(self._gate.tables)

    def queue_key(self, j: Job) -> tuple:
        """``j``'s place in its queue, ``(the order's key, its id)``: its VC's queue (``state.vcs[vc].queue``)
        or, for opportunistic jobs, the cluster-wide FIFO (``state.opp_queue``)."""
        return (_FIFO_KEY(j) if j.req.priority == -1 else self._qkey(j), j.req.id)

    def trial(self, job: Job | None = None) -> Trial:
        """A ``state.Trial`` on this scheduler: ``with core.trial(j) as txn: ...`` undoes every change of the
        cells, the scheduling flags and the cells bound for the try, and takes ``job`` (entered in the job
        table for the try: placement looks its job up) out again, unless ``txn.commit()``."""
        return Trial(self.state, True, self.placement, self._jobs if job is not None else None, job)

    def fork(self, **changes) -> "Scheduler":
        """A new scheduler over this one's config with its settings (policy, starvation_after and
        starvation_hold, fair share, backfill, strict order, private placement, per-user limits) and nothing on it: no jobs, every GPU
        healthy, its clock at 0. For twins that rehearse on this cluster (the start estimates' replay, the fit
        check). ``changes``: constructor arguments that differ (``trusted=True``: it replays jobs this
        scheduler validated, so it checks nothing and explains nothing)."""
        settings = dict(policy=self.policy, starvation_after=self.starvation_after, fair_share=self._fair_share,
                        backfill=self.backfill, strict_order=self._strict, private_placement=self.private_placement,
                        starvation_hold=self.starvation_hold)
        settings.update(changes)
        twin = Scheduler(self.config, **settings)
        twin.set_limit_tables(self._gate.tables)
        return twin

    def set_limit_tables(self, tables: Mapping[str, LimitTable]) -> None:
        """Every VC's per-user limits at once, without a pass (a twin kept in step with its core)."""
        self._gate.tables = dict(tables)

    def enter_job(self, req: JobRequest) -> Job:
        """A new record for ``req`` with the next sequence number, entered in the job table and nothing else
        (the caller installs or queues it: ``adopt``, the estimates' twin)."""
        j = Job(req, self._seq)
        self._seq += 1
        self._jobs[req.id] = j
        return j

    def put_back(self, j: Job) -> None:
        """Enter an existing record in the job table again (a reconfiguration carries its jobs into the new
        state; then ``restore_submission_order``)."""
        self._jobs[j.req.id] = j

    def restore_submission_order(self) -> None:
        """The job table in submission order again (views and tie-breaks follow it), in place: the
        placement reads this very table."""
        ordered = sorted(self._jobs.items(), key=lambda kv: kv[1].seq)
        self._jobs.clear()
        self._jobs.update(ordered)

    def clear_jobs(self) -> None:
        """Take every job out, deciding nothing and running no pass: their cells go back through the state's
        primitives and every queue empties (a twin made ready for its next replay; health is kept)."""
        for j in list(self._jobs.values()):
            if j.state == WAITING:
                self._dequeue(j)
            self._release(j)
        self._jobs.clear()
        self._flush_idle()
        for vc in self.state.vcs.values():
            vc.dirty = True
            vc.min_bypass = None
            vc.held_for = None
        self.state.opp_dirty = True

    def rewind_clock(self, now: float) -> None:
        """Set the clock of a scheduler without jobs to ``now``, back if need be (a twin replaying on times
        relative to a new start). RequestError while it holds jobs."""
        if self._jobs:
            raise RequestError("now", "only a scheduler without jobs may set its clock back")
        self._now = float(now)

    # ================================================================== start-time estimates
    def estimate_starts(self, now: float, expected=None, alternatives=None, names=None, max_waiting=None) -> dict:
        """``{job id: StartEstimate(start, basis)}`` for every waiting job: a forward simulation of the
        current state in which running jobs end at their ``time_limit_s`` (else at ``expected[id]``,
        an ``estimates.Expected``; else never). A query: it changes nothing (see ``estimates``;
        ``alternatives``, ``names`` and ``max_waiting`` there)."""
        return _estimates.estimate_starts(self, float(now), expected, alternatives=alternatives, names=names,
                                          max_waiting=max_waiting)

    def new_estimator(self) -> "_estimates.StartEstimates":
        """A holder of a replay twin of this core's own, for ``estimates_snapshot`` (a replay off the caller's
        thread must not share ``self.estimator``'s twin, which backfill replays on)."""
        return _estimates.StartEstimates(self)

    def estimates_snapshot(self, estimator, now: float, expected=None, alternatives=None, names=None,
                           max_waiting=None) -> "_estimates.EstimatesSnapshot":
        """``estimate_starts`` in two halves: this copy of its inputs (O(jobs)), and its ``run()``, the
        replay, which touches only the copy and ``estimator``'s twin (``new_estimator``), so it may run on
        another thread while this core changes; ``run()`` answers what ``estimate_starts`` answered now."""
        return _estimates.EstimatesSnapshot(self, estimator, float(now), expected, alternatives=alternatives,
                                            names=names, max_waiting=max_waiting)

    # ================================================================== internals: bookkeeping
    def job_record(self, job_id: str) -> Job:
        """Job ``job_id``'s record (read it, change nothing); RequestError if unknown."""
        j = self._jobs.get(job_id)
        if j is None:
            raise RequestError("job_id", f"unknown job {job_id!r}")
        return j

    def begin_call(self, now: float) -> float:
        """Where every call that may change state starts: ``now`` checked (a number, never going back),
        the clock moved to it, derived caches dropped (``version`` ticks), fair-share usage accrued."""
        try:
            now = float(now)
        except (TypeError, ValueError):
            raise RequestError("now", f"must be a number of seconds, got {now!r}") from None
        if now < self._now - 1e-6:
            raise RequestError("now", f"time must not go backwards ({now} < {self._now})")
        self._now = max(self._now, now)
        self._reservations = None
        self.version += 1  # every call that may change state ticks: readers cache by it
        if self._track_usage:
            self._advance_usage(now)
        return now

    def _advance_usage(self, now: float) -> None:
        """Add to the ledger the GPUs running jobs held since the previous call (state is constant between calls)."""
        at = self._ledger.at
        if at is not None and now <= at:
            return
        users: dict[str, float] = {}
        groups: dict[str, float] = {}
        if at is not None:
            for j in self._jobs.values():
                if j.state is RUNNING and j.gpus:
                    req = j.req
                    users[req.user] = users.get(req.user, 0.0) + j.gpus
                    groups[req.group] = groups.get(req.group, 0.0) + j.gpus
        self._ledger.advance(now, users, groups)

    # ------------------------------------------------------------------ fair-share usage (kept across restarts by the caller)
    def usage_ledger(self) -> UsageLedger:
        return self._ledger

    def usage_snapshot(self) -> dict:
        """Decayed GPU-seconds per user and group as a plain dict (store it; give it to ``restore_usage``)."""
        return self._ledger.snapshot()

    def restore_usage(self, snapshot: dict) -> None:
        """Replace the usage ledger by ``snapshot`` (from ``usage_snapshot``); RequestError when malformed."""
        try:
            self._ledger.restore(snapshot)
        except ValueError as e:
            raise RequestError("usage", str(e)) from None

    def enqueue(self, j: Job, mark: bool = True) -> None:
        """``j`` waits: into its VC's queue or the opportunistic one at its ``queue_key`` (``mark``: its
        queue's pass is due)."""
        j.state = WAITING
        if j.req.priority == -1:
            j.qkey = (_FIFO_KEY(j), j.req.id)
            insort(self.state.opp_queue, j.qkey)
            if mark:
                self.state.opp_dirty = True
        else:
            j.qkey = (self._qkey(j), j.req.id)
            vc = self.state.vcs[j.req.vc]
            insort(vc.queue, j.qkey)
            shapes = vc.shapes
            shapes[j.shape] = shapes.get(j.shape, 0) + 1
            if mark:
                vc.dirty = True

    def _dequeue(self, j: Job) -> None:
        if j.req.priority == -1:
            lst = self.state.opp_queue
            vc = None
        else:
            vc = self.state.vcs[j.req.vc]
            lst = vc.queue
        i = bisect_left(lst, j.qkey)
        if i < len(lst) and lst[i] == j.qkey:
            del lst[i]
            if vc is not None:
                shapes = vc.shapes
                n = shapes[j.shape] - 1
                if n:
                    shapes[j.shape] = n
                else:
                    del shapes[j.shape]

    def starving(self, vc, now: float) -> bool:
        """Does an overtaken job of ``vc`` (a ``VCState``) hold its queue back at ``now`` (anti-starvation)?"""
        return (self.starvation_after is not None and vc.min_bypass is not None
                and now - vc.min_bypass >= self.starvation_after)

    def _mark_bypassed(self, vc, now: float) -> None:
        """A job of ``vc`` started while others wait: they have been overtaken (anti-starvation clock)."""
        for _, jid in reversed(vc.queue):
            w = self._jobs[jid]
            if w.bypass_since is not None:
                break
            w.bypass_since = now
            if vc.min_bypass is None or now < vc.min_bypass:
                vc.min_bypass = now

    def _take_preemptors(self, j: Job) -> list[str]:
        p = j.preemptors
        j.preemptors = []
        return p

    def _stopping_in(self, vc: str) -> dict[str, int]:
        """Job id -> priority of VC ``vc``'s guaranteed jobs being stopped for a preemptor (non-lazy
        victims: they gave up their virtual cells but still run). A preemptor of higher priority may
        take their GPUs the first one did not reserve (``preemption.py``). Stale entries are dropped."""
        out: dict[str, int] = {}
        stopping = self._stopping
        for jid in list(stopping):
            x = self._jobs.get(jid)
            if x is None or x.state != RUNNING or x.preempted_by is None or x.demoted or not x.opp:
                del stopping[jid]
            elif x.req.vc == vc:
                out[jid] = x.req.priority
        return out

    def _forget_victims(self, p: Job) -> list[Job]:
        """``p`` no longer waits for its victims; returns those nobody else waits for."""
        alone = []
        for vid in p.waiting_on:
            v = self._jobs.get(vid)
            if v is not None and p.req.id in v.preemptors:
                v.preemptors.remove(p.req.id)
                if v.preempted_by == p.req.id and v.preemptors:
                    v.preempted_by = v.preemptors[0]
                if not v.preemptors:
                    alone.append(v)
        p.waiting_on = []
        return alone

    def _call_off(self, p: Job) -> list[Job]:
        """A preemptor is withdrawn: its victims that nobody else waits for are no longer to be
        stopped. Returns them (they get their guarantee back once ``p`` released its cells)."""
        alone = self._forget_victims(p)
        for v in alone:
            v.preempted_by = None
        return alone

    def _regain_guarantee(self, v: Job, now: float, out: list) -> None:
        """A victim whose preemption was called off holds its VC's cells again (if it lost them
        without being demoted, as a non-lazy victim does); else it runs on as opportunistic."""
        if v.state != RUNNING or not v.opp or v.demoted or v.req.priority == -1 or v.detached:
            return
        if job_share(v.req):  # its GPU's other shares lost their cell with it: they all run on opportunistically
            self._demote(v, now, out, "its preemptor was withdrawn; its GPU share keeps running as opportunistic")
            return
        with self.state.trial(flags=False) as txn:
            vleaves = self.installer.cover_with_vcells(v, [(None, None, None, v.pleaves)], (), txn)
            if vleaves is not None:
                txn.commit()
        if vleaves is None:
            self._demote(v, now, out, "its preemptor was withdrawn but its GPUs are no longer within "
                                      f"VC {v.req.vc}'s free guaranteed cells; it keeps running as opportunistic")
            return
        for leaf in v.pleaves:
            self.state.leaf_set(leaf, jopp=False)
        v.vleaves = vleaves
        v.opp = False
        self.installer.register_holder(v)

    def _victim_gone(self, victim_id: str, preemptors: list[str], now: float, out: list) -> None:
        for pid in preemptors:
            p = self._jobs.get(pid)
            if p is None or p.state != PREEMPTING or victim_id not in p.waiting_on:
                continue
            p.waiting_on.remove(victim_id)
            if not p.waiting_on:
                self._start_reserved(p, now, out)

    def _start_reserved(self, p: Job, now: float, out: list) -> None:
        if p.reserved:
            self.state.leaves_set(p.reserved, job=p.req.id, jopp=p.opp, reserved_by=None)
        p.pleaves, p.reserved = p.reserved, []
        size = job_share(p.req)
        if size and p.pleaves:
            self.shares.join(p, p.pleaves[0], p.placement[0].share_slot, size)
        p.state = RUNNING
        p.started_at = now
        out.append(Decision("started", p.req.id, now, placement=p.placement, opportunistic=p.opp))

    def _share_pack(self, j: Job, size: int, now: float, out: list) -> bool:
        """Start share job ``j`` on a GPU already shared (nothing else changes above the GPU)."""
        got = self.shares.pick(j, size)
        if got is None:
            return False
        leaf, first = got
        tg = j.req.tasks[0]
        node = leaf.node_obj
        node.cpus_free -= tg.cpus
        node.memory_free -= tg.memory_mb
        self._dequeue(j)
        j.fail = None
        j.bypass_since = None
        guaranteed = j.req.priority != -1
        self.installer.install(j, [(0, 0, node, [leaf])], [leaf.vcell] if guaranteed else [], not guaranteed, [],
                               now, out, announce=True, share_slot=first)
        return True

    def _release(self, j: Job) -> None:
        """Give back everything ``j`` uses or reserves."""
        jid = j.req.id
        if j.pleaves and j.pleaves[0].shares is not None:
            self.shares.leave(j)  # another share job on its GPU takes over the leaf, else it is freed below
        state = self.state
        mine = [leaf for leaf in j.pleaves if leaf.job == jid]
        if mine:
            state.leaves_set(mine, None, False)  # (job, jopp)
        if j.reserved:
            mine = [leaf for leaf in j.reserved if leaf.reserved_by == jid]
            if mine:
                state.leaves_set(mine, reserved_by=None)
        roots = {}
        held = [v for v in j.vleaves if v.job == jid]
        if held:
            state.vunhold_many(held, j.req.priority)
            for v in held:
                roots[v.root.id] = v.root
        state.release_idle_roots(roots.values())
        if j.res:
            for node, cpus, mem in j.res:
                node.cpus_free += cpus
                node.memory_free += mem
            # CPUs/memory came back (the state marks only freed GPUs): a waiting job of any VC that
            # asked for them (a CPU-only task above all) may start now, not only at the next submit
            state.mark_all_dirty()
        if j.vleaves:
            self.installer.unregister_holder(j)
        if j.req.vc in self._gate.tables:  # its owner's jobs waiting at a limit may start now
            state.vcs[j.req.vc].dirty = True
            state.opp_dirty = True
        j.pleaves, j.reserved, j.vleaves, j.res = [], [], [], []
        j.placement = ()
        j.waiting_on = []
        j.detached = ()

    def _demote(self, x: Job, now: float, out: list, reason: str, keep_bound: list | None = None) -> None:
        self.installer.strip_guarantee(x, keep_bound)
        x.demoted = True
        out.append(Decision("demoted", x.req.id, now, reason=reason))

    def _cancel_reservation(self, x: Job, now: float, out: list, reason: str) -> None:
        self._forget_victims(x)
        self._release(x)
        self.enqueue(x)
        x.fail = Requeued(reason)
        out.append(Decision("queued", x.req.id, now, reason=reason))

    # ================================================================== internals: scheduling
    def run_passes(self, now: float, out: list) -> None:
        """Run the scheduling passes that are due (dirty VCs, then the opportunistic queue, until nothing is
        due), appending their decisions to ``out``: the end of every call."""
        if self._passes_deferred:
            return  # (``finish_many`` runs them after its last finish; the VCs stay due meanwhile)
        state = self.state
        ordered = state.vcs_in_order
        for _ in range(8):
            for vc in ordered:
                if vc.dirty:
                    vc.dirty = False
                    if vc.queue:
                        self._pass_vc(vc, now, out)
            if state.opp_dirty:
                state.opp_dirty = False
                if self.state.opp_queue:
                    self._pass_opp(now, out)
            if not state.opp_dirty:
                for vc in ordered:  # (a plain loop: this runs after every call)
                    if vc.dirty:
                        break
                else:
                    return

    def _pass_needed(self, j: Job, vc, now: float) -> bool:
        """Would a pass of ``vc`` on ``j``'s submit decide anything its last pass did not? (Asked when the VC
        is not due, ``vc.dirty`` False, but holds its queue back for an overtaken job, which takes every
        submit through a pass.) That pass (``vc.held_for``) decided nothing and ended held back for an
        overtaken job ``w``; nothing gave the VC room since (it would be due), so each job it failed fails
        again. A pass now decides the same, and leaves ``j`` failed at its place in the queue
        (``_queue_behind``), when: ``w`` still waits and is still the first overtaken job in the queue (no
        job ahead of it has waited ``starvation_after`` since it was overtaken, in the meantime), it still
        reserves the same cells (or still none), no holder of the VC's cells came since (``adopt``: a job
        may preempt it), and ``j`` cannot start: fewer GPUs are free in its VC than
        it needs and there is nobody it may preempt, or a waiting job of its shape is ahead of it (the pass
        fails that job first, and then ``j`` without trying it), or it waits behind ``w`` holding the VC
        back. A pass is needed otherwise, and always under per-user limits, reservations or a dynamic order."""
        if not self.pass_skip or self._gate.tables or self._order.dynamic or j.share or self.starvation_after is None:
            return True
        w, cells, prios = vc.held_for
        if w.state is not WAITING or self._jobs.get(w.req.id) is not w:
            return True
        if vc.prio_count != prios:  # a holder came without a pass (``adopt``): a waiting job may preempt it
            return True
        after, jobs = self.starvation_after, self._jobs
        wkey = w.qkey
        for key in vc.queue:  # (the first overtaken job stands near the head of the queue)
            if key == wkey:
                break
            b = jobs[key[1]].bypass_since
            if b is not None and now - b >= after:
                return True
        else:
            return True
        if (None if self.starvation_hold else reserve_cells(self.state, w)) != cells:
            return True
        req = j.req
        key = (self._qkey(j), req.id)  # its place in the queue (``enqueue``'s)
        if cells is None and key > wkey:
            return False  # it waits behind ``w``, which holds the VC back: the pass does not try it
        state = self.state
        if req.pinned_cell is not None:
            free = vc.pins[req.pinned_cell].free
        else:
            chains = state.job_chains(req, vc)
            free = vc.free[chains[0]] if len(chains) == 1 else sum(vc.free[c] for c in chains)
        if j.gpus > free and not (any(p < req.priority for p in vc.prio_count) or (
                self._stopping and any(p < req.priority for p in self._stopping_in(req.vc).values()))):
            return False
        shape = j.shape
        for k in vc.queue:
            if k >= key:
                return True
            x = jobs[k[1]]
            if x.shape is shape and x.lost_at != now:
                return False
        return True

    def _queue_behind(self, j: Job, vc) -> None:
        """``j`` waits as the pass ``_pass_needed`` found needless would leave it: failed at its place."""
        self.enqueue(j, mark=False)
        w, cells, _ = vc.held_for
        j.fail = NOFIT if j.qkey < w.qkey else HeldBack(w.req.id, reserved=cells is not None)
        # (``vc.min_bypass`` is left as it is, where the pass would set it anew: it only answers ``starving``,
        # which says yes either way while ``w`` waits, as both are at most ``w``'s overtaken time; the next
        # pass sets it as the pass now would have)

    def _ordered_waiting(self, vc) -> list[Job]:
        return list(map(self._jobs.__getitem__, map(_JOB_ID, vc.queue)))

    def _pass_vc(self, vc, now: float, out: list) -> None:
        jobs = self._ordered_waiting(vc)
        if self._order.dynamic:
            jobs = self._order.arrange(jobs, self, vc.name, started=lambda j: j.state != WAITING)
        placement = self.placement
        outer, placement.fenced = placement.fenced, frozenset()  # (a pass of another VC may be nested in one)
        n = len(out)
        vc.held_for = None
        self._untried = False
        try:
            held_for = self._pass_vc_jobs(vc, jobs, now, out)
        finally:
            placement.fenced = outer
        # (a pass that decided something may have changed what its earlier jobs saw; one that left a job
        # untried, its reservation taken over at this instant, did not give it the failure a later pass does)
        if len(out) == n and not self._untried and held_for is not None:
            vc.held_for = (*held_for, dict(vc.prio_count))
        vc.min_bypass = self._min_bypass(vc, jobs)

    def _min_bypass(self, vc, jobs) -> float | None:
        """The earliest time a job waiting in ``vc.queue`` was overtaken (None: none was), after a pass over
        ``jobs``. A list ``jobs`` was the queue at the pass's start, so the queue now is those of them still
        waiting, and the jobs a preemption queued during the pass, none of them overtaken (a job's
        ``bypass_since`` is cleared when it takes cells): the list's own objects are read, not each job
        looked up by its id (a pass over 10,000 waiting jobs spent a fifth of its time on the lookups)."""
        if type(jobs) is list:
            since = [b for j in jobs if (b := j.bypass_since) is not None and j.state is WAITING]
        else:
            jobs_of = self._jobs
            since = [b for _, jid in vc.queue if (b := jobs_of[jid].bypass_since) is not None]
        return min(since) if since else None

    def _pass_vc_jobs(self, vc, jobs: list[Job], now: float, out: list) -> tuple | None:
        """Try ``jobs`` (a VC's waiting jobs in its order) in turn. Returns, for a plain pass (no per-user
        limits, reservations or dynamic order) that ended with the VC held back for an overtaken job, that
        job and the cells it reserves (None: it holds the VC back); else None."""
        memo: dict = {}
        held: dict = {}  # what users hold, for the admission gate (this pass only)
        skipped: list[Job] = []
        hold = None  # a starving job that reserves no cells: every job behind it waits
        fenced_for = None  # a starving job that reserves cells (``starvation.py``): those behind start elsewhere
        reserve = self.backfill or self._strict
        blocked: list[Job] = []   # backfill: waiting jobs ahead that hold reservations
        limited = bool(self._gate.tables)  # no VC has per-user limits: nobody is blocked (the common case)
        # Once every shape still ahead in ``jobs`` has failed in this pass (``memo``), nothing behind can
        # start: the rest only get their failure (``_fail_rest``). ``ahead`` counts each shape's jobs not yet
        # walked; ``open_shapes`` those shapes with jobs ahead that have not failed. (Not with per-user limits
        # or reservations, whose skips do not go through ``memo``, nor under a dynamic order such as drf,
        # whose ``jobs`` is an iterator that orders the rest as jobs start.)
        fast = self.pass_shortcut and not limited and not reserve and type(jobs) is list
        if fast:
            ahead = Counter(vc.shapes)  # (the shapes of ``jobs``, which are ``vc.queue``'s)
            open_shapes = len(ahead)
        held_back = None  # the failure of the jobs behind ``hold`` (or ``fenced_for``): one object per pass
        reserved = None  # the cells ``fenced_for`` reserves
        for i, j in enumerate(jobs):
            if fast:
                ahead[j.shape] -= 1
            if j.state is not WAITING:
                continue
            if hold is not None:
                j.fail = held_back
                continue
            over = self._gate.blocked(j, held) if limited else None
            if over is not None:  # its owner is at a limit: skip it, not the jobs behind it
                j.fail = over
                j.bypass_since = None  # not overtaken: it waits for its owner's own jobs
                continue
            if blocked and j.req.priority <= max(b.req.priority for b in blocked):
                if not self._may_backfill(j, blocked, now):
                    continue
                if self._attempt(j, now, out, memo):
                    self._gate.started(j, held)
                else:
                    blocked.append(j)
                continue
            if reserve:
                if self._attempt(j, now, out, memo):
                    self._gate.started(j, held)
                else:
                    blocked.append(j)
                continue
            if j.shape in memo:  # a job of this shape did not fit in this pass (as _attempt's memo)
                j.fail = memo[j.shape]
                started = False
            else:
                started = self._attempt(j, now, out, memo)
                if fast:  # (the memo grew, or was cleared by a preemption)
                    open_shapes = sum(1 for k, n in ahead.items() if n > 0 and k not in memo)
            if started:
                self._gate.started(j, held)
                for s in skipped:
                    if s.bypass_since is None:
                        s.bypass_since = now
            else:
                skipped.append(j)
                if fenced_for is not None:
                    j.fail = held_back
                elif (self.starvation_after is not None and j.bypass_since is not None
                        and now - j.bypass_since >= self.starvation_after):
                    cells = None if self.starvation_hold else reserve_cells(self.state, j)
                    if cells is None:
                        hold = j
                        held_back = HeldBack(j.req.id)
                    else:
                        fenced_for = j
                        held_back = HeldBack(j.req.id, reserved=True)
                        self.placement.fenced = fence_of(cells)  # (a shape that did not fit still does not)
                    reserved = cells
            if fast and open_shapes == 0:
                if held_back is None:
                    return self._fail_rest(jobs, i + 1, memo, now)
                self._held_back_rest(jobs, i + 1, held_back)
                return (hold or fenced_for, reserved)
        if fast and (hold or fenced_for) is not None:
            return (hold or fenced_for, reserved)
        return None

    def _fail_rest(self, jobs: list[Job], start: int, memo: dict, now: float) -> tuple | None:
        """What ``_pass_vc_jobs`` does to ``jobs[start:]`` once each of their shapes has failed in the pass
        (``memo``) and no overtaken job holds the VC back yet: none starts, so each only gets its failure,
        and the anti-starvation check may still hold back or fence the VC for the jobs behind an overtaken
        one. Returns what ``_pass_vc_jobs`` does."""
        after = self.starvation_after
        i = start
        for j in islice(jobs, start, None):
            i += 1
            if j.state is not WAITING:
                continue
            j.fail = memo[j.shape]
            b = j.bypass_since
            if after is not None and b is not None and now - b >= after:
                cells = None if self.starvation_hold else reserve_cells(self.state, j)
                if cells is None:
                    held_back = HeldBack(j.req.id)
                else:
                    held_back = HeldBack(j.req.id, reserved=True)
                    self.placement.fenced = fence_of(cells)
                self._held_back_rest(jobs, i, held_back)
                return (j, cells)
        return None

    @staticmethod
    def _held_back_rest(jobs: list[Job], start: int, held_back: HeldBack) -> None:
        """The waiting jobs of ``jobs[start:]`` wait behind an overtaken job (``held_back``: one object for
        them all, as it is frozen)."""
        for j in islice(jobs, start, None):
            if j.state is WAITING:
                j.fail = held_back

    def _may_backfill(self, j: Job, blocked: list[Job], now: float) -> bool:
        """Backfill: ``j`` (behind the reservations ``blocked``) may try to start only if its time limit
        ends before every one of their estimated starts; else it waits (``Reserved``)."""
        first = blocked[0]
        limit = j.req.time_limit_s
        if self._strict or limit is None:
            j.fail = Reserved(first.req.id, None, limit)
            return False
        if self._reservations is None:
            self._reservations = {}
        vc = j.req.vc
        if vc not in self._reservations:
            self._reservations[vc] = _estimates.estimate_starts(self, now, vc=vc)
        for b in blocked:
            est = self._reservations[vc].get(b.req.id)
            start = est.start if est is not None else None
            if start is None or now + limit > start + 1e-6:
                j.fail = Reserved(b.req.id, start, limit)
                return False
        return True

    def _pass_opp(self, now: float, out: list) -> None:
        memo: dict = {}
        held: dict = {}
        gate = self._gate
        limited = bool(gate.tables)  # no VC has per-user limits: nobody is blocked (the common case)
        jobs = self._jobs
        for _, jid in list(self.state.opp_queue):
            j = jobs.get(jid)
            if j is not None and j.state == WAITING:
                over = gate.blocked(j, held) if limited else None
                if over is not None:
                    j.fail = over
                elif j.shape in memo:  # a job of this shape did not fit in this pass (as _attempt_opp's memo)
                    j.fail = memo[j.shape]
                elif self._attempt_opp(j, now, out, memo):
                    gate.started(j, held)

    def _attempt(self, j: Job, now: float, out: list, memo: dict | None) -> bool:
        """Try to start (or start preempting for) guaranteed job ``j``."""
        req = j.req
        key = j.shape
        if memo is not None and key in memo:
            j.fail = memo[key]
            return False
        if j.lost_at == now:
            # a higher-priority job took its reservation over at this instant: it tries again once time moves
            # on (else, when the other's placement then fails, the two take the cells from each other
            # without end inside one call); its fail stays the takeover's sentence
            self._untried = True
            return False
        size = j.share
        if size:  # a share: pack onto a GPU its VC shares already, else open one as a one-GPU task would
            if self._share_pack(j, size, now, out):
                return True
            j, share_job = share_proxy(j), j
            req = j.req
        state = self.state
        vc = state.vcs[req.vc]
        if req.pinned_cell is not None:
            free = vc.pins[req.pinned_cell].free
        else:
            chains = state.job_chains(req, vc)
            free = vc.free[chains[0]] if len(chains) == 1 else sum(vc.free[c] for c in chains)
        lowp = any(p < req.priority for p in vc.prio_count) or (
            self._stopping and any(p < req.priority for p in self._stopping_in(req.vc).values()))
        if j.gpus > free and not lowp:  # no room in its VC and nobody it may preempt: nothing to try
            if size:
                j = share_job
            j.fail = NOFIT
            if memo is not None:
                memo[key] = NOFIT
            self._flush_idle()
            return False
        res = None
        forced: list[str] = []
        with state.trial() as txn:
            if j.gpus <= free:  # (== req.total_gpus, computed once)
                if self.private_placement and state.opp_leaves > 0:  # where its private cluster would place it
                    res = self.placement.place(j, OPPORTUNISTIC, txn)
                else:
                    res = self.placement.place(j, FREE, txn)
                    if res is None and state.opp_leaves > 0:
                        txn.undo_to(0)
                        res = self.placement.place(j, OPPORTUNISTIC, txn)
            if res is None and lowp:
                txn.undo()  # cells and flags as they were: the preemption search starts from there
                res, forced = self._preempt_lower(j, now, out, txn)
                if forced is not None:
                    txn.forget_flags()  # victims were demoted / reservations taken over (not undone)
                    if memo is not None:
                        memo.clear()
            if res is not None:
                txn.commit()
        if size:
            j = share_job
        if res is None:
            j.fail = NOFIT
            if memo is not None:
                memo[key] = NOFIT
            self._flush_idle()
            return False
        self._commit(j, res, forced or [], now, out)
        self._flush_idle()
        return True

    def _flush_idle(self) -> None:
        placement = self.placement
        if placement.pending_idle:
            roots, placement.pending_idle = placement.pending_idle, []
            self.state.release_idle_roots(roots)

    def _attempt_opp(self, j: Job, now: float, out: list, memo: dict | None) -> bool:
        key = j.shape
        if memo is not None and key in memo:
            j.fail = memo[key]
            return False
        size = j.share
        if size and self._share_pack(j, size, now, out):
            return True
        if (1 if size else j.gpus) > self.state.avail_gpus():  # fewer GPUs free for it than it needs
            j.fail = NOFIT
            if memo is not None:
                memo[key] = NOFIT
            return False
        with self.state.trial() as txn:
            res = place_opportunistic(self.state, share_proxy(j) if size else j, txn)
            if res is not None:
                txn.commit()
        if res is None:
            j.fail = NOFIT
            if memo is not None:
                memo[key] = NOFIT
            return False
        self._commit(j, res, [], now, out)
        return True

    def _preempt_lower(self, j: Job, now: float, out: list, txn: Trial):
        """Free room in ``j``'s VC by preempting its lower-priority jobs (lowest priorities first)."""
        req = j.req
        victims = self.preemption.victims(j)
        if not victims:
            return None, None
        forced: list[str] = []
        keep: list = []
        lazy_roots: list = []
        claim: list[str] = []  # jobs already being stopped for a preemptor whose reservation this one takes over
        for x in sorted(victims, key=lambda x: x.seq):
            if x.state == PREEMPTING:
                claim.extend(x.waiting_on)
                x.lost_at = now
                self._cancel_reservation(x, now, out, f"its reservation was taken over by {req.id} "
                                                      f"(priority {req.priority} > {x.req.priority})")
            elif x.req.lazy_preemption:
                self._demote(x, now, out, f"lazy preemption: {req.id} (priority {req.priority}) needs its "
                                          f"guaranteed GPUs; it keeps running as opportunistic until they are needed",
                             lazy_roots)
            else:
                self.installer.strip_guarantee(x, keep)
                forced.append(x.req.id)
                self._stopping[x.req.id] = None
        # First let the lazily demoted victims' idle cells go back to the buddy pool, so the
        # preemptor may bind cells elsewhere and they keep running; if that fails (e.g. no healthy
        # free cell), keep the cells where they are, as the search above did. A non-lazy victim's
        # cells stay bound: the preemptor takes exactly those.
        keep.extend(lazy_roots)
        mark = len(txn)
        for r in dict.fromkeys(lazy_roots):
            if r.held == 0 and r.pin is None and r.bound is not None:
                self.state.unbind(r, txn)
        placement = self.placement
        placement.claimable = frozenset(forced + claim)  # the victims this preemptor stops: their GPUs are its to take
        try:
            res = self._place_best(j, txn)
            if res is None:
                txn.undo_to(mark)
                res = self._place_best(j, txn)
        finally:
            placement.claimable = frozenset()
        placement.pending_idle.extend(keep)
        return res, forced

    def _place_best(self, j: Job, txn: Trial):
        mark = len(txn)
        res = self.placement.place(j, FREE, txn)
        if res is None:
            txn.undo_to(mark)
            res = self.placement.place(j, OPPORTUNISTIC, txn)
        return res

    def _commit(self, j: Job, res: list, forced: list[str], now: float, out: list) -> None:
        """A placement was found (its virtual GPUs held, its CPUs taken): install it."""
        jid = j.req.id
        leaves_all = [leaf for _, _, _, leaves in res for leaf in leaves]
        seen = dict.fromkeys(forced)
        for leaf in leaves_all:
            if leaf.job is not None and leaf.job != jid and not j.lent:  # (a lent job evicts nobody)
                seen[leaf.job] = None
        if self.state.shared:  # a shared GPU's anchor stands for all its share jobs
            seen = dict.fromkeys(self.shares.victims(seen))
        victims = sorted(seen, key=lambda v: self._jobs[v].seq) if seen else []
        self._dequeue(j)
        j.fail = None
        j.bypass_since = None
        guaranteed = j.req.priority != -1
        self.installer.install(j, res, [leaf.vcell for leaf in leaves_all] if guaranteed else [], not guaranteed,
                               victims, now, out, announce=True)

    # ------------------------------------------------------------------ inputs of dynamic queue orders (DRF)
    def vc_usage(self, vc: str) -> dict[str, list[float]]:
        """user -> [GPUs, CPUs, memory MB] used by the VC's started jobs."""
        use: dict[str, list[float]] = {}
        for j in self._jobs.values():
            if j.req.vc == vc and j.state != WAITING:
                u = use.setdefault(j.req.user, [0.0, 0.0, 0.0])
                u[0] += j.req.total_gpus
                u[1] += sum(t.cpus * t.count for t in j.req.tasks)
                u[2] += sum(t.memory_mb * t.count for t in j.req.tasks)
        return use

    def vc_capacity(self, vc: str) -> tuple[float, float, float]:
        """The VC's GPUs and its share (by GPUs) of the cluster's CPUs and memory."""
        gpus = self.state.vcs[vc].guaranteed() + sum(p.size for p in self.state.vcs[vc].pins.values())
        total = self.config.gpu_count() or 1
        frac = gpus / total
        cpus = sum(n.cpus for n in self.state.node_list) * frac
        mem = sum(n.memory_mb for n in self.state.node_list) * frac
        return float(gpus), cpus, mem
