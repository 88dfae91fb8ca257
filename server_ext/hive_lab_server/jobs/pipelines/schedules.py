"""Recurring jobs (issue 27): ``POST schedules`` stores a job spec with a cron expression, a time zone
and a policy; the service's loop calls ``tick`` and each due time submits the spec as its owner.

A run goes through exactly what a ``POST jobs`` of the owner passes (``submit_checks`` with the
owner's identity as of now: their VCs, limits, account), then ``service.admission.submit``; a refusal (e.g.
429, over their queue limit) is recorded on the run, not retried. Times come from the service's clock
(``HiveLabApp.clock``), so tests move time themselves.

Each due time is recorded (``schedule_runs``) together with the schedule's next due time before the
job is submitted: a crash in between loses that run (outcome ``lost``) instead of running it twice.

Policies, for runs missed while the server was down (or paused: resuming starts from now) and for a
run that is due while the previous one is still going:
- ``skip``: missed times are skipped; the latest due time runs unless the previous run is unfinished.
- ``queue_one``: missed times merge into one run; if the previous run is still going, the new one is
  submitted waiting for it to end (``depends_on: ended``); if one already waits, the time is skipped.
- ``run_all``: every due time runs (at most ``MAX_CATCH_UP`` per tick), whatever runs already.
"""

from __future__ import annotations

import logging
from typing import Any

from hive_lab_server.errors import ServiceError
from hive_lab_server.jobs.lifecycle.presentation import iso
from hive_lab_server.wire.spec import SpecError, parse_job_spec
from hive_lab_server.jobs.submit_checks import checked_submission
from hive_lab_server.jobs.pipelines import cron
from hive_lab_server.wire.schedule_models import ScheduleBody
from hive_lab_server.jobs.pipelines.staged_script import missing_script

log = logging.getLogger("hive_lab_server")

MAX_CATCH_UP = 100  # run_all: due times handled per schedule and tick (the rest next tick)
RUNS_SHOWN = 20
RETRY_S = 30  # a schedule whose due time could not be handled (store down) is tried again this much later
NOT_STARTED = ("submitted", "queued")


class Schedules:
    def __init__(self, *, store: Any, service: Any, access: Any):
        self.store = store  # store.schedules.ScheduleStore
        self.service = service  # now, admission (submit, what_if), active, store (jobs), launcher, dependencies
        self.access = access
        self._seq = store.max_seq()
        self._next_due: float | None = None  # earliest next_run_at of the unpaused schedules (None: read it)

    # ------------------------------------------------------------------------------------------
    # requests (the handlers authorize the caller first)

    def create(self, caller: Any, body: Any) -> dict[str, Any]:
        """ServiceError(400/403) for what could never run; nothing is stored then. A schedule of the
        caller's with the same name is replaced (same id, its runs kept; ``"replaced": true``): running
        a ``%%submit --cron`` cell again changes its schedule instead of adding a second one."""
        try:
            req = ScheduleBody.model_validate(body)
        except Exception as exc:  # pydantic: name the field and what to change
            raise ServiceError(400, _validation_message(exc), _validation_field(exc)) from None
        try:
            expr, tz = cron.expression(req.cron), req.timezone
            cron.zone(tz)
        except cron.CronError as exc:
            raise ServiceError(400, exc.message, exc.field) from None
        spec = self._spec(req.job)
        missing = missing_script(spec)
        if missing:
            raise ServiceError(400, f"job.{missing[1]}", f"job.{missing[0]}")
        if spec.depends_on:
            raise ServiceError(400, "job.depends_on: a recurring job's runs cannot depend on fixed jobs; leave it "
                                    "out (policy queue_one makes a run wait for the previous one)", "job.depends_on")
        try:  # what a POST jobs by the caller would refuse now (all but a full queue, which passes)
            spec, vc = checked_submission(service=self.service, access=self.access, caller=caller, spec=spec)
            self.service.admission.what_if(spec, caller.user, vc, caller.groups)
        except ServiceError as exc:
            if exc.status != 429:
                raise ServiceError(exc.status, _in_job(exc.message, exc.field),
                                   f"job.{exc.field}" if exc.field else "job") from None
        now = self.service.now()
        fields = {"owner_groups": list(caller.groups), "cron": req.cron.strip(), "timezone": tz,
                  "policy": req.policy, "spec": req.job, "paused": req.paused, "updated_at": now,
                  "next_run_at": cron.next_after(expr, tz, now)}
        existing = self.store.named(caller.user, req.name) if req.name else None
        if existing is not None:  # a name is the schedule's identity per owner: the same name replaces it
            self.store.update(existing["id"], **fields)
            self._next_due = None
            return {**self.view(existing["id"]), "replaced": True}
        self._seq += 1
        sid = f"s-{self._seq:06d}"
        row = {"seq": self._seq, "id": sid, "name": req.name or sid, "user": caller.user,
               "created_at": now, **fields}
        try:
            self.store.insert(row)
        except Exception:
            self._seq -= 1
            raise
        self._next_due = None
        return self.view(row["id"])

    def visible(self, caller: Any, schedule_id: str) -> dict[str, Any]:
        """The schedule's row if the caller owns it or is an admin; else 404 (others' schedules are not
        shown, not even that they exist)."""
        row = self.store.get(schedule_id)
        if row is None or not (caller.admin or row["user"] == caller.user):
            raise ServiceError(404, f"schedule {schedule_id} does not exist (or is not yours)")
        return row

    def set_paused(self, schedule_id: str, paused: bool) -> dict[str, Any]:
        row = self.store.get(schedule_id)
        fields: dict[str, Any] = {"paused": paused, "updated_at": self.service.now()}
        if not paused and row["paused"]:  # resumed: the times it missed while paused are not run
            fields["next_run_at"] = cron.next_after(row["cron"], row["timezone"], self.service.now())
        self.store.update(schedule_id, **fields)
        self._next_due = None
        return self.view(schedule_id)

    def delete(self, schedule_id: str) -> None:
        self.store.delete(schedule_id)
        self._next_due = None

    def list(self, users: list[str] | None) -> dict[str, Any]:
        rows = self.store.list(users)
        runs = self.store.runs([r["id"] for r in rows], RUNS_SHOWN)
        return {"schedules": [self._object(r, runs[r["id"]]) for r in rows]}

    def view(self, schedule_id: str) -> dict[str, Any]:
        row = self.store.get(schedule_id)
        return self._object(row, self.store.runs([schedule_id], RUNS_SHOWN)[schedule_id])

    @staticmethod
    def _object(row: dict[str, Any], runs: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": row["id"], "name": row["name"], "user": row["user"], "cron": row["cron"],
            "timezone": row["timezone"], "policy": row["policy"], "paused": bool(row["paused"]), "job": row["spec"],
            "created_at": iso(row["created_at"]), "next_run_at": None if row["paused"] else iso(row["next_run_at"]),
            "when": cron.explain(row["cron"]), "replaced": False,
            "next_run_local": None if row["paused"] else cron.local_iso(row["next_run_at"], row["timezone"]),
            "runs": [{"due_at": iso(r["due_at"]), "fired_at": iso(r["fired_at"]), "job_id": r["job_id"],
                      "outcome": r["outcome"], "reason": r["reason"]} for r in runs],
        }

    # ------------------------------------------------------------------------------------------
    # the service's loop

    def tick(self) -> None:
        """Run what is due by the service's clock (cheap when nothing is)."""
        now = self.service.now()
        if self._next_due is not None and now < self._next_due:
            return
        due = float("inf")
        for row in self.store.list():
            if row["paused"]:
                continue
            if row["next_run_at"] <= now:
                try:
                    row["next_run_at"] = self._fire(row, now)
                except Exception:  # e.g. the store refuses writes: nothing was recorded, try again soon
                    log.exception("hive-lab: schedule %s could not run; trying again in %d s", row["id"], RETRY_S)
                    due = min(due, now + RETRY_S)
                    continue
            due = min(due, row["next_run_at"])
        self._next_due = due

    def _fire(self, row: dict[str, Any], now: float) -> float:
        expr, tz = cron.expression(row["cron"]), row["timezone"]
        first, policy = row["next_run_at"], row["policy"]
        if policy == "run_all":  # every due time, the earliest MAX_CATCH_UP now, the rest next tick
            times = [first] + cron.times_between(expr, tz, first, now, MAX_CATCH_UP - 1)
            after = cron.next_after(expr, tz, times[-1])
            next_run = after if after <= now else cron.next_after(expr, tz, now)
        else:  # the latest due time, and the missed ones before it (the first MAX_CATCH_UP recorded)
            latest = max(first, cron.latest_at_or_before(expr, tz, now) or first)
            times = [t for t in [first] + cron.times_between(expr, tz, first, latest, MAX_CATCH_UP) if t < latest]
            times = times[:MAX_CATCH_UP] + [latest]
            next_run = cron.next_after(expr, tz, now)
        last = self._last_job(row["id"])
        plan: list[tuple[float, str, Any]] = []  # (due_at, "submit" | "skipped", depends_on | reason)
        if policy == "run_all":
            plan = [(t, "submit", None) for t in times]
        else:
            missed = "missed (the server was not running then)"
            plan = [(t, "skipped", missed if policy == "skip" else f"missed; merged into the run due at "
                     f"{iso(times[-1])}") for t in times[:-1]]
            state = self._state(last)
            if state is None:
                plan.append((times[-1], "submit", None))
            elif policy == "skip":
                plan.append((times[-1], "skipped", f"the previous run {last} is still {state}"))
            elif state in NOT_STARTED:
                plan.append((times[-1], "skipped", f"a run already waits: {last} ({state})"))
            else:
                plan.append((times[-1], "submit", [{"job": last, "when": "ended"}]))
        run_ids = self.store.advance(row["id"], next_run, [
            {"due_at": t, "fired_at": now, "job_id": None,
             "outcome": "skipped" if what == "skipped" else "lost",
             "reason": arg if what == "skipped" else "the server stopped before submitting it"}
            for t, what, arg in plan])
        for run_id, (t, what, arg) in zip(run_ids, plan):
            if what == "submit":
                self.store.set_run(run_id, **self._submit(row, arg))
        return next_run

    def _submit(self, row: dict[str, Any], depends_on: list | None) -> dict[str, Any]:
        """Submit one run as its owner; the run's fields (submitted with the job, or refused with why)."""
        caller = self.access.caller(row["user"], row["owner_groups"] or ())
        try:
            body = dict(row["spec"])
            body.setdefault("name", row["name"])
            if depends_on:
                body["depends_on"] = depends_on
            spec = self._spec(body)
            spec, vc = checked_submission(service=self.service, access=self.access, caller=caller, spec=spec)
            job = self.service.admission.submit(spec, caller.user, vc, caller.groups, self.access.fair_share_group(caller, vc))
        except ServiceError as exc:
            log.info("hive-lab: schedule %s: a run was refused: %s", row["id"], exc.message)
            return {"outcome": "refused", "reason": exc.message}
        return {"outcome": "submitted", "job_id": job["id"], "reason": ""}

    def _last_job(self, schedule_id: str) -> str | None:
        for run in self.store.runs([schedule_id], RUNS_SHOWN)[schedule_id]:
            if run["job_id"]:
                return run["job_id"]
        return None

    def _state(self, job_id: str | None) -> str | None:
        """The job's state if it is unfinished, else None."""
        if job_id is None:
            return None
        job = self.service.active.get(job_id)
        return job.lc.state.value if job is not None else None

    @staticmethod
    def _spec(job: Any):
        try:
            return parse_job_spec(job)
        except SpecError as exc:
            field = f"job.{exc.field}" if exc.field else "job"
            raise ServiceError(400, _in_job(exc.message, exc.field), field) from None


def _in_job(message: str, field: str | None) -> str:
    """A message about the job spec, said of the schedule's ``job`` ("job.tasks[0].gpus: ...")."""
    return f"job.{message}" if field and message.startswith(f"{field}:") else f"job: {message}"


def _validation_field(exc: Exception) -> str | None:
    errors = getattr(exc, "errors", None)
    if not callable(errors) or not errors():
        return None
    return ".".join(str(p) for p in errors()[0]["loc"]) or None


def _validation_message(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if not callable(errors) or not errors():
        return "send a JSON object describing the schedule: name, cron, timezone, policy, job"
    err = errors()[0]
    field = ".".join(str(p) for p in err["loc"])
    if err["type"] == "missing":
        return f"{field}: this field is required; add it"
    if err["type"] == "extra_forbidden":
        return f"{field}: unknown field; remove it (allowed: name, cron, timezone, policy, job, paused)"
    return f"{field}: {err['msg']}" if field else err["msg"]
