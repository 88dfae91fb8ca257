"""The job lifecycle as a pure function: ``step(job, event) -> (job', effects)``.

No I/O, no clock, no core: the shell (``HiveService``) runs the effects in one unit of work. See
``states`` for the table this code implements, row by row.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Union

from hive_lab_server.wire.states import FINAL_STATES, Intent, JobState
from hive_lab_server.jobs.lifecycle.time_limit import limit_text

S = JobState


@dataclass(frozen=True)
class GroupPolicy:
    """When a task group's ended tasks end the whole job (OpenPAI's completion policy, FrameworkController's
    ``FrameworkAttemptCompletionPolicy``): ``min_failed`` failed tasks fail it, ``min_succeeded`` tasks
    exiting 0 make it succeed; None: never by this group's count. With neither reached, the job ends
    once all its tasks have ended, and succeeds."""

    group: str
    min_failed: int | None = 1
    min_succeeded: int | None = None


DEFAULT_POLICY = GroupPolicy("")


def completion_policy(tasks: Iterable[Any]) -> tuple[GroupPolicy, ...]:
    """The policies of a spec's task groups (``min_failed``/``min_succeeded``; a ``TaskSpec`` or a stored
    ``LaunchTaskGroup``), those not the default."""
    out = []
    for t in tasks:
        policy = GroupPolicy(t.name, t.min_failed, t.min_succeeded)
        if (policy.min_failed, policy.min_succeeded) != (1, None):
            out.append(policy)
    return tuple(out)


def group_of(task: str) -> str:
    """A task's group: the core names tasks ``<group>-<index>``."""
    return task.rsplit("-", 1)[0]


@dataclass(frozen=True)
class Job:
    """What the lifecycle knows about one job (the store's row holds the same, plus the spec)."""

    id: str
    state: JobState = S.SUBMITTED
    max_retries: int = 0
    retries: int = 0
    attempt: int = 0
    launched: bool = False  # Launcher.start was called for this attempt: tasks may run, exits may come
    tasks: tuple[str, ...] = ()  # the current attempt's tasks
    left: frozenset[str] = frozenset()  # tasks of the current attempt not known to be over
    # the current attempt's tasks that ended with an exit code, in order (stored as jobs.task_exits: a
    # restart knows which tasks are over and what the completion policy has counted)
    ended: tuple[tuple[str, int], ...] = ()
    policy: tuple[GroupPolicy, ...] = ()  # groups without one: fail at the first failure, succeed when all end
    intent: Intent | None = None
    intent_reason: str = ""
    stop_code: int | None = None  # first exit code seen while stopping
    stale: frozenset[str] = frozenset()  # exits of a stopped attempt that may still be reported
    reason: str = ""
    exit_code: int | None = None
    time_limit_s: float | None = None  # from the spec (or the VC's default): the attempt's run time limit
    started_at: float | None = None  # when the current attempt started running (stored as jobs.started_at)

    @property
    def deadline(self) -> float | None:
        """When the running attempt reaches its time limit (derived: start + limit; None without one)."""
        if self.state is not S.RUNNING or self.time_limit_s is None or self.started_at is None:
            return None
        return self.started_at + self.time_limit_s

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES

    def policy_of(self, group: str) -> GroupPolicy:
        return next((p for p in self.policy if p.group == group), DEFAULT_POLICY)

    def count_ended(self, group: str, succeeded: bool) -> int:
        return sum(1 for t, code in self.ended if group_of(t) == group and (code == 0) == succeeded)

    @property
    def holds_gpus(self) -> bool:
        return self.state in (S.SCHEDULED, S.RUNNING)


# --- events ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Queued:
    reason: str = "waiting"


@dataclass(frozen=True)
class Placed:
    tasks: tuple[str, ...]
    where: str = ""


@dataclass(frozen=True)
class LaunchBegin:
    attempt: int


@dataclass(frozen=True)
class LaunchStarted:
    attempt: int
    detail: str = ""
    at: float | None = None  # the shell's clock reading when the tasks started (None: the unit's)


@dataclass(frozen=True)
class LaunchFailed:
    attempt: int
    message: str


@dataclass(frozen=True)
class Exit:
    task: str
    code: int | None  # None: lost (no exit code)
    detail: str = ""


@dataclass(frozen=True)
class Cancel:
    by: str


@dataclass(frozen=True)
class Preempt:
    by: str
    overflow: bool = False  # the job runs in idle GPUs outside its VC (overflow): no retry is used


@dataclass(frozen=True)
class Lost:
    reason: str


@dataclass(frozen=True)
class Stopped:
    attempt: int


@dataclass(frozen=True)
class TimeUp:
    """The clock (read by the shell) says ``now``: a running attempt past its deadline is stopped."""

    now: float


@dataclass(frozen=True)
class Demoted:
    reason: str


@dataclass(frozen=True)
class Rejected:
    """The core will not (or no longer) queue the job."""

    error: str


@dataclass(frozen=True)
class DependencyNeverMet:
    """A job it depends on ended the wrong way (or does not exist): it can never start (issue 27)."""

    reason: str


@dataclass(frozen=True)
class Pause:
    """Stop the job with a checkpoint and keep it out of the queue until ``Resume``."""

    reason: str  # e.g. "round 3 of max_min_fairness_perf", "by ann"


@dataclass(frozen=True)
class Resume:
    reason: str


@dataclass(frozen=True)
class Move:
    """The job's request changed (``kind`` "migrate": another GPU type; "resize": another GPU count);
    the shell changed the request before this fact. A running job stops with a checkpoint and queues
    again with the new request."""

    kind: str  # "migrate" | "resize"
    reason: str  # e.g. "k80 -> v100: faster type"


@dataclass(frozen=True)
class Recovered:
    live: frozenset[str]  # tasks of this job the launcher runs now
    # tasks of this job that ended with an exit record nobody acknowledged yet: the attempt started
    # (maybe while the store refused writes), so it must not run again unrecorded
    ended: frozenset[str] = frozenset()
    at: float | None = None  # the restart's clock reading (the start time of an attempt found running)


Event = Union[Queued, Placed, LaunchBegin, LaunchStarted, LaunchFailed, Exit, Cancel, Preempt, Lost, Stopped,
              TimeUp, Demoted, Rejected, Pause, Resume, Move, Recovered, DependencyNeverMet]


# --- effects --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Record:
    """Store the job's new state (and a history line unless ``history`` is False)."""

    state: JobState
    reason: str
    history: bool = True
    fields: dict = field(default_factory=dict)


@dataclass(frozen=True)
class SetPlacement:
    clear: bool = False


@dataclass(frozen=True)
class Core:
    """A call on the core, made after the unit commits: finish | preemption_done | requeue (finish then
    submit) | submit | adopt."""

    call: str
    requeue: bool = False


@dataclass(frozen=True)
class Start:
    attempt: int


@dataclass(frozen=True)
class StopTasks:
    attempt: int
    grace: str  # "stop" | "preempt"
    checkpoint: bool = False  # the checkpoint signal first (the job runs again later)


@dataclass(frozen=True)
class AdoptTasks:
    pass


Effect = Union[Record, SetPlacement, Core, Start, StopTasks, AdoptTasks]


def _plural(n: int) -> str:
    return f"all {n} tasks" if n > 1 else "the task"


def _stop(job: Job, intent: Intent, reason: str, code: int | None = None) -> tuple[Job, list[Effect]]:
    job = replace(job, intent=intent, intent_reason=reason, stop_code=code)
    return job, [Record(job.state, f"stopping: {reason}", history=False,
                        fields={"stop_intent": intent.value, "stop_reason": reason}),
                 StopTasks(job.attempt, "preempt" if intent in (Intent.PREEMPT, Intent.YIELD) else "stop", intent.checkpoints)]


def _end(job: Job, state: JobState, reason: str, code: int | None, core: Core | None) -> tuple[Job, list[Effect]]:
    job = replace(job, state=state, reason=reason, exit_code=code, left=frozenset(), intent=None, intent_reason="")
    effects: list[Effect] = [Record(state, reason, fields={"exit_code": code, "finished": True,
                                                           "stop_intent": None, "stop_reason": ""})]
    if core is not None:
        effects.append(core)
    return job, effects


def _requeue(job: Job, reason: str, *, count: bool, core: Core) -> tuple[Job, list[Effect]]:
    retries = job.retries + 1 if count else job.retries
    suffix = (f"; retry {retries}/{job.max_retries}" if count else
              "" if "no retry used" in reason else "; not counted as a retry (it never started)")
    job = replace(job, state=S.QUEUED, retries=retries, launched=False, left=frozenset(), tasks=(), ended=(), intent=None,
                  intent_reason="", stop_code=None, reason=reason + suffix)
    return job, [Record(S.QUEUED, job.reason, fields={"retries": retries, "stop_intent": None, "stop_reason": ""}),
                 SetPlacement(clear=True), core]


def _retry_or_fail(job: Job, reason: str, code: int | None, *, preempt: bool) -> tuple[Job, list[Effect]]:
    if job.retries < job.max_retries:
        return _requeue(job, reason, count=True,
                        core=Core("preemption_done", requeue=True) if preempt else Core("requeue"))
    return _end(job, S.FAILED, f"{reason}; no retries left (max_retries={job.max_retries})", code,
                Core("preemption_done", requeue=False) if preempt else Core("finish"))


def _pause(job: Job, reason: str) -> tuple[Job, list[Effect]]:
    """Paused without running tasks: the core forgets it until it is resumed (no retry used)."""
    text = f"paused: {reason}"
    job = replace(job, state=S.PAUSED, launched=False, left=frozenset(), tasks=(), ended=(), intent=None, intent_reason="",
                  stop_code=None, reason=text)
    return job, [Record(S.PAUSED, text, fields={"stop_intent": None, "stop_reason": ""}), SetPlacement(clear=True),
                 Core("finish")]


def _moved(job: Job, kind: str, reason: str) -> tuple[Job, list[Effect]]:
    """Back to the queue with the new request (no retry used)."""
    text = f"{'migrated' if kind == 'migrate' else 'resized'} {reason}"
    job = replace(job, state=S.QUEUED, launched=False, left=frozenset(), tasks=(), ended=(), intent=None, intent_reason="",
                  stop_code=None, reason=text)
    return job, [Record(S.QUEUED, text, fields={"stop_intent": None, "stop_reason": ""}), SetPlacement(clear=True),
                 Core("requeue")]


def _task_ended(job: Job, event: Exit) -> tuple[Job, list[Effect]]:
    """A task of a running attempt ended: the completion policy of its group decides what follows."""
    left = job.left - {event.task}
    if event.code is None:  # lost: never counted as an outcome; the attempt runs again (a retry) or fails
        detail = event.detail if event.detail and event.detail != "lost" else "gone without an exit code"
        job, reason = replace(job, left=left), f"task {event.task} was lost ({detail})"
        if left:
            return _stop(job, Intent.LOST, reason, None)
        return _retry_or_fail(job, reason, None, preempt=False)
    job = replace(job, left=left, ended=job.ended + ((event.task, event.code),))
    group = group_of(event.task)
    policy = job.policy_of(group)
    if event.code != 0 and policy.min_failed is not None:
        failed = job.count_ended(group, succeeded=False)
        if failed >= policy.min_failed:
            detail = f", {event.detail}" if event.detail else ""
            reason = f"task {event.task} exited with code {event.code}{detail}"
            if policy.min_failed > 1:
                reason += f" ({failed} of group {group} failed: min_failed {policy.min_failed})"
            if left:  # the other tasks stop too
                return _stop(job, Intent.FAIL, reason, event.code)
            return _end(job, S.FAILED, reason, event.code, Core("finish"))
    if event.code == 0 and policy.min_succeeded is not None:
        succeeded = job.count_ended(group, succeeded=True)
        if succeeded >= policy.min_succeeded:
            reason = (f"{succeeded} task{'s' if succeeded != 1 else ''} of group {group} exited with code 0 "
                      f"(min_succeeded {policy.min_succeeded})")
            if left:
                return _stop(job, Intent.SUCCEED, f"{reason}; its {len(left)} other "
                                                  f"task{'s were' if len(left) != 1 else ' was'} stopped", 0)
            return _end(job, S.SUCCEEDED, reason, 0, Core("finish"))
    if left:
        return job, [Record(job.state, job.reason, history=False, fields={"task_exits": dict(job.ended)})]
    failures = [(t, code) for t, code in job.ended if code != 0]
    if not failures:
        return _end(job, S.SUCCEEDED, f"{_plural(len(job.tasks))} exited with code 0", 0, Core("finish"))
    shown = ", ".join(f"{t} with code {code}" for t, code in failures[:3]) + (", ..." if len(failures) > 3 else "")
    return _end(job, S.SUCCEEDED, f"all {len(job.tasks)} tasks ended, {len(failures)} failed ({shown}), fewer "
                                  "than their group's min_failed", 0, Core("finish"))


def step(job: Job, event: Event) -> tuple[Job, list[Effect]]:
    """The next state of ``job`` after ``event`` and what must happen for it (see ``states``)."""
    if job.final:
        return job, []
    st = job.state

    if isinstance(event, Queued):
        if st in (S.SUBMITTED, S.QUEUED) and (st is S.SUBMITTED or event.reason != job.reason):
            new = replace(job, state=S.QUEUED, reason=event.reason)
            return new, [Record(S.QUEUED, event.reason, history=st is S.SUBMITTED)]
        return job, []

    if isinstance(event, Placed):
        if st not in (S.SUBMITTED, S.QUEUED):
            return job, []
        attempt = job.attempt + 1
        reason = f"placed: {event.where}" if event.where else "placed"
        new = replace(job, state=S.SCHEDULED, attempt=attempt, launched=False, tasks=tuple(event.tasks),
                      left=frozenset(event.tasks), ended=(), stale=frozenset(), reason=reason, stop_code=None)
        return new, [SetPlacement(), Record(S.SCHEDULED, reason, fields={"attempt": attempt, "task_exits": None}),
                     Start(attempt)]

    if isinstance(event, LaunchBegin):
        if st is S.SCHEDULED and event.attempt == job.attempt and not job.launched and job.intent is None:
            return replace(job, launched=True), []
        return job, []

    if isinstance(event, LaunchStarted):
        if st is not S.SCHEDULED or event.attempt != job.attempt or not job.launched:
            return job, []
        reason = event.detail or f"{len(job.tasks)} task{'s' if len(job.tasks) != 1 else ''} started"
        started = {"started_at": event.at} if event.at is not None else {"started": True}
        job = replace(job, state=S.RUNNING, started_at=event.at)
        if job.intent is not None:  # a stop is on its way; the tasks do run meanwhile
            return job, [Record(S.RUNNING, reason, fields=started)]
        return replace(job, reason=reason), [Record(S.RUNNING, reason, fields=started)]

    if isinstance(event, LaunchFailed):
        if st is not S.SCHEDULED or event.attempt != job.attempt:
            return job, []
        if job.intent is Intent.CANCEL:
            return _end(job, S.CANCELLED, job.intent_reason, None, Core("finish"))
        if job.intent in (Intent.PREEMPT, Intent.YIELD):  # never started: the core requeues it, no retry used
            return _requeue(job, job.intent_reason, count=False, core=Core("preemption_done", requeue=True))
        if job.intent is Intent.PAUSE:  # never started: paused all the same
            return _pause(job, job.intent_reason)
        if job.intent in (Intent.MIGRATE, Intent.RESIZE):
            return _moved(job, job.intent.value, job.intent_reason)
        return _end(job, S.FAILED, f"could not start: {event.message}", None, Core("finish"))

    if isinstance(event, Cancel):
        reason = f"cancelled by {event.by}"
        if st in (S.SUBMITTED, S.QUEUED, S.PAUSED) or (st is S.SCHEDULED and not job.launched):
            return _end(job, S.CANCELLED, reason, None, Core("finish"))
        if job.intent in (Intent.CANCEL, Intent.SUCCEED):  # SUCCEED: it did; its other tasks are stopping
            return job, []
        if job.intent is not None:  # already stopping: the stop in progress ends as a cancel
            new = replace(job, intent=Intent.CANCEL, intent_reason=reason)
            return new, [Record(st, f"stopping: {reason}", history=False,
                                fields={"stop_intent": Intent.CANCEL.value, "stop_reason": reason})]
        return _stop(job, Intent.CANCEL, reason)

    if isinstance(event, Preempt):
        reason = f"preempted by {event.by}"
        if st is S.SCHEDULED and not job.launched and job.intent is None:
            return _requeue(job, reason + " before it started", count=False,
                            core=Core("preemption_done", requeue=True))
        if st in (S.SCHEDULED, S.RUNNING) and job.intent is None:
            if event.overflow:
                return _stop(job, Intent.YIELD, reason + " (it ran in idle GPUs outside its VC: no retry used)")
            return _stop(job, Intent.PREEMPT, reason)
        return job, []

    if isinstance(event, Lost):
        if st is S.SCHEDULED and not job.launched and job.intent is None:
            return _requeue(job, event.reason, count=False, core=Core("requeue"))
        if st in (S.SCHEDULED, S.RUNNING) and job.intent is None:
            return _stop(job, Intent.LOST, event.reason)
        return job, []

    if isinstance(event, Exit):
        if event.task in job.stale:
            return replace(job, stale=job.stale - {event.task}), []
        if job.intent is not None:
            if event.task in job.left:
                code = job.stop_code if job.stop_code is not None else event.code
                return replace(job, left=job.left - {event.task}, stop_code=code), []
            return job, []
        if st is not S.RUNNING and not (st is S.SCHEDULED and job.launched):
            return job, []
        if event.task not in job.left:
            return job, []
        return _task_ended(job, event)

    if isinstance(event, Stopped):
        if job.intent is None or event.attempt != job.attempt:
            return job, []
        stale = job.stale | job.left  # exits not reported by now belong to a finished attempt
        intent, reason, code = job.intent, job.intent_reason, job.stop_code
        job = replace(job, stale=stale, left=frozenset())
        if intent is Intent.CANCEL:
            return _end(job, S.CANCELLED, reason, code, Core("finish"))
        if intent is Intent.SUCCEED:
            return _end(job, S.SUCCEEDED, reason, 0, Core("finish"))
        if intent is Intent.PREEMPT:
            return _retry_or_fail(job, reason, code, preempt=True)
        if intent is Intent.YIELD:  # not a failure: back to its VC's queue (and may overflow again)
            return _requeue(job, reason, count=False, core=Core("preemption_done", requeue=True))
        if intent is Intent.RELAUNCH:  # a launch cut by a crash: never a part of a gang, no retry used
            return _requeue(job, reason, count=False, core=Core("requeue"))
        if intent is Intent.LOST:
            return _retry_or_fail(job, reason, code, preempt=False)
        if intent is Intent.PAUSE:
            return _pause(job, reason)
        if intent in (Intent.MIGRATE, Intent.RESIZE):
            return _moved(job, intent.value, reason)
        return _end(job, S.FAILED, reason, code, Core("finish"))

    if isinstance(event, TimeUp):
        deadline = job.deadline
        if deadline is None or job.intent is not None or event.now < deadline:
            return job, []
        return _stop(job, Intent.FAIL, f"time limit {limit_text(job.time_limit_s)} reached")

    if isinstance(event, Pause):
        if st in (S.SUBMITTED, S.QUEUED) or (st is S.SCHEDULED and not job.launched and job.intent is None):
            return _pause(job, event.reason)
        if st in (S.SCHEDULED, S.RUNNING) and job.intent is None:
            return _stop(job, Intent.PAUSE, event.reason)
        return job, []

    if isinstance(event, Resume):
        if st is not S.PAUSED:
            return job, []
        text = f"resumed: {event.reason}"
        return replace(job, state=S.QUEUED, reason=text), [Record(S.QUEUED, text), Core("submit")]

    if isinstance(event, Move):
        verb = "migrated" if event.kind == "migrate" else "resized"
        if st is S.PAUSED:  # the new request applies when it is resumed
            return job, [Record(S.PAUSED, f"{verb} while paused: {event.reason}")]
        if st in (S.SUBMITTED, S.QUEUED) or (st is S.SCHEDULED and not job.launched and job.intent is None):
            return _moved(job, event.kind, event.reason)
        if st in (S.SCHEDULED, S.RUNNING) and job.intent is None:
            return _stop(job, Intent.MIGRATE if event.kind == "migrate" else Intent.RESIZE, event.reason)
        return job, []

    if isinstance(event, Demoted):
        return replace(job, reason=event.reason), [Record(st, event.reason)]

    if isinstance(event, Rejected):
        return _end(job, S.FAILED, event.error, None, None)

    if isinstance(event, DependencyNeverMet):
        if st in (S.SUBMITTED, S.QUEUED, S.PAUSED) and job.intent is None:
            return _end(job, S.CANCELLED, event.reason, None, Core("finish"))
        return job, []

    if isinstance(event, Recovered):
        return _recover(job, event.live | event.ended, event.at)

    raise TypeError(f"unknown lifecycle event {event!r}")


def _recover(job: Job, live: frozenset[str], at: float | None = None) -> tuple[Job, list[Effect]]:
    """A job read back from the store after a restart, with the tasks the launcher knows of: running
    now, or ended with an exit record still to be reported (their exits follow as Exit facts)."""
    st = job.state
    if st is S.PAUSED:
        return job, []
    if st in (S.SUBMITTED, S.QUEUED):
        new = replace(job, state=S.QUEUED, launched=False, left=frozenset(), tasks=())
        return new, ([Record(S.QUEUED, job.reason or "waiting", history=st is S.SUBMITTED)] if st is S.SUBMITTED
                     else []) + [Core("submit")]
    if not live and (st is S.SCHEDULED or not job.tasks):
        if job.intent is Intent.CANCEL:
            return _end(job, S.CANCELLED, job.intent_reason, job.stop_code, None)
        if job.intent is Intent.SUCCEED:  # its policy was met and its other tasks are gone
            return _end(job, S.SUCCEEDED, job.intent_reason, 0, None)
        if job.intent is Intent.FAIL:  # a task failed (so it did start) and the others are gone
            return _end(job, S.FAILED, job.intent_reason, job.stop_code, None)
        if job.intent is Intent.PAUSE:
            new, effects = _pause(job, job.intent_reason)
            return new, [e for e in effects if not isinstance(e, Core)]  # the core never adopted it
        if job.intent in (Intent.MIGRATE, Intent.RESIZE):
            new, effects = _moved(job, job.intent.value, job.intent_reason)
            return new, [e if not isinstance(e, Core) else Core("submit") for e in effects]
        return _requeue(job, "the server restarted before the job started", count=False, core=Core("submit"))
    # it ran: the core takes its GPUs back; its tasks' exits (or their absence) decide what follows
    over = {t for t, _ in job.ended}  # ended before the restart (stored): neither live nor lost
    partial = st is S.SCHEDULED and bool(job.tasks) and not set(job.tasks) - over <= live and job.intent is None
    new = replace(job, state=S.RUNNING, launched=True,
                  left=frozenset(job.tasks) - over if st is S.RUNNING else frozenset(live) - over)
    if new.tasks == () and live:
        new = replace(new, tasks=tuple(sorted(live)), left=frozenset(live))
    fields: dict = {}
    if st is S.SCHEDULED:  # its tasks started while the server was down: they started by now at the latest
        new = replace(new, started_at=at)
        fields = {"started_at": at} if at is not None else {"started": True}
    effects: list[Effect] = [Core("adopt"), AdoptTasks(),
                             Record(S.RUNNING, "adopted after a server restart", fields=fields)]
    if partial:  # the server died in the middle of the launch: a gang runs whole or not at all
        missing = sorted(set(job.tasks) - live)
        new = replace(new, intent=Intent.RELAUNCH,
                      intent_reason=f"the server restarted in the middle of its launch ({len(missing)} of "
                                    f"{len(job.tasks)} tasks never started: {', '.join(missing)}); its started tasks "
                                    f"were stopped and it was queued again, no retry used")
        effects.append(StopTasks(new.attempt, "stop", False))
        return new, effects
    if job.intent is not None:  # a stop was asked (and maybe acknowledged) before the crash: finish it
        if job.intent is Intent.PREEMPT:  # the core does not remember the preemptor: requeue as lost
            new = replace(new, intent=Intent.LOST, intent_reason=f"{job.intent_reason}; the server restarted while it stopped")
        effects.append(StopTasks(new.attempt, "stop", new.intent.checkpoints))
    return new, effects
