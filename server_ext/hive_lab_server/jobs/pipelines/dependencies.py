"""Job dependencies (``depends_on``): a job starts only once the jobs it names ended as it asks.

A job whose dependencies are not all met yet is *held*: it is stored ``queued`` with a reason that
names what it waits for ("waiting for j-000012 to succeed") and is not in the core's queue, so it
takes no place in scheduling passes. Nothing extra is stored: the verdict is a pure function of the
spec's ``depends_on`` and the other jobs' outcomes (final states never change), so it is the same
after a restart, and recovery re-evaluates it through the same gate (``HiveService._core_call``).

Every question goes through one function, ``JobOutcomes.of(ref)`` -> pending | succeeded | failed |
cancelled | missing; other kinds of references (e.g. a job array, ended when all its elements did)
plug in with ``JobOutcomes.add_resolver``.

Cycles cannot form: a job may only depend on jobs that exist when it is submitted (its own id is new),
so every edge points to an older job. A dependency on another user's job is refused (403) unless the
submitter is an admin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Literal, Mapping

from hive_lab_server.errors import ServiceError
from hive_lab_server.jobs.lifecycle import machine as m
from hive_lab_server.wire.launch_spec import Dependency, LaunchSpec

if TYPE_CHECKING:
    from hive_lab_server.jobs.lifecycle.work import GateWork
    from hive_lab_server.store import Store

FINAL = ("succeeded", "failed", "cancelled")
VERB = {"succeeded": "succeed", "failed": "fail", "ended": "end"}
Outcome = str  # "pending" | "succeeded" | "failed" | "cancelled" | "missing"


class JobOutcomes:
    """What became of a job (or of another referenced thing a resolver knows)."""

    def __init__(self, *, store: Store, active: Mapping[str, Any]):
        self.store = store
        self.active = active
        self._resolvers: list[Callable[[str], tuple[Outcome, str | None] | None]] = []

    def add_resolver(self, resolver: Callable[[str], tuple[Outcome, str | None] | None]) -> None:
        """``resolver(ref) -> (outcome, owner)`` for the references it knows, None for the others."""
        self._resolvers.append(resolver)

    def of(self, ref: str) -> Outcome:
        return self.lookup(ref)[0]

    def lookup(self, ref: str) -> tuple[Outcome, str | None]:
        """(outcome, owner): ``missing`` (owner None) if nobody knows ``ref``."""
        for resolver in self._resolvers:
            found = resolver(ref)
            if found is not None:
                return found
        job = self.active.get(ref)
        if job is not None:  # unfinished
            return "pending", job.user
        row = self.store.get_job(ref)
        if row is None:
            return "missing", None
        return (row["state"] if row["state"] in FINAL else "pending"), row["user"]


@dataclass(frozen=True)
class Verdict:
    status: Literal["met", "waiting", "never"]
    reason: str = ""


def judge(depends_on: Iterable[Dependency], outcome_of: Callable[[str], Outcome]) -> Verdict:
    """Met (all ended as asked), waiting (some have not ended; the reason names them) or never (one
    ended the wrong way or does not exist; the reason says which and how)."""
    waiting: list[str] = []
    for dep in depends_on:
        ref, when = dep.job, dep.when
        outcome = outcome_of(ref)
        if outcome == "missing":
            return Verdict("never", f"dependency never met: {ref} does not exist")
        if outcome == "pending":
            waiting.append(f"{ref} to {VERB[when]}")
        elif when != "ended" and outcome != when:
            return Verdict("never", f"dependency never met: {ref} {outcome}, so it will never {VERB[when]}")
    if waiting:
        return Verdict("waiting", "waiting for " + (", ".join(waiting[:-1]) + " and " if len(waiting) > 1 else "")
                       + waiting[-1])
    return Verdict("met")


class Dependencies:
    """The service's part for ``depends_on``: submit checks, the gate before the core, and who waits on whom."""

    def __init__(self, outcomes: JobOutcomes, active: Mapping[str, Any], work: GateWork,
                 containers: Callable[[str], list[str]] = lambda job_id: []):
        self.outcomes = outcomes
        self.active = active
        self.containers = containers  # job id -> what else its end may complete (its array)
        self.work = work  # lifecycle.work.GateWork: Work plus ``submit_to_core(job_id)`` (shell.UnitOfWork)
        self.held: set[str] = set()  # queued jobs kept out of the core until their dependencies are met

    def gate(self, job: Any) -> list[tuple[str, m.Event]] | None:
        """Before a job goes to the core: None (no dependencies, or all met: go on), else the facts
        that keep it out (queued, saying what it waits for) or end it (a dependency never met)."""
        verdict = self.verdict(job.spec)
        if verdict is None or verdict.status == "met":
            self.held.discard(job.id)
            return None
        if verdict.status == "waiting":
            self.held.add(job.id)
            return [(job.id, m.Queued(verdict.reason))]
        self.held.discard(job.id)
        return [(job.id, m.DependencyNeverMet(verdict.reason))]

    def on_state(self, job_id: str, state: str, reason: str) -> None:
        """A state listener: a job ended, so the held jobs naming it go through the gate again."""
        if state not in FINAL:
            return
        self.held.discard(job_id)
        facts: list[tuple[str, m.Event]] = []
        waiting = self.dependents_of(job_id)
        for ref in self.containers(job_id):  # an element's end may end its array
            waiting += [d for d in self.dependents_of(ref) if d not in waiting]
        for dependent in waiting:
            if dependent in self.held:
                facts += self.work.submit_to_core(dependent)
        if facts:
            self.work.unit(facts)

    def check_submit(self, depends_on: Iterable[Any], user: str, admin: bool) -> None:
        """ServiceError(400) for a job that does not exist (yet: no forward reference, so no cycle),
        ServiceError(403) for another user's job unless ``admin``."""
        for i, dep in enumerate(depends_on):
            ref = dep["job"] if isinstance(dep, Mapping) else dep.job
            outcome, owner = self.outcomes.lookup(ref)
            if outcome == "missing":
                raise ServiceError(400, f"depends_on[{i}].job: job {ref} does not exist; a job can only depend on "
                                        "jobs submitted before it (so dependencies never form a cycle)",
                                   f"depends_on[{i}].job")
            if owner != user and not admin:
                raise ServiceError(403, f"depends_on[{i}].job: job {ref} belongs to another user; a job may only "
                                        "depend on its owner's jobs", f"depends_on[{i}].job")

    def verdict(self, spec: LaunchSpec) -> Verdict | None:
        """None for a job without dependencies."""
        deps = spec.depends_on
        if not deps:
            return None
        return judge(deps, self.outcomes.of)

    def dependents_of(self, job_id: str) -> list[str]:
        """Held jobs (waiting in the queue for their dependencies) that name ``job_id``, oldest first. Only
        the held ones: a job's end scanned every unfinished job (~7 ms at 2,000 of them, on the event loop,
        per end: issue 40's write flood), while only a held job can be waiting for it."""
        found = []
        for held_id in self.held:
            job = self.active.get(held_id)
            if job is not None and job.lc.state.value in ("submitted", "queued") and job.lc.intent is None and \
                    any(d.job == job_id for d in job.spec.depends_on):
                found.append((job.seq, job.id))
        return [j for _, j in sorted(found)]
