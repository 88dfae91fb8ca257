"""The discrete-event loop that replays an event script against one policy.

The driver does what the live service does, with simulated time:

- a ``submit`` becomes a ``JobRequest``; a request the policy refuses becomes a ``rejected`` decision;
- a ``started`` job finishes ``duration`` seconds later (its remaining run time after a preemption);
  without a ``duration`` it runs until a ``finish`` event;
- a ``preempting`` decision stops each victim ``grace`` seconds later (``preemption_done``); a preempted
  job is queued again by the scheduler and keeps its remaining run time;
- ``node_down``/``gpu_down`` mark hardware bad: no new work lands there, running jobs keep running
  (the core does not stop them, and the replay does not invent failures);
- ``reconfigure`` loads the named cluster (a path relative to the event file, or a built-in name).

At one instant, job completions come first, then victims reaching the end of their grace period, then
the script's events in file order. Decisions are written (one JSON line each, exactly the public format)
as they happen. Everything is ordered by (time, kind, sequence number): no wall clock, no hashing.
"""

from __future__ import annotations

import heapq
import io
import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from ..decisions import Decision
from ..errors import RequestError
from ..policies import ORDERS as _CORE_ORDERS
from ..types import JobRequest, TaskPlacement
from .events import (
    Event,
    EventError,
    FinishEvent,
    GpuEvent,
    NodeEvent,
    ReconfigureEvent,
    SubmitEvent,
    load_events,
)
from .collector import collector_paused
from .metrics import Metrics, compute_metrics
from .private_pool import PendingPrivate, start as start_private
from .shape import ClusterShape, cluster_shape

__all__ = ["simulate", "simulate_policies", "SimResult", "POLICIES", "ORDERS", "make_scheduler", "decision_line"]

POLICIES = ("hived", "quota", "fifo", "private")
ORDERS = _CORE_ORDERS  # the core's registry of orders inside a VC (hive_scheduler.policies.register_order)

_COMPLETION, _STOP = 0, 1  # heap entries' kinds: at one instant completions come before stops


@dataclass
class SimResult:
    policy: str
    decisions: list[dict[str, Any]]
    metrics: Metrics
    end_time: float
    private: SimResult | None = field(default=None, repr=False)  # the reference of the sharing anomaly
    anomaly_note: str | None = None  # why the sharing anomaly was not computed, when it was asked for

    def to_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, "metrics": self.metrics.to_dict(), "end_time": self.end_time}


@dataclass
class _Run:
    duration: float | None
    remaining: float | None
    running_since: float | None = None
    generation: int = 0
    done: bool = False
    vc_seq: int | None = None  # the push of its end when it last started in its VC's cells (a ghost's rank)


def _num(t: float) -> float | int:
    return int(t) if float(t).is_integer() else float(t)


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def decision_line(decision: Any, now: float) -> dict[str, Any]:
    """A decision (core ``Decision``, baseline decision, dict or JSON text) as the public decision line.

    Objects are read by attribute (no intermediate ``to_json()`` dict: this runs once per decision)."""
    if type(decision) is Decision:  # the core's own: its fields read directly (the replay's hot path)
        return _core_line(decision, _num(now))
    if isinstance(decision, str):
        decision = json.loads(decision)
    if isinstance(decision, dict):
        get = decision.get
    else:
        def get(key: str, obj: Any = decision) -> Any:
            return getattr(obj, key, None)
    event = get("event")
    out: dict[str, Any] = {"t": _num(now), "job": get("job"), "event": event}
    if event == "started":
        out["placement"] = [
            {"task": _get(p, "task"), "node": _get(p, "node"), "gpus": list(_get(p, "gpus") or ())}
            for p in get("placement") or ()
        ]
        out["opportunistic"] = bool(get("opportunistic"))
    elif event in ("queued", "demoted"):
        reason = get("reason")
        if reason is not None:
            out["reason"] = reason
    elif event == "preempting":
        out["victims"] = list(get("victims") or ())
    elif event == "preempted":
        by = get("by")
        if by is not None:
            out["by"] = by
    elif event == "rejected":
        out["error"] = get("error") or ""
    return out


def _core_line(d: Decision, t: float | int) -> dict[str, Any]:
    """``decision_line`` of a core ``Decision`` (the same line, without the generic lookups); ``t``: the
    time as the line shows it (``_num(now)``)."""
    event = d.event
    out: dict[str, Any] = {"t": t, "job": d.job, "event": event}
    if event == "started":
        out["placement"] = [{"task": p.task, "node": p.node, "gpus": list(p.gpus or ())} if type(p) is TaskPlacement
                            else {"task": _get(p, "task"), "node": _get(p, "node"), "gpus": list(_get(p, "gpus") or ())}
                            for p in d.placement or ()]
        out["opportunistic"] = bool(d.opportunistic)
    elif event == "queued" or event == "demoted":
        if d.reason is not None:
            out["reason"] = d.reason
    elif event == "preempting":
        out["victims"] = list(d.victims or ())
    elif event == "preempted":
        if d.by is not None:
            out["by"] = d.by
    elif event == "rejected":
        out["error"] = d.error or ""
    return out


def _load_config(source: Any) -> Any:
    """A ``ClusterConfig`` (or ``ClusterShape``, enough for the baselines) from any cluster source."""
    if isinstance(source, ClusterShape) or (hasattr(source, "to_dict") and not isinstance(source, dict)):
        return source
    from ..config import load_cluster_config

    return load_cluster_config(source)


QUEUEING = ("skip", "strict", "backfill")


def make_scheduler(policy: str, config: Any, order: str = "fifo", overflow: bool = False,
                   queueing: str = "skip", private_timing: bool = False) -> Any:
    """A scheduler for ``policy`` (``hived``: the core, ``order`` inside each VC, wrapped in the overflow
    lever when ``overflow``, its ghosts keeping each VC's cells on private timing when ``private_timing``;
    ``quota``/``fifo``: the baselines; ``private``: one core per VC on a cluster of exactly its cells)."""
    if policy == "hived":
        from ..scheduler import Scheduler

        # with overflow, other VCs' work sits in a VC's cells: place as the private cluster would (issue 25)
        core = Scheduler(config, policy=order, backfill=queueing == "backfill", strict_order=queueing == "strict",
                         private_placement=overflow)
        if overflow:
            from ..overflow import OverflowScheduler

            return OverflowScheduler(core, keep_place=True, hold_private_time=private_timing)
        return core
    if policy == "private":
        from .private import PrivateScheduler

        if isinstance(config, ClusterShape):
            raise ValueError("the private policy needs the cluster's cells (a ClusterConfig), not a ClusterShape")
        return PrivateScheduler(config, order=order, queueing=queueing)
    if policy in ("quota", "fifo"):
        from .baselines import make_baseline

        return make_baseline(policy, config)
    raise ValueError(f"unknown policy {policy!r}; choose from {', '.join(POLICIES)}")


def _request(ev: SubmitEvent) -> JobRequest:
    return JobRequest(
        id=ev.job, vc=ev.vc, user=ev.user, tasks=ev.tasks, priority=ev.priority, within=ev.within,
        pinned_cell=ev.pinned_cell, lazy_preemption=ev.lazy_preemption, submit_time=float(ev.t),
        time_limit_s=ev.time_limit_s, group=ev.group, kind=ev.kind,
    )


class _Replay:
    def __init__(self, config: Any, policy: str, grace: float, sink: io.TextIOBase | None, source: str,
                 order: str = "fifo", overflow: bool = False, queueing: str = "skip", private_timing: bool = False,
                 scheduler: Any = None):
        self.config = config
        self.shape: ClusterShape = cluster_shape(config)
        self.policy = policy
        self.grace = float(grace)
        self.sink = sink
        self.source = source
        # ``scheduler``: a ready one (the parallel private replay's recorder or playback, private_pool.py)
        self.sched = scheduler if scheduler is not None else make_scheduler(policy, config, order, overflow, queueing,
                                                                             private_timing)
        # a job that ran to its end: ``complete`` where the policy tells it from a cancel (the overflow
        # wrapper's ghosts), and the ghosts' ends it schedules (``take_timers``, see overflow.py)
        self._complete = getattr(self.sched, "complete", self.sched.finish)
        self._take_timers = getattr(self.sched, "take_timers", None)
        self.heap: list[tuple[float, int, int, Any]] = []
        self.seq = 0
        self.runs: dict[str, _Run] = {}
        self.stopping: set[str] = set()
        self.decisions: list[dict[str, Any]] = []
        self.now = 0.0

    def push(self, t: float, kind: int, payload: Any, rank: float | None = None) -> None:
        """Schedule ``payload`` at ``t``; at one instant entries of a kind come in push order, or in
        ``rank`` order where given (a ghost's end: ``record``)."""
        self.seq += 1
        heapq.heappush(self.heap, (t, kind, (self.seq if rank is None else rank, self.seq), payload))

    def record(self, decisions: Iterable[Any]) -> None:
        now = self.now
        t = _num(now)
        ghosts = self._take_timers is not None
        seq_at: list[int] = []  # (with ghosts) the pushes made before each decision
        for d in decisions:
            line = _core_line(d, t) if type(d) is Decision else decision_line(d, now)
            self.decisions.append(line)
            if self.sink is not None:
                self.sink.write(json.dumps(line, separators=(",", ":")) + "\n")
            if ghosts:
                seq_at.append(self.seq)
            self.apply(line)
        if ghosts:
            for t_end, job, generation, at in self._take_timers(positions=True):
                self.push(t_end, _COMPLETION, (job, generation, True), self._ghost_rank(job, at, seq_at))

    def _ghost_rank(self, job: str, at: int | None, seq_at: list[int]) -> float:
        """Where a ghost's end comes among the ends at its instant: where the job's own end would come on
        its private cluster, i.e. pushed when it started in its VC (issue 38: when a ghost and a job of its
        VC end together, the order decides which waiting job gets which freed GPUs). A ghost that starts
        now (in place of a job that ran entirely outside) ranks as if its start were a decision at position
        ``at`` of this list; one that holds a job's cells after it ran to its end in them, as that job."""
        if at is not None:
            return (seq_at[at] if at < len(seq_at) else self.seq) + 0.5
        run = self.runs.get(job)
        if run is not None and run.vc_seq is not None:
            return run.vc_seq
        return self.seq + 0.5

    def apply(self, d: dict[str, Any]) -> None:
        job, event, now = d["job"], d["event"], self.now
        run = self.runs.get(job)
        if event == "started" and run is not None:
            run.running_since = now
            run.generation += 1
            if run.remaining is not None:
                self.push(now + run.remaining, _COMPLETION, (job, run.generation))
                if not d.get("opportunistic"):
                    run.vc_seq = self.seq
        elif event == "preempting":
            for victim in d["victims"]:
                if victim not in self.stopping:
                    self.stopping.add(victim)
                    self.push(now + self.grace, _STOP, victim)
        elif event == "preempted" and run is not None:
            run.vc_seq = None
            if run.running_since is not None and run.remaining is not None:
                run.remaining = max(0.0, run.remaining - (now - run.running_since))
            run.running_since = None
            run.generation += 1
        elif event in ("finished", "rejected") and run is not None:
            run.done = True
            run.running_since = None
            run.generation += 1

    def node_check(self, ev: NodeEvent | GpuEvent) -> None:
        node = next((n for n in self.shape.nodes if n.name == ev.node), None)
        if node is None:
            known = ", ".join(n.name for n in self.shape.nodes[:5])
            raise EventError(self.source, [(ev.line, f"{ev.op}: unknown node {ev.node!r} (nodes: {known}, ...)")])
        if isinstance(ev, GpuEvent) and ev.gpu >= node.gpu_count:
            raise EventError(
                self.source,
                [(ev.line, f"{ev.op}: node {ev.node!r} has GPUs 0..{node.gpu_count - 1}, got gpu {ev.gpu}")],
            )

    def external(self, ev: Event) -> None:
        now = self.now
        if isinstance(ev, SubmitEvent):
            self.runs[ev.job] = _Run(duration=ev.duration, remaining=ev.duration)
            try:
                decisions = self.sched.submit(_request(ev), now)
            except RequestError as exc:  # the policy refused it; nothing changed
                decisions = [{"job": ev.job, "event": "rejected", "error": str(exc)}]
            self.record(decisions)
        elif isinstance(ev, FinishEvent):
            run = self.runs.get(ev.job)
            if run is not None and not run.done:
                self.record(self.sched.finish(ev.job, now))
        elif isinstance(ev, NodeEvent):
            self.node_check(ev)
            self.record(self.sched.set_node_health(ev.node, ev.up, now))
        elif isinstance(ev, GpuEvent):
            self.node_check(ev)
            self.record(self.sched.set_gpu_health(ev.node, ev.gpu, ev.up, now))
        elif isinstance(ev, ReconfigureEvent):
            try:
                config = _load_config(ev.resolved_cluster())
            except (ValueError, OSError) as exc:
                raise EventError(self.source, [(ev.line, f"reconfigure: {exc}")]) from None
            self.shape = cluster_shape(config)
            self.record(self.sched.reconfigure(config, now))

    def run(self, events: Sequence[Event], progress: Callable[[int, int], None] | None) -> float:
        """Process the script's events merged with the completions and stops the replay schedules.

        The script's events are sorted once (by time, file order at one instant) and read in turn; only
        the scheduled completions and stops live in the heap, so it stays as small as what is running
        instead of holding the whole script. At one instant a heap entry comes before the script's event
        (completions and stops before the script, as documented)."""
        total = len(events)
        times = [float(ev.t) for ev in events]
        order = sorted(range(total), key=times.__getitem__)  # stable: file order at one instant
        heap = self.heap
        pop = heapq.heappop
        done = 0
        for i in order:
            t_ext = times[i]
            while heap and heap[0][0] <= t_ext:
                self.scheduled(*pop(heap))
            self.now = t_ext
            self.external(events[i])
            done += 1
            if progress is not None:
                progress(done, total)
        while heap:
            self.scheduled(*pop(heap))
        return self.now

    def scheduled(self, t: float, kind: int, _seq: int, payload: Any) -> None:
        """A completion or a stop the replay scheduled (heap entry ``(t, kind, seq, payload)``)."""
        self.now = t
        if kind == _COMPLETION:
            if len(payload) == 3:  # a ghost's hold ends (overflow.py)
                self.record(self.sched.ghost_end(payload[0], payload[1], t))
                return
            job, generation = payload
            run = self.runs[job]
            if run.generation == generation and not run.done:
                self.record(self._complete(job, t))
        else:  # _STOP
            self.stopping.discard(payload)
            run = self.runs.get(payload)
            if run is not None and not run.done and run.running_since is not None:
                try:
                    decisions = self.sched.preemption_done(payload, t, requeue=True)
                except RequestError:  # the preemption was called off (its preemptor left): keep running
                    decisions = []
                self.record(decisions)


def _events_of(events: Sequence[Event] | str | os.PathLike) -> tuple[list[Event], str]:
    if isinstance(events, (str, os.PathLike)):
        return list(load_events(events)), os.fspath(events)
    return list(events), "<events>"


def simulate(
    cluster: Any,
    events: Sequence[Event] | str | os.PathLike,
    policy: str = "hived",
    *,
    grace: float = 0.0,
    out: str | os.PathLike | io.TextIOBase | None = None,
    progress: Callable[[int, int], None] | None = None,
    order: str = "fifo",
    anomaly: bool = True,
    private: SimResult | PendingPrivate | None = None,
    overflow: bool = True,
    queueing: str = "skip",
    private_timing: bool = True,
    scheduler: Any = None,
) -> SimResult:
    """Replay ``events`` (a list, or a JSONL path) on ``cluster`` under ``policy``; return decisions and metrics.

    ``cluster``: a ``ClusterConfig`` or anything ``load_cluster_config`` takes (path, built-in name, dict).
    ``out``: a path or text stream that receives the decision lines as they happen.
    ``progress(done, total)`` is called after each script event.
    ``order``: how ``hived`` orders jobs inside a VC (a name in the core's order registry: ``fifo``, ``priority``, ``drf``, ``fair_share``...).
    ``anomaly``: compute the sharing anomaly against a ``private`` replay of the same events: ``private``
    when given (a result of ``simulate(..., "private")``), else one replayed here. Without it, or for a
    ``ClusterShape`` (no cells to build private clusters from), the anomaly fields are ``None``.
    ``overflow`` (``hived`` only, default on): a queued guaranteed job may run as opportunistic in idle
    GPUs elsewhere until its VC can place it (:mod:`hive_scheduler.overflow`); False: the bare core.
    ``private_timing`` (``hived`` with overflow, default on): each VC's own cells keep the timing of its
    private cluster (a job that ran T seconds outside its VC leaves its cells held T seconds longer: the
    overflow wrapper's ghosts), so no guaranteed job waits longer than on its private cluster; the GPU time
    held is ``metrics.held_gpu_s``. False: a job that ends early frees its cells early (the live server's
    behaviour), which can reorder the VC's next jobs and make some wait longer than privately.
    ``queueing`` (``hived`` only): ``skip`` (the core's default: a job that does not fit is passed by
    those behind it), ``strict`` (it holds a reservation nobody passes) or ``backfill`` (only jobs whose
    ``time_limit_s`` ends before the reservations ahead pass them). ``private`` queues by the same rule, and
    so does the private replay the anomaly is measured against (a baseline under another rule would count
    the rule's difference as anomaly). The private replay runs in worker processes, one per VC, while this
    one runs, when it can be exact (:mod:`hive_scheduler.sim.private_pool`); ``private`` may be such a
    pending replay (its result is waited for at the end).
    ``scheduler``: a ready scheduler object for ``policy`` instead of a new one (the parallel private
    replay's playback).
    """
    if queueing not in QUEUEING:
        raise ValueError(f"unknown queueing {queueing!r}; choose from {', '.join(QUEUEING)}")
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; choose from {', '.join(POLICIES)}")
    if grace < 0:
        raise ValueError(f"grace must be >= 0 seconds, got {grace}")
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}; choose from {', '.join(ORDERS)}")
    with collector_paused():  # (see collector.py: a fifth of a long replay's time otherwise)
        events, source = _events_of(events)
        config = _load_config(cluster)
        sink: io.TextIOBase | None = None
        close = False
        if isinstance(out, (str, os.PathLike)):
            sink = open(out, "w", encoding="utf-8")
            close = True
        elif out is not None:
            sink = out
        pending = None
        if anomaly and policy != "private" and private is None and _anomaly_note(config) is None:
            private = pending = _start_private(config, events, grace, order, queueing)  # (None: serially below)
        try:
            replay = _Replay(config, policy, grace, sink, source, order, overflow, queueing, private_timing,
                             scheduler=scheduler)
            end = replay.run(events, progress)
        except BaseException:
            if pending is not None:
                pending.close()
            raise
        finally:
            if close:
                sink.close()
        if isinstance(private, PendingPrivate):
            private = private.result()
        shape = cluster_shape(config)
        submits = [e for e in events if isinstance(e, SubmitEvent)]
        total = sum(shape.vc_total(vc) for vc in shape.vcs) if policy == "private" else shape.total_gpus
        reference: Any = None
        note = _anomaly_note(config) if anomaly and policy != "private" and private is None else None
        if anomaly and not isinstance(config, ClusterShape) and note is None:
            if policy == "private":
                reference, private = "self", None
            else:
                if private is None:
                    private = simulate(config, events, "private", grace=grace, order=order, anomaly=False,
                                       queueing=queueing)
                reference = private.metrics.waits
        else:
            private = None
        metrics = compute_metrics(policy, submits, replay.decisions, total_gpus=total, reference=reference)
        if policy == "hived" and overflow and private_timing:  # (the price of the ghosts: cells held)
            metrics.held_gpu_s = replay.sched.held_gpu_s
        return SimResult(policy=policy, decisions=replay.decisions, metrics=metrics, end_time=end, private=private,
                         anomaly_note=note)


def _start_private(config: Any, events: Sequence[Event], grace: float, order: str, queueing: str, *,
                   anomaly: bool = False, out: Any = None, progress: Any = None,
                   caller_busy: bool = True) -> PendingPrivate | None:
    """The private replay of ``events`` started in worker processes (None: it must run serially); its
    ``result()`` is ``simulate(config, events, "private", ...)`` with these arguments. ``caller_busy``:
    another policy replays here meanwhile."""
    def scheduler() -> Any:
        return make_scheduler("private", config, order, queueing=queueing)

    def replay(sched: Any, group: Sequence[Event]) -> list[dict[str, Any]]:  # (in a worker: one VC's events)
        r = _Replay(config, "private", grace, None, "<events>", scheduler=sched)
        with collector_paused():
            r.run(group, None)
        return r.decisions

    def finish(playback: Any) -> SimResult:
        return simulate(config, events, "private", grace=grace, order=order, anomaly=anomaly, queueing=queueing,
                        out=out, progress=progress, scheduler=playback)

    return start_private(events, scheduler=scheduler, replay=replay, finish=finish, caller_busy=caller_busy)


def _anomaly_note(config: Any) -> str | None:
    """Why no sharing anomaly can be computed on ``config`` (None: it can)."""
    if isinstance(config, ClusterShape):
        return "the cluster is a shape without cells (no private clusters to compare with)"
    from .private import private_unavailable

    reason = private_unavailable(config)
    return f"sharing anomaly not computable: {reason}" if reason else None


def simulate_policies(
    cluster: Any,
    events: Sequence[Event] | str | os.PathLike,
    policies: Sequence[str],
    *,
    grace: float = 0.0,
    out: Callable[[str], str | os.PathLike | io.TextIOBase | None] | None = None,
    progress: Callable[[str, int], Callable[[int, int], None] | None] | None = None,
    order: str = "fifo",
    anomaly: bool = True,
    overflow: bool = True,
    queueing: str = "skip",
    private_timing: bool = True,
) -> list[SimResult]:
    """``simulate`` each of ``policies`` on the same events, in that order; the ``private`` replay the
    sharing anomaly needs is done once and shared (it runs first, or in worker processes while the others
    run here, and is itself one of the results when ``private`` is among ``policies``; the others carry it
    as ``.private``). ``out(policy)``: where that
    policy's decisions go; ``progress(policy, total)``: a progress callback for that policy's replay."""
    events, _ = _events_of(events)
    config = _load_config(cluster)
    total = len(events)
    results: dict[str, SimResult] = {}
    note = _anomaly_note(config) if anomaly else None
    want_private = anomaly and note is None
    if "private" in policies and note is not None and not isinstance(config, ClusterShape):
        raise ValueError(f"the private policy cannot run: {note}")
    pending: PendingPrivate | None = None
    private: SimResult | None = None
    if want_private or "private" in policies:
        private_args: dict[str, Any] = dict(anomaly=want_private, out=out("private") if out and "private" in policies else None,
                            progress=progress("private", total) if progress else None)
        # in worker processes while the other policies replay here, when it can be exact (private_pool.py)
        pending = _start_private(config, events, grace, order, queueing, **private_args,
                                 caller_busy=any(p != "private" for p in policies))
        if pending is None:
            private = simulate(config, events, "private", grace=grace, order=order, queueing=queueing, **private_args)
    reference: SimResult | PendingPrivate | None = (pending or private) if want_private else None
    try:
        for policy in policies:
            if policy == "private":
                continue
            results[policy] = simulate(config, events, policy, grace=grace, order=order, anomaly=want_private,
                                       private=reference, overflow=overflow, queueing=queueing,
                                       private_timing=private_timing,
                                       out=out(policy) if out else None,
                                       progress=progress(policy, total) if progress else None)
    except BaseException:
        if pending is not None:
            pending.close()
        raise
    if "private" in policies:
        results["private"] = pending.result() if pending is not None else private  # type: ignore[assignment]
    if note is not None:
        for r in results.values():
            r.anomaly_note = note
    return [results[p] for p in policies]
