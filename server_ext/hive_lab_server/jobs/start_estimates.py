"""``estimated_start`` of queued jobs: the core's forward simulation, recomputed on change and cached.

After every unit of work that changed something the service asks ``refresh_soon`` (one recompute for
however many changes came meanwhile, spaced so it takes at most a tenth of the event loop and runs at
most 20 times a second); REST reads
take the cached answer (``get``), recomputing first only if the core changed and no refresh is on its
way; the answer to a submit never waits for it. On the event loop the recompute's replay (~(waiting
jobs)^2: up to ~1 s at 500) runs on a worker thread: the loop takes a copy of the core's inputs
(``estimates_snapshot``, O(jobs)), the thread replays it on a twin of the service's own, and the loop
publishes the answer only if the core's ``version`` is still the one the copy was taken at (else it
recomputes again), so a client reads what the inline replay would have answered for the same state. Running jobs end at their time limit
(the spec's ``time_limit_s``), else at the median run time of the owner's last 5 succeeded runs of
the same kind of job (same command, else same name), else at their VC's default time limit
(``vc_time_limits``' ``default_s``, which a kernel does not get as a limit: the basis says "if it runs
..."), else never. A queued job whose start therefore cannot be told gets no estimate at all (silence,
not "start unknown" on every queued job; see ``presentation.estimate_fields``); so do the waiting
jobs after the first ``MAX_WAITING`` (the replay's cost grows with the square of the jobs it replays).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import Any, Awaitable, Callable, Mapping, Protocol

from hive_scheduler.estimates import Expected, RuntimeHistory, StartEstimate

from hive_lab_server.wire.launch_spec import LaunchSpec


class EstimatesSource(Protocol):
    """What the estimates read of the service (``HiveService`` is one): the core, the store, the
    unfinished jobs and the service's clock."""

    scheduler: Any
    store: Any
    active: Mapping[str, Any]

    def now(self) -> float: ...

log = logging.getLogger("hive_lab_server")

HISTORY_RUNS = 5
HISTORY_ROWS = 1000  # succeeded jobs read back to learn run times (newest first)
MIN_GAP = 9.0        # a recompute waits at least this many times the last one's cost after it (<= 10 % of the loop)
MIN_INTERVAL_S = 0.05  # and at least this long (a burst of submits: at most 20 recomputes a second)
# the first this many waiting jobs (by submission) get an estimate, the later ones none ("beyond the
# estimate's horizon"): the replay costs ~(waiting jobs)^2 and blocks the event loop while it runs
# (bench_overload, 10,000 waiting ``true`` jobs: ~40 s; 500: ~0.1 s)
MAX_WAITING = 500


def kind_of(spec: LaunchSpec) -> tuple[str, str]:
    """(key, label) of a job's kind: its command (else its first task's command, else its name)."""
    command = spec.command or next((t.command for t in spec.tasks if t.command), None)
    name = spec.name or "job"
    if command:
        label = name if name != "job" else (command if len(command) <= 40 else command[:37] + "...")
        return f"cmd:{command}", label
    return f"name:{name}", name


def with_time_limit(request, limit: float | None):
    """The core request carrying the spec's ``time_limit_s`` (backfill and the estimates read it)."""
    if limit is None or getattr(request, "time_limit_s", None) == limit:
        return request
    return dataclasses.replace(request, time_limit_s=float(limit))


class StartEstimates:
    def __init__(self, svc: EstimatesSource, on_changed: Callable[[list[str]], None] | None = None,
                 off_loop: Callable[[Callable[[], Any]], Awaitable[Any]] = asyncio.to_thread):
        self.svc = svc
        self.off_loop = off_loop     # how the replay runs off the loop (a worker thread)
        # told the queued jobs whose shown estimate (start to the minute, basis) a recompute changed: live
        # views learn it (the estimate is not a stored state change, and a view that fetched a new job
        # before its first recompute would show none until something else happened)
        self.on_changed = on_changed
        self._cache: dict[str, StartEstimate] = {}
        self._version = -1           # the core version the cache is of
        self._history_at = -1        # succeeded-jobs count the history was learned at
        self._history = RuntimeHistory(HISTORY_RUNS)
        self._kinds: dict[str, str] = {}  # job id -> its kind's key, for the succeeded jobs ``_learn`` read
        self._labels: dict[str, str] = {}
        self._scheduled = False
        self._in_flight = False      # a replay runs on a worker thread (``_refresh_off_loop``)
        self._estimator = None       # the worker's replay twin (the core's ``new_estimator``)
        self._task: asyncio.Future | None = None  # the recompute in flight
        self._timer: asyncio.TimerHandle | None = None  # the recompute scheduled (``refresh_soon``)
        self._closed = False         # the service stopped: no recompute any more (``close``)
        self.stale = 0               # off-loop answers dropped: the core changed while they were computed
        self.last_ms = 0.0           # cost of the last recompute (the metrics/benchmarks read it)
        self._last_run = 0.0         # time.monotonic() at the end of the last recompute

    # ------------------------------------------------------------------ when
    def refresh_soon(self) -> None:
        """Recompute after this turn of the event loop; at most once per ``MIN_GAP x`` the last
        recompute's cost (and per ``MIN_INTERVAL_S``), so a burst of changes never spends more than a
        tenth of the loop on it."""
        if self._scheduled or self._in_flight or self._closed:
            return  # (a replay in flight schedules the next one when it ends, if the core changed meanwhile)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (tests driving the service synchronously): ``get`` recomputes on read
        self._scheduled = True
        wait = self._last_run + max(MIN_GAP * self.last_ms / 1000, MIN_INTERVAL_S) - time.monotonic()
        self._timer = loop.call_later(max(0.0, wait), self._start_off_loop)

    def close(self) -> None:
        """The service stops: the recompute scheduled is dropped and the one in flight cancelled (its replay
        ends on its worker thread unheard), so none starts or publishes after the stop, nor is left as a task
        the stopped loop never ran."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._scheduled = False
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def _start_off_loop(self) -> None:
        self._timer = None
        if self._version == self.svc.scheduler.version or not hasattr(self.svc.scheduler, "estimates_snapshot"):
            self._refresh_now()  # (nothing to do; or a core without the two halves: inline)
            return
        self._in_flight = True
        self._scheduled = False
        self._task = asyncio.ensure_future(self._refresh_off_loop())  # (held: the loop keeps tasks weakly)

    async def _refresh_off_loop(self) -> None:
        """One recompute with its replay on a worker thread; the answer published only if the core is
        still at the version it was copied at (else dropped, and another recompute scheduled)."""
        try:
            t0 = time.perf_counter()
            snap, expected = self._snapshot()
            loop_ms = 1000 * (time.perf_counter() - t0)

            def learn_and_replay():  # (the run times relearned here too: a store read, up to ~30 ms under a flood)
                self._learn()
                expected.history = self._history
                return snap.run()
            answer, replay_ms = await self.off_loop(lambda: _cpu_timed(learn_and_replay))
            # the cost that spaces recomputes: what the loop spent plus the replay's CPU on its thread (the
            # GIL it took from the loop; a replay counted as free would be rerun back to back)
            self.last_ms = loop_ms + replay_ms
            if self.svc.scheduler.version == snap.version:
                self._publish(snap.version, answer)
            else:
                self.stale += 1
        except Exception:  # an estimate must never break the service
            self._estimator = None  # (a twin a failed replay may have left changed)
            log.exception("hive-lab: computing start estimates failed")
        finally:
            self._in_flight = False
            self._last_run = time.monotonic()
        if self._version != self.svc.scheduler.version:
            self.refresh_soon()

    def _refresh_now(self) -> None:
        self._scheduled = False
        if self._version == self.svc.scheduler.version:
            return
        try:
            self.recompute()
        except Exception:  # an estimate must never break the service
            log.exception("hive-lab: computing start estimates failed")

    def get(self, job_id: str, fresh: bool = True) -> StartEstimate | None:
        """The cached estimate. ``fresh``: recompute first if the core changed and no refresh is on its
        way (never on the submit path, which answers from what is cached)."""
        if fresh and not self._scheduled and not self._in_flight and not self._closed \
                and self._version != self.svc.scheduler.version:
            self._refresh_now()
        return self._cache.get(job_id)

    # ------------------------------------------------------------------ what
    def _learn(self) -> None:
        """Relearn run times from the store when jobs succeeded since the last time: the newest
        ``HISTORY_ROWS`` succeeded jobs, oldest first. A job's kind is read from its spec once (a succeeded
        job's spec never changes) and kept while the job is among them: decoding the 1,000 specs on each
        recompute was most of a recompute's time under a flood of short jobs (issue 40)."""
        rows, total = self.svc.store.runs("succeeded", HISTORY_ROWS)
        if total == self._history_at:
            return
        self._history_at = total
        kinds = self._kinds
        unseen = [r["id"] for r in rows if r["id"] not in kinds]
        if unseen:
            for job_id, spec in self.svc.store.specs(unseen).items():
                kinds[job_id] = kind_of(LaunchSpec.of(spec or {}))[0]
        self._kinds = {r["id"]: kinds[r["id"]] for r in rows if r["id"] in kinds}  # the window's jobs only
        hist = RuntimeHistory(HISTORY_RUNS)
        for row in reversed(rows):  # oldest first: the last runs are kept
            if row.get("started_at") is None or row.get("finished_at") is None or row["id"] not in kinds:
                continue
            hist.record(row["user"], kinds[row["id"]], row["finished_at"] - row["started_at"])
        self._history = hist

    def _expected(self, copy: bool = False) -> "_ExpectedRuns":
        svc = self.svc
        limits = getattr(svc, "time_limits", None) or {}
        if copy:  # (read on a worker thread while the loop changes the originals)
            return _ExpectedRuns(dict(svc.active), self._history, dict(limits))
        return _ExpectedRuns(svc.active, self._history, limits)

    def _snapshot(self) -> tuple[Any, "_ExpectedRuns"]:
        """The core's inputs to a recompute, copied on the loop (``run()`` replays them anywhere), and the
        expected run times it reads (whose ``history`` the worker sets once it has relearned it: ``_learn``
        reads the store, and only the worker's recompute runs while one is in flight)."""
        core = self.svc.scheduler
        if self._estimator is None or self._estimator.core is not getattr(core, "inner", core):
            self._estimator = core.new_estimator()
        expected = self._expected(copy=True)
        return core.estimates_snapshot(self._estimator, self.svc.now(), expected, max_waiting=MAX_WAITING), expected

    def recompute(self) -> None:
        """Recompute inline (no event loop, or a read that cannot wait)."""
        svc = self.svc
        core = svc.scheduler
        version = core.version
        t0 = time.perf_counter()
        self._learn()
        answer = core.estimate_starts(svc.now(), self._expected(), max_waiting=MAX_WAITING)
        self.last_ms = 1000 * (time.perf_counter() - t0)
        self._last_run = time.monotonic()
        self._publish(version, answer)

    def _publish(self, version: int, answer: dict[str, StartEstimate]) -> None:
        old = self._cache
        self._cache = answer
        self._version = version
        if self.on_changed is not None:
            # (the same object shows the same: the jobs beyond the horizon share one, thousands under a flood)
            changed = sorted(j for j, est in self._cache.items()
                             if est is not (was := old.get(j)) and _shown(est) != _shown(was))
            if changed:
                self.on_changed(changed)


def _cpu_timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """``fn()`` and the CPU milliseconds it took on the calling thread."""
    t0 = time.thread_time()
    out = fn()
    return out, 1000 * (time.thread_time() - t0)


def _shown(est: StartEstimate | None) -> tuple | None:
    """What a view shows of an estimate: its start to the minute and its basis."""
    if est is None:
        return None
    return (None if est.start is None else int(est.start // 60), est.basis)


class _ExpectedRuns:
    """``{job id: Expected}`` for the core's forward simulation, worked out only for the jobs it asks
    about (it asks about the running jobs, and about the waiting ones only when it replays them): a job's
    time limit, else what its owner's history of the same kind of job says, else its VC's default time
    limit, else None."""

    def __init__(self, active: dict[str, Any], history: RuntimeHistory, vc_limits: Mapping[str, Any] | None = None):
        self._active = active
        self.history = history
        self._vc_limits = vc_limits or {}
        self._seen: dict[str, Expected | None] = {}

    def __bool__(self) -> bool:
        return bool(self._active)

    def get(self, job_id: str, default: Any = None) -> Expected | None:
        if job_id in self._seen:
            return self._seen[job_id]
        job = self._active.get(job_id)
        exp = None
        if job is not None:
            limit = job.spec.time_limit_s
            if limit is not None:
                exp = Expected(float(limit), "limit")
            else:
                key, label = kind_of(job.spec)
                learned = self.history.expected(job.user, key)
                if learned is not None:
                    exp = dataclasses.replace(learned, kind=label)
                else:
                    rule = self._vc_limits.get(job.vc) or self._vc_limits.get("*")
                    if rule is not None and rule.default_s:
                        exp = Expected(float(rule.default_s), "vc", kind=f"VC {job.vc}")
        self._seen[job_id] = exp
        return exp if exp is not None else default
