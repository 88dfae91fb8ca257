"""When will each waiting job start? A forward simulation of the live state (``Scheduler.estimate_starts``).

The core replays the future on a *twin*: a second ``Scheduler`` over the same config (``fork``) that
``StartEstimates`` keeps between calls (building the cell trees is the expensive part). Each call puts the live state into it
(health, the running jobs through ``adopt`` on their exact GPUs, the waiting jobs in their order),
lets every running job end at its expected time (its ``time_limit_s``, else an expected duration the
caller learned, e.g. from the user's history: ``RuntimeHistory``), records when each waiting job
starts, and empties the twin again. Nothing of the live scheduler changes.

Assumptions a reader of an estimate should know: nothing new arrives, preemption victims stop at
once, jobs run exactly their expected time, a job with neither a limit nor an expected duration runs
forever (so whatever waits for it has no estimate), and under ``backfill`` the simulation serves each
VC in strict order (no backfilling in the future: the estimate is the latest start backfill allows).

``core`` is the ``Scheduler`` (not imported here: ``scheduler.py`` imports this module).
"""

from __future__ import annotations

import heapq
import statistics
from collections import deque
from dataclasses import dataclass
from typing import Mapping

from .errors import RequestError
from .jobs import PREEMPTING, RUNNING, WAITING
from .recovery import resolve_placement
from .words import limit_text


@dataclass(frozen=True)
class Expected:
    """How long a job is expected to run, and why we think so."""

    seconds: float
    source: str = "limit"     # "limit" (its time limit) | "history" (learned from past runs) | "vc" (its VC's default limit)
    user: str = ""            # history: whose runs
    runs: int = 0             # history: how many
    kind: str = ""            # history: what kind of job (its command or name); vc: the VC

    def describe(self, viewer: str | None = None) -> str:
        if self.source == "limit":
            return f"its time limit of {_duration(self.seconds)}"
        if self.source == "vc":
            return f"if it runs {self.kind}'s default time limit of {_duration(self.seconds)}"
        whose = "your" if viewer is not None and viewer == self.user else f"{self.user}'s"
        return f"from {whose} last {self.runs} run{'s' if self.runs != 1 else ''} of {self.kind}"


@dataclass(frozen=True)
class StartEstimate:
    """``start``: core time the job would start (None: unknown); ``basis``: one line saying why."""

    start: float | None
    basis: str

    def to_dict(self) -> dict:
        return {"start": self.start, "basis": self.basis}


NO_LIMIT = "running jobs have no time limit"
_NO_ESTIMATE = StartEstimate(None, NO_LIMIT)
BEYOND = "beyond the estimate's horizon"
_BEYOND = StartEstimate(None, BEYOND)


def _duration(s: float) -> str:
    """A limit in the words every surface uses for limits (``2h``, ``1h30m``: words.limit_text)."""
    return limit_text(float(s))


class RuntimeHistory:
    """The last ``keep`` run times per (user, kind of job); the median is the expected duration.

    Deterministic and pure: the caller records finished runs (e.g. the service from its store) and
    asks ``expected(user, kind)`` for a running or waiting job without a time limit."""

    def __init__(self, keep: int = 5):
        self.keep = keep
        self._runs: dict[tuple[str, str], deque] = {}

    def record(self, user: str, kind: str, seconds: float) -> None:
        if not kind or seconds is None or seconds < 0:
            return
        self._runs.setdefault((user, kind), deque(maxlen=self.keep)).append(float(seconds))

    def expected(self, user: str, kind: str) -> Expected | None:
        runs = self._runs.get((user, kind))
        if not runs:
            return None
        return Expected(statistics.median(runs), "history", user, len(runs), kind)


class StartEstimates:
    """A core's start estimates (``core.estimator``): the twin they replay the future on, kept between
    calls and made again when the core's config changes or a replay left it changed."""

    def __init__(self, core):
        self.core = core
        self.twin = None

    def replay_twin(self):
        """The twin, empty, in step with the core's settings and per-user limits. Under backfill it keeps
        to strict order (the estimate is the latest start backfill allows)."""
        core = self.core
        twin = self.twin
        if twin is None or twin.config is not core.config:
            twin = self.twin = core.fork(backfill=False, strict_order=core.backfill or core.strict_order,
                                         trusted=True)
        twin.set_limit_tables(core.limit_tables)  # the same per-user limits (the twin's own jobs count)
        return twin


def expected_of(req, expected: Mapping[str, Expected] | None) -> Expected | None:
    limit = getattr(req, "time_limit_s", None)
    if limit is not None:
        return Expected(float(limit), "limit")
    return expected.get(req.id) if expected else None


def estimate_starts(core, now: float, expected: Mapping[str, Expected] | None = None,
                    max_steps: int | None = None, vc: str | None = None,
                    alternatives: Mapping[str, str] | None = None,
                    names: Mapping[str, str] | None = None, max_waiting: int | None = None) -> dict[str, StartEstimate]:
    """Estimated start of every waiting job of the live ``core`` (see ``replay_starts``), on the core's own
    twin (``core.estimator``)."""
    return replay_starts(core.estimator.replay_twin(), core.estimator, core.job_table.values(),
                         core.state.node_down, core.state.gpu_down, now, expected, max_steps=max_steps, vc=vc,
                         alternatives=alternatives, names=names, max_waiting=max_waiting)


class _JobCopy:
    """What the replay reads of one core job, copied (``EstimatesSnapshot``): the live record changes
    under a replay that runs off the event loop."""

    __slots__ = ("req", "seq", "state", "opp", "placement", "started_at", "preempted_by", "detached")

    def __init__(self, j):
        self.req = j.req                 # (frozen)
        self.seq = j.seq
        self.state = j.state
        self.opp = j.opp
        self.placement = j.placement     # (a tuple of frozen TaskPlacements)
        self.started_at = j.started_at
        self.preempted_by = j.preempted_by
        self.detached = j.detached       # (a tuple)


class _WaitingCopy:
    """``_JobCopy`` of a waiting job: what the replay reads of one (its request, order, state and queue) is
    copied; the rest is what every waiting job has (no placement, start, preemptor or detached tasks: the replay
    reads those of running jobs only). A snapshot holds thousands under a flood: this is cheaper to make."""

    __slots__ = ("req", "seq", "opp")
    state = WAITING
    placement = ()
    started_at = None
    preempted_by = None
    detached = ()

    def __init__(self, j):
        self.req = j.req
        self.seq = j.seq
        self.opp = j.opp


class EstimatesSnapshot:
    """The inputs of one ``estimate_starts`` taken from a live core in one go (O(jobs), on its thread), so
    that the replay itself (``run``, ~(waiting jobs)^2) may run on another thread while the core goes on
    changing: each job's state, placement and start copied, the unhealthy hardware copied, and a twin of
    ``estimator``'s own (not ``core.estimator``, which the core's backfill replays on) made ready. ``version``:
    the core's ``version`` it was taken at (publish a result only while the core is still there).

    One snapshot of an ``estimator`` runs at a time (they share its twin)."""

    def __init__(self, core, estimator: "StartEstimates", now: float, expected=None,
                 alternatives: Mapping[str, str] | None = None, names: Mapping[str, str] | None = None,
                 max_waiting: int | None = None):
        self.version = core.version
        self.estimator = estimator
        self.twin = estimator.replay_twin()
        self.jobs = tuple(_WaitingCopy(j) if j.state is WAITING else _JobCopy(j) for j in core.job_table.values())
        self.node_down = frozenset(core.state.node_down)
        self.gpu_down = frozenset(core.state.gpu_down)
        self.now = float(now)
        self.expected = expected
        self.alternatives = dict(alternatives) if alternatives else None
        self.names = dict(names) if names else None
        self.max_waiting = max_waiting

    def run(self) -> dict[str, StartEstimate]:
        """What ``estimate_starts`` answered when the snapshot was taken (touches only the snapshot and the
        twin: safe on a worker thread)."""
        return replay_starts(self.twin, self.estimator, self.jobs, self.node_down, self.gpu_down, self.now,
                             self.expected, alternatives=self.alternatives, names=self.names,
                             max_waiting=self.max_waiting)


def replay_starts(twin, estimator: StartEstimates, core_jobs, node_down, gpu_down, now: float,
                  expected: Mapping[str, Expected] | None = None,
                  max_steps: int | None = None, vc: str | None = None,
                  alternatives: Mapping[str, str] | None = None,
                  names: Mapping[str, str] | None = None, max_waiting: int | None = None) -> dict[str, StartEstimate]:
    """Estimated start of every waiting (or preempting) job of a core (its jobs ``core_jobs``, its unhealthy
    nodes and GPUs ``node_down``, ``gpu_down``) at core time ``now``, replayed on ``twin`` (``estimator``'s,
    dropped there if the replay did not leave it empty).

    ``vc``: only that VC's guaranteed jobs (backfill's reservations). Its guaranteed jobs only ever
    use its own virtual cells, and HiveD's buddy invariant keeps those bindable whatever the other
    VCs do, so the other VCs' jobs and opportunistic work (preempted at once) are left out: the
    same starts for a fraction of the work.

    ``alternatives``: waiting jobs that are two requests for the same work (``{a: b, b: a}``, e.g. a
    job and its overflow shadow): when one starts in the simulation the other is withdrawn, as the
    driver would, so the two never hold GPUs at once. ``names``: how a job id is shown in a basis
    ("when j-1 ends"), for ids the driver does not show.

    ``max_waiting``: replay only the first that many waiting jobs (by submission; a job's alternative
    with it, not counted); the others get no start ("beyond the estimate's horizon"). Each job that ends in the
    replay runs a scheduling pass over every waiting job, so the replay costs ~(waiting jobs)^2: 10,000
    waiting 1-GPU jobs took ~20 s of the server's event loop. Left out, the later jobs cannot pass the
    earlier ones in the replay (an earlier start for those is then not seen)."""
    jobs = sorted(core_jobs, key=lambda j: j.seq)
    if vc is not None:
        jobs = [j for j in jobs if j.req.vc == vc and not j.opp]
    waiting = [j for j in jobs if j.state == WAITING or j.state == PREEMPTING]
    if not waiting:
        return {}
    beyond: list[str] = []
    if max_waiting is not None and len(waiting) > max_waiting:
        kept: set[str] = set()
        replayed = 0
        for j in waiting:
            if replayed >= max_waiting:
                break
            if j.req.id not in kept:  # (not already in as an earlier job's alternative)
                kept.add(j.req.id)
                replayed += 1
                if alternatives and j.req.id in alternatives:
                    kept.add(alternatives[j.req.id])
        beyond = [j.req.id for j in waiting if j.req.id not in kept]
        waiting = [j for j in waiting if j.req.id in kept]
        out_of = set(beyond)
        jobs = [j for j in jobs if j.req.id not in out_of]
    # expected durations of the running jobs now; of the waiting ones only if the replay below needs them
    exp = {j.req.id: expected_of(j.req, expected) for j in jobs if j.state is RUNNING}
    t0 = now
    heap: list = []
    ends: dict[str, float] = {}
    starts: dict[str, tuple[float, str | None]] = {}
    try:
        twin.rewind_clock(0.0)  # the twin runs on time relative to ``now``
        for node in sorted(node_down):
            twin.set_node_health(node, False, 0.0)
        for node, gpu in sorted(gpu_down):
            twin.set_gpu_health(node, gpu, False, 0.0)
        seq = 0
        for j in jobs:
            if j.state is not RUNNING or j.preempted_by is not None or j.detached:
                continue  # a victim being stopped is gone at once; detached tasks cannot be put back
            if not _put_running(twin, j):
                continue
            e = exp[j.req.id]
            if e is not None:
                started = j.started_at if j.started_at is not None else now
                end = max(0.0, started + e.seconds - t0)
                ends[j.req.id] = end
                heapq.heappush(heap, (end, seq, j.req.id))
                seq += 1
        pending = []
        if not heap and not any(j.state == PREEMPTING or j.preempted_by is not None for j in jobs):
            # nothing running is expected to end and nothing is being freed: the twin is the core's own
            # state, where these jobs already wait, so none of them would start (and the live core has
            # just passed its queues): no need to replay them one by one
            waiting_only = waiting
            waiting = []
        else:
            waiting_only = []
            exp.update((j.req.id, expected_of(j.req, expected)) for j in waiting)
        wanted = {j.req.id for j in waiting}
        for j in waiting:
            try:
                pending += twin.submit(j.req, 0.0)
            except RequestError:
                continue
        cause: str | None = None
        steps = 0
        limit = max_steps if max_steps is not None else 4 * len(jobs) + 16
        t = 0.0
        while True:
            while pending:
                d = pending.pop(0)
                if d.event == "started":
                    if d.job in wanted and d.job not in starts:
                        starts[d.job] = (t, cause)
                    other = alternatives.get(d.job) if alternatives else None
                    if other is not None and other in twin.job_table and twin.job_table[other].state == WAITING:
                        pending += [x for x in twin.finish(other, t) if x.job != other]
                    e = exp.get(d.job)
                    if e is not None:
                        rem = e.seconds if d.job not in ends else max(0.0, ends[d.job])
                        ends[d.job] = t + rem
                        heapq.heappush(heap, (t + rem, seq, d.job))
                        seq += 1
                elif d.event == "preempting":
                    for v in d.victims:
                        try:
                            pending += twin.preemption_done(v, t, requeue=True)
                        except RequestError:
                            pass
                elif d.event == "preempted" and d.job in ends:
                    ends[d.job] = ends[d.job] - t  # what it has left, once it starts again
            if len(starts) == len(wanted) or not heap or steps >= limit:
                break
            end, _, jid = heapq.heappop(heap)
            if ends.get(jid) != end or twin.job_table.get(jid) is None or twin.job_table[jid].state is not RUNNING:
                continue  # stale entry (preempted and started again)
            steps += 1
            t = end
            cause = jid
            del ends[jid]
            pending += twin.finish(jid, t)
    finally:
        if not _empty(twin):
            estimator.twin = None  # never trust a twin that did not come back empty
    out: dict[str, StartEstimate] = dict.fromkeys([j.req.id for j in waiting_only], _NO_ESTIMATE)  # (immutable)
    out.update(dict.fromkeys(beyond, _BEYOND))
    for j in waiting:
        jid = j.req.id
        if jid in starts:
            at, by = starts[jid]
            if by is None:
                basis = "GPUs are free for it now"
            else:
                e = exp.get(by)
                shown = names.get(by, by) if names else by
                basis = f"when {shown} ends ({e.describe(j.req.user) if e else 'its time limit'})"
            out[jid] = StartEstimate(t0 + at, basis)
        else:
            out[jid] = _NO_ESTIMATE if steps < limit else _BEYOND
    return out


def _put_running(twin, j) -> bool:
    """``adopt`` without its checks and its scheduling pass (the live core already accepted the job;
    waiting jobs come after): the twin's part of the cost that grows with the running jobs."""
    try:
        res = resolve_placement(twin.state, j.req, j.placement)
    except RequestError:
        return False
    tj = twin.enter_job(j.req)
    twin.installer.adopt_running(tj, res, j.opp, 0.0, [], "")
    return True


def _empty(twin) -> bool:
    """Take every job out of the twin and make its hardware healthy again (ready for the next call):
    each job's cells released through the state primitives, no scheduling passes in between. False:
    the twin did not come back empty."""
    t = twin.now
    twin.clear_jobs()
    for node in sorted(twin.state.node_down):
        twin.set_node_health(node, True, t)
    for node, gpu in sorted(twin.state.gpu_down):
        twin.set_gpu_health(node, gpu, True, t)
    return not twin.job_table and twin.free_gpu_count() == twin.gpu_count()
