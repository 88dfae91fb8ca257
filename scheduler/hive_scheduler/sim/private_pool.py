"""The ``private`` replay in parallel: one process per VC, merged into exactly the serial result.

The ``private`` policy (:mod:`hive_scheduler.sim.private`) is one core per VC, and a job only ever reaches
its own VC's core: the VCs' replays are independent. Each VC's jobs (its submits and their ``finish``
events) are replayed on their own in a forked worker, which records its *tape*: every call the replay
made to the policy (``submit``/``finish``/``preemption_done``, the job, and how many decision lines it
returned, or the error it raised) and the lines themselves. The parent then runs the ordinary replay
loop of the whole event script once more, with a scheduler that plays each call back from its VC's tape
instead of scheduling: completions, stops, the order of the lines, the metrics and the decision file
come out of the same code as a serial run, so the result is the serial one, line for line (the tests
compare the two; a call that does not match its tape is an error, never a guess).

Why the tape is enough: a VC's core sees only its own jobs' calls, at the same times and in the same
relative order whether other VCs' events are interleaved or not (completions and stops are scheduled
from the VC's own decisions), so each of its answers is the serial run's answer.

Used when it can be exact and is worth a process: a ``fork`` start method, the calling thread is the
main thread, the script has only submits and finishes (a ``reconfigure`` rebuilds every VC's cluster;
hardware events are the shared cluster's), job ids are unique, at least ``MIN_JOBS`` submits in at
least two VCs, and workers to run them (``_workers``). Otherwise the caller replays serially, as before.
The workers start while the caller replays its own policy, which keeps a CPU busy: so they are one fewer
than the CPUs (on 2 CPUs one worker replays the VCs one after another beside the caller; two workers and
the caller on 2 CPUs took 1.1x the wall time of the 111k-job replay, the caller's replay and then its
playback of the tapes being the longest path); a caller with nothing to replay meanwhile (``private``
alone) gets one per CPU, and then needs two to gain.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable, Sequence

from ..errors import RequestError
from .events import Event, FinishEvent, SubmitEvent

__all__ = ["PendingPrivate", "start", "WORKERS", "MIN_JOBS"]

WORKERS: int | None = None  # processes for the private replays (None: see _workers); 0: serial
MIN_JOBS = 1000  # fewer submits: serial (a fork costs more than such a replay)

# What the workers replay, set in the parent just before they fork (inherited, never pickled):
# (the private policy's scheduler, each group's events, the caller's replay function)
_PLAN: tuple | None = None


def _groups(events: Sequence[Event]) -> list[list[Event]] | None:
    """The script split by VC (submits by their VC, finishes by their job's), largest first; None when the
    script is not only submits and finishes, or names a job twice (then only a serial run is exact)."""
    vc_of: dict[str, str] = {}
    for ev in events:
        if type(ev) is SubmitEvent:
            if ev.job in vc_of:
                return None
            vc_of[ev.job] = ev.vc
        elif type(ev) is not FinishEvent:
            return None
    by_vc: dict[str, list[Event]] = {}
    for ev in events:  # in the script's order (the replay's order at one instant)
        vc = vc_of.get(ev.job) if isinstance(ev, (SubmitEvent, FinishEvent)) else None
        if vc is not None:  # (a finish of a job never submitted does nothing)
            by_vc.setdefault(vc, []).append(ev)
    groups = [by_vc[vc] for vc in sorted(by_vc)]
    groups.sort(key=len, reverse=True)  # (stable) the longest first, so the pool ends evenly
    return groups


class _Recorder:
    """The private scheduler, its calls written on a tape: (call, job, lines returned or the error)."""

    name = "private"

    def __init__(self, sched: Any):
        self.sched = sched
        self.tape: list[tuple[str, str, Any]] = []

    def _call(self, call: str, job: str, fn: Callable, *args: Any) -> list[Any]:
        try:
            out = fn(*args)
        except RequestError as exc:
            self.tape.append((call, job, (exc.field, exc.message)))
            raise
        self.tape.append((call, job, len(out)))
        return out

    def submit(self, job: Any, now: float) -> list[Any]:
        return self._call("submit", job.id, self.sched.submit, job, now)

    def finish(self, job_id: str, now: float) -> list[Any]:
        return self._call("finish", job_id, self.sched.finish, job_id, now)

    def preemption_done(self, job_id: str, now: float, requeue: bool = True) -> list[Any]:
        return self._call("preemption_done", job_id, self.sched.preemption_done, job_id, now, requeue)


def _replay_group(index: int) -> tuple[list, list]:
    """In a worker: replay group ``index`` of ``_PLAN``; its tape and its decision lines."""
    assert _PLAN is not None, "a worker forked without a plan"
    sched, groups, replay = _PLAN
    recorder = _Recorder(sched)
    lines = replay(recorder, groups[index])
    return recorder.tape, lines


_NONES = [None] * 64


class _Playback:
    """The private policy played back from the workers' tapes (for the parent's replay of the whole script)."""

    name = "private"

    def __init__(self, results: list[tuple[list, list]], groups: list[list[Event]]):
        self._tape: dict[str, tuple[list, list]] = {}
        self._pos: dict[str, list[int]] = {}
        self._vc_of: dict[str, str] = {}
        for (tape, lines), group in zip(results, groups):
            vc = next(ev.vc for ev in group if type(ev) is SubmitEvent)
            self._tape[vc] = (tape, lines)
            self._pos[vc] = [0, 0]  # next tape entry, next line
            for ev in group:
                if type(ev) is SubmitEvent:
                    self._vc_of[ev.job] = vc

    def _next(self, vc: str | None, call: str, job: str) -> list[Any]:
        pos = self._pos.get(vc) if vc is not None else None
        tape, lines = self._tape[vc] if pos is not None else ([], [])  # type: ignore[index]
        entry = tape[pos[0]] if pos is not None and pos[0] < len(tape) else None
        if entry is None or pos is None or entry[0] != call or entry[1] != job:
            raise RuntimeError(f"parallel private replay: {call}({job!r}) does not match VC {vc}'s tape "
                               f"(next: {entry!r}); the VCs' replays are not independent")
        pos[0] += 1
        got = entry[2]
        if isinstance(got, tuple):
            raise RequestError(*got)
        start = pos[1]
        pos[1] = end = start + got
        out = lines[start:end]
        lines[start:end] = _NONES[:got] if got <= len(_NONES) else [None] * got  # (the replay copies them:
        return out                                                              # let the tape's go)

    def submit(self, job: Any, now: float) -> list[Any]:
        return self._next(job.vc, "submit", job.id)

    def finish(self, job_id: str, now: float) -> list[Any]:
        return self._next(self._vc_of.get(job_id), "finish", job_id)

    def preemption_done(self, job_id: str, now: float, requeue: bool = True) -> list[Any]:
        return self._next(self._vc_of.get(job_id), "preemption_done", job_id)

    def check_done(self) -> None:
        """Every call on every tape was played back (else the merge missed some of a VC's decisions)."""
        for vc, (tape, _) in sorted(self._tape.items()):
            if self._pos[vc][0] != len(tape):
                raise RuntimeError(f"parallel private replay: VC {vc}'s tape has {len(tape) - self._pos[vc][0]} "
                                   "calls the merged replay never made")


class PendingPrivate:
    """The private replays running in the workers; ``result()`` waits for them and returns the ``SimResult``
    of ``simulate(config, events, "private", ...)`` with the arguments given to ``start``."""

    def __init__(self, pool: ProcessPoolExecutor, futures: list, groups: list[list[Event]],
                 finish: Callable[[Any], Any]):
        self._pool = pool
        self._futures = futures
        self._groups = groups
        self._finish = finish
        self._result: Any = None

    def result(self) -> Any:
        """The ``SimResult`` (what ``finish`` returned)."""
        if self._result is None:
            try:
                results = [f.result() for f in self._futures]
            finally:
                self.close()
            playback = _Playback(results, self._groups)
            self._result = self._finish(playback)
            playback.check_done()
        return self._result

    def close(self) -> None:
        """Stop the workers (what they had not finished is dropped)."""
        self._pool.shutdown(wait=True, cancel_futures=True)


def _workers(caller_busy: bool) -> int:
    """How many worker processes replay the VCs: ``WORKERS`` when set, else a CPU each but the caller's
    when it replays meanwhile; 0 when they would not gain (serial): none, or one with an idle caller."""
    n = WORKERS if WORKERS is not None else (os.cpu_count() or 1) - (1 if caller_busy else 0)
    return n if n >= (1 if caller_busy else 2) else 0


def start(events: Sequence[Event], *, scheduler: Callable[[], Any],
          replay: Callable[[Any, Sequence[Event]], list], finish: Callable[[Any], Any],
          caller_busy: bool = True) -> PendingPrivate | None:
    """Start the private replays of ``events`` in worker processes, or None when they cannot run there
    exactly or would not gain (see the module's docstring; the caller then replays serially).
    The caller's parts (``engine.py``'s, passed in so that this module does not import it): ``scheduler()``
    makes the private policy's scheduler (once, before the workers fork); ``replay(sched, group)``, in a
    worker, replays one VC's events against ``sched`` and returns the decision lines; ``finish(playback)``,
    in this process, replays the whole script with ``playback`` as the scheduler and returns the result
    (run by ``PendingPrivate.result``). ``caller_busy``: the caller replays another policy meanwhile."""
    global _PLAN
    workers = _workers(caller_busy)
    if not workers or threading.current_thread() is not threading.main_thread():
        return None
    if "fork" not in multiprocessing.get_all_start_methods():
        return None
    if sum(1 for ev in events if type(ev) is SubmitEvent) < MIN_JOBS:
        return None
    groups = _groups(events)
    if groups is None or len(groups) < 2:
        return None
    _PLAN = (scheduler(), groups, replay)  # (the scheduler is built once, inherited by every worker)
    try:
        pool = ProcessPoolExecutor(max_workers=min(workers, len(groups)),
                                   mp_context=multiprocessing.get_context("fork"))
        futures = [pool.submit(_replay_group, i) for i in range(len(groups))]
    finally:
        _PLAN = None  # (the workers forked at submit: they keep their copy)
    return PendingPrivate(pool, futures, groups, finish)
