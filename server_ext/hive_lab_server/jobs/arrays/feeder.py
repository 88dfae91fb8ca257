"""The service part that runs job arrays: it keeps an array's pending elements OUT of the core and
releases them, as ordinary jobs, only as fast as the throttle and a small window allow.

Why not one core queue entry per element: the core's scheduling pass walks its queues, so a 10,000-element
array queued there would make every decision (of everyone's jobs) walk 10,000 entries. Here an array is one
stored row (``job_arrays``: its indices, sweep and throttle); an element becomes a ``jobs`` row, with its
own id, state, logs, retries and accounting, only when it is released. A released element is a job of its
owner like any other: the core sees it through the normal admission path, so per-user limits
(``max_queued_jobs`` refusals just hold the rest back until a slot frees), fair share, backfill, start
estimates and what-if treat it as one of the owner's jobs. Pending elements wait here, not in the core
(their start estimate is unknown until they are released).

Release rule, per array: an element is released only while (a) the array is not held (paused) and (b) its
not-ended elements (queued, running, paused, ... recovered ones included) are fewer than the throttle and
(c) fewer than ``window`` of them wait in the core. So the throttle is never exceeded, and without a throttle
the core holds at most ``window`` waiting elements per array.

Exactly once: an index is released by inserting its job row (``jobs.array_id``, ``array_index``, unique
together) in the same transaction that stores the job; a crash before the commit releases nothing, after it
the row is there and recovery treats it as any job (adopts it if it runs, queues it again if it waited).
Released elements are never released again, whatever the restart. Lowering the throttle stops nothing that
runs; new elements wait until fewer than the new throttle are left.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
from typing import TYPE_CHECKING, Any, Callable, Mapping

from hive_scheduler import RequestError
from hive_scheduler.validation import validate_request

from hive_lab_server.errors import ServiceError
from hive_lab_server.jobs.lifecycle.active import request_from
from hive_lab_server.jobs.lifecycle.time_limit import TimeLimitError, effective_limit
from hive_lab_server.wire.spec import JobSpec
from hive_lab_server.wire.array_spec import PARAMS_FILE, ArrayPlan, param_env_value, sweep_params

if TYPE_CHECKING:
    from hive_scheduler.protocol import LiveSchedulerCore

    from hive_lab_server.jobs.lifecycle.time_limit import VcTimeLimit
    from hive_lab_server.jobs.lifecycle.work import Work
    from hive_lab_server.store import Store

log = logging.getLogger("hive_lab_server")

ENDED = frozenset({"succeeded", "failed", "cancelled"})
WAITING = frozenset({"submitted", "queued"})
DEFAULT_WINDOW = 32


@dataclasses.dataclass
class LiveArray:
    """An unfinished array in memory: its stored row, the elements released so far and those not ended."""

    row: dict[str, Any]
    spec: JobSpec
    released: dict[int, str]  # index -> job id
    open: dict[str, str]  # job id -> state, of released elements not ended
    next_pos: int = 0  # indices[:next_pos] were released or cancelled (a cursor: feeding is O(window))
    blocked: str = ""  # why the last release stopped early (a refusal), '' when it did not
    ended: dict[str, int] = dataclasses.field(default_factory=dict)  # end state -> elements (completion counts)
    completed: str = ""  # the completion count that ended the array ('' while none did)

    @property
    def id(self) -> str:
        return self.row["id"]

    def pending(self) -> int:
        cancelled = set(self.row["cancelled"])
        return sum(1 for i in self.row["indices"][self.next_pos:] if i not in self.released and i not in cancelled)

    def finished(self) -> bool:
        return not self.open and self.next_pos >= len(self.row["indices"])


def completion_of(spec: JobSpec) -> dict[str, Any] | None:
    """The completion counts an array's elements end it by (``min_failed``, ``min_succeeded``; None: none)."""
    return spec.source.runtime.get("completion") if spec.source is not None else None


class ArrayFeeder:
    """Arrays: create, release, cancel, hold/resume, change the throttle. Handed the store, the core, the
    unit of work, and the admission path (``prepare``/``admit``: ``Admission.prepare`` / ``admit``)."""

    def __init__(self, *, store: Store, core: LiveSchedulerCore, work: Work, prepare: Callable, admit: Callable,
                 cancel: Callable, pause: Callable, resume: Callable, time_limits: Mapping[str, VcTimeLimit], jobs_root: str,
                 window: int = DEFAULT_WINDOW, tick_s: float = 1.0):
        self.store = store
        self.core = core
        self.work = work
        self.prepare = prepare
        self.admit = admit
        self.cancel_job = cancel
        self.pause_job = pause
        self.resume_job = resume
        self.time_limits = time_limits
        self.jobs_root = jobs_root
        self.window = window
        self.tick_s = tick_s
        self.live: dict[str, LiveArray] = {}
        self.element_of: dict[str, str] = {}  # open element's job id -> array id
        self._seq = store.max_array_seq()
        self._dirty: set[str] = set()
        self._task: asyncio.Task | None = None

    # ------------------------------------------------------------------------------------------
    # start (after recovery) and the periodic retry of blocked releases

    def load(self) -> None:
        """The unfinished arrays from the store (after recovery: recovered elements count as open)."""
        for row in self.store.unfinished_arrays():
            released_rows = row.pop("released")
            live = self._live(row, {i: jid for i, (jid, _) in released_rows.items()},
                              {jid: st for jid, st in released_rows.values() if st not in ENDED})
            for _, st in released_rows.values():
                if st in ENDED:
                    live.ended[st] = live.ended.get(st, 0) + 1
            self._advance(live)
            self.live[live.id] = live
            for job_id in live.open:
                self.element_of[job_id] = live.id

    def start(self) -> None:
        self.load()
        for array_id in list(self.live):
            self.feed(array_id)
        self._task = asyncio.create_task(self._tick(), name="hive-lab-arrays")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _tick(self) -> None:
        """Release what a refusal held back (``max_queued_jobs``) or an element's end made room for."""
        while True:
            await asyncio.sleep(self.tick_s)
            for array_id in list(self.live):
                try:
                    self.feed(array_id)
                except Exception:
                    log.exception("hive-lab: releasing elements of %s failed", array_id)

    def _live(self, row: dict[str, Any], released: dict[int, str], open_: dict[str, str]) -> LiveArray:
        return LiveArray(row=row, spec=JobSpec.model_validate(row["spec"]), released=released, open=open_)

    @staticmethod
    def _advance(live: LiveArray) -> None:
        cancelled = set(live.row["cancelled"])
        indices = live.row["indices"]
        while live.next_pos < len(indices) and (indices[live.next_pos] in live.released
                                                or indices[live.next_pos] in cancelled):
            live.next_pos += 1

    def outcome(self, ref: str) -> tuple[str, str] | None:
        """What became of array ``ref``, for a job that depends on it (pipelines.JobOutcomes' resolver):
        ``pending`` until every element ended (released or cancelled before it was), then
        ``succeeded`` when every element succeeded, ``failed`` when one failed, else ``cancelled``.
        None for a reference that is not an array."""
        if not ref.startswith("a-"):
            return None
        row = self.store.get_array(ref)
        if row is None:
            return None
        live = self.live.get(ref)
        if live is not None:
            self._advance(live)
            if live.open or live.next_pos < len(live.row["indices"]):
                return "pending", row["user"]
        states = self.store.array_states([ref])[ref]
        completion = completion_of(JobSpec.model_validate(row["spec"]))
        if completion:  # OpenPAI's counts decide (an array of a role run without gang)
            if completion.get("min_failed") is not None and states.get("failed", 0) >= completion["min_failed"]:
                return "failed", row["user"]
            if completion.get("min_succeeded") is not None and \
                    states.get("succeeded", 0) >= completion["min_succeeded"]:
                return "succeeded", row["user"]
            return ("cancelled" if row["cancelled"] or states.get("cancelled") else "succeeded"), row["user"]
        if states.get("failed"):
            return "failed", row["user"]
        if set(states) == {"succeeded"} and not row["cancelled"]:
            return "succeeded", row["user"]
        return "cancelled", row["user"]

    # ------------------------------------------------------------------------------------------
    # submit

    def check(self, spec: JobSpec, user: str, vc: str, groups: tuple[str, ...]) -> None:
        """What a submit of one element would refuse for any element (400): nothing is stored."""
        if PARAMS_FILE in spec.files:
            raise ServiceError(400, f"files: {PARAMS_FILE!r} is where hive-lab writes each element's parameters; "
                                    f"name your file otherwise", "files")
        try:
            effective_limit(spec.time_limit_s, spec.kind, vc, self.time_limits)
        except TimeLimitError as exc:
            raise ServiceError(400, exc.message, exc.field) from None
        request = request_from("array-check", vc, user, spec.tasks, spec.core_priority, spec.within,
                               self.work.now(), groups=groups, kind=spec.kind, pinned_cell=spec.pinned_cell)
        try:
            validate_request(self.core, request)
            self.core.check_can_ever_fit(request)
        except RequestError as exc:
            raise ServiceError(400, str(exc), getattr(exc, "field", None)) from None

    def submit(self, spec: JobSpec, plan: ArrayPlan, user: str, vc: str, groups: tuple[str, ...] = (),
               group: str = "") -> dict[str, Any]:
        """Store the array (one row, one transaction), then release its first elements. ServiceError(400)
        for a spec no element could ever run; StoreUnavailable(503): nothing stored."""
        if spec.kind != "batch":
            raise ServiceError(400, "kind: arrays are of batch jobs; drop kind or set it to batch", "kind")
        self.check(spec, user, vc, groups)
        now = self.work.now()
        self._seq += 1
        seq = self._seq
        spec_dict = spec.model_dump(mode="json")
        spec_dict["vc"] = vc
        row = {
            "seq": seq, "id": f"a-{seq:06d}", "name": spec.name, "user": user, "vc": vc, "spec": spec_dict,
            "indices": list(plan.indices), "sweep": plan.sweep, "throttle": plan.throttle, "held": False,
            "cancelled": [], "owner_groups": list(groups), "user_group": group, "submitted_at": now,
            "updated_at": now, "reason": "",
        }
        try:
            self.work.unit([], request=True, write=lambda batch, _at: self.store.insert_array(batch, row))
        except Exception:
            if self._seq == seq:
                self._seq -= 1
            raise
        live = self._live(row, {}, {})
        self.live[live.id] = live
        self.feed(live.id)
        return live.id

    # ------------------------------------------------------------------------------------------
    # release

    def on_state_change(self, job_id: str, state: str, _reason: str) -> None:
        """Listener of every stored transition: an element that starts or ends may make room."""
        array_id = self.element_of.get(job_id)
        if array_id is None:
            return
        live = self.live.get(array_id)
        if live is None:
            return
        if state in ENDED:
            live.open.pop(job_id, None)
            self.element_of.pop(job_id, None)
            live.ended[state] = live.ended.get(state, 0) + 1
            self._complete_if_reached(live)
        elif job_id in live.open:
            live.open[job_id] = state
        if not self._dirty:
            asyncio.get_running_loop().call_soon(self._feed_dirty)
        self._dirty.add(array_id)

    def _complete_if_reached(self, live: LiveArray) -> None:
        """An array with completion counts (an OpenPAI role run without gang, ``runtime.completion``): once
        ``min_failed`` elements failed, or ``min_succeeded`` succeeded, the rest is cancelled, as OpenPAI
        ends a job at its role's minFailedInstances / minSucceededInstances."""
        completion = completion_of(live.spec)
        if not completion or live.completed:
            return
        for state, key, protocol in (("failed", "min_failed", "minFailedInstances"),
                                     ("succeeded", "min_succeeded", "minSucceededInstances")):
            wanted = completion.get(key)
            if wanted is not None and live.ended.get(state, 0) >= wanted:
                live.completed = f"{live.ended[state]} {state} ({protocol}: {wanted})"
                break
        else:
            return
        if live.pending() or live.open:
            by = f"the job's completion policy: {live.completed}"
            asyncio.get_running_loop().create_task(self._cancel_rest(live.row, by))

    async def _cancel_rest(self, row: dict[str, Any], by: str) -> None:
        try:
            await self.cancel(row, None, by)
        except Exception:
            log.exception("hive-lab: ending %s at its completion count failed", row["id"])

    def _feed_dirty(self) -> None:
        dirty, self._dirty = sorted(self._dirty), set()
        for array_id in dirty:
            try:
                self.feed(array_id)
            except Exception:
                log.exception("hive-lab: releasing elements of %s failed", array_id)

    def _room(self, live: LiveArray) -> int:
        if live.row["held"] or live.completed:  # (completed: the rest is being cancelled)
            return 0
        waiting = sum(1 for st in live.open.values() if st in WAITING)
        room = self.window - waiting
        if live.row["throttle"] is not None:
            room = min(room, live.row["throttle"] - len(live.open))
        return max(0, room)

    def feed(self, array_id: str) -> int:
        """Release as many pending elements as the rule allows (module doc), in one unit. Returns how many."""
        live = self.live.get(array_id)
        if live is None:
            return 0
        self._advance(live)
        room = self._room(live)
        if room == 0 or live.next_pos >= len(live.row["indices"]):
            if live.finished():
                self.live.pop(array_id, None)
            return 0
        cancelled = set(live.row["cancelled"])
        picks: list[tuple[int, int]] = []  # (position, index)
        pos = live.next_pos
        indices = live.row["indices"]
        while len(picks) < room and pos < len(indices):
            if indices[pos] not in live.released and indices[pos] not in cancelled:
                picks.append((pos, indices[pos]))
            pos += 1
        now = self.work.now()
        new = []
        blocked = ""
        row = live.row
        for position, index in picks:
            try:
                # (len(new): the elements prepared before this one in the batch count against max_queued_jobs
                # and max_unfinished_jobs)
                job, job_row = self.prepare(live.spec, row["user"], row["vc"], now, tuple(row["owner_groups"] or ()),
                                            len(new), group=row["user_group"], unadmitted=len(new))
            except ServiceError as exc:  # e.g. max_queued_jobs, max_unfinished_jobs: the rest waits for a slot
                # (the tick retries)
                blocked = exc.message
                break
            self._make_element(live, job, job_row, position, index)
            new.append((job, job_row))
        if blocked != live.blocked:
            live.blocked = blocked
        if not new:
            return 0
        self.admit(new)  # StoreUnavailable: nothing released (the ids are new; the next feed tries again)
        for job, job_row in new:
            index = job_row["array_index"]
            live.released[index] = job.id
            lc = getattr(self.work, "active", {}).get(job.id)
            state = lc.lc.state.value if lc is not None else None
            if state is None or state not in ENDED:
                live.open[job.id] = state or "submitted"
                self.element_of[job.id] = live.id
        self._advance(live)
        return len(new)

    def _make_element(self, live: LiveArray, job: Any, row: dict[str, Any], position: int, index: int) -> None:
        """Turn a prepared job into element ``index``: its name, HIVE_ARRAY_* and, for a sweep, HIVE_PARAM_*
        and its parameter file (staged with the job's files, beneath its working dir)."""
        arr = live.row
        env = dict(job.spec.env)
        env.update({"HIVE_ARRAY_ID": arr["id"], "HIVE_ARRAY_INDEX": str(index),
                    "HIVE_ARRAY_COUNT": str(len(arr["indices"]))})
        files = None  # (the job's own, unless a sweep's parameter file joins them)
        if arr["sweep"] is not None:
            params = sweep_params(arr["sweep"], position)
            for name, value in params.items():
                env[f"HIVE_PARAM_{name.upper()}"] = param_env_value(value)
            files = {**job.spec.files, PARAMS_FILE: json.dumps(params, sort_keys=True) + "\n"}
            env["HIVE_PARAMS_FILE"] = os.path.join(job.working_dir, PARAMS_FILE)
        name = f"{arr['name']}[{index}]"[:128]
        job.spec = job.spec.as_element(name, env, files)
        row["spec"] = dict(job.spec.stored)  # (a new top level; what it holds is the element's own)
        row["name"] = name
        row["array_id"] = arr["id"]
        row["array_index"] = index

    # ------------------------------------------------------------------------------------------
    # control

    def _store_array(self, array_id: str, **fields: Any) -> None:
        fields["updated_at"] = self.work.now()
        self.work.unit([], request=True, write=lambda batch, _at: self.store.update_array(batch, array_id, **fields))
        live = self.live.get(array_id)
        if live is not None:
            live.row.update(fields)

    async def cancel(self, row: dict[str, Any], indices: list[int] | None, by: str) -> None:
        """Cancel the array's elements not ended (``indices``: only these). Pending ones are stored as
        cancelled first (none of them is released after this returns), then released ones get a cancel."""
        chosen = set(row["indices"]) if indices is None else set(indices)
        live = self.live.get(row["id"])
        released = dict(live.released) if live is not None else {
            r["array_index"]: r["id"] for r in self.store.array_elements(row["id"], sorted(chosen))}
        new_cancelled = sorted(set(row["cancelled"]) | {i for i in chosen if i not in released})
        if new_cancelled != sorted(row["cancelled"]):
            self._store_array(row["id"], cancelled=new_cancelled)
            row["cancelled"] = new_cancelled
        targets = [job_id for i, job_id in sorted(released.items()) if i in chosen]
        for job_id in targets:
            if live is not None and job_id not in live.open:
                continue
            try:
                await self.cancel_job(job_id, by, wait_s=0.0)
            except ServiceError as exc:
                if exc.status != 409:  # 409: it ended meanwhile
                    raise
        if live is not None:
            self._advance(live)

    async def hold(self, row: dict[str, Any], by: str) -> None:
        """Pause: release nothing more and pause the elements not ended (checkpoint signal, stop)."""
        self._store_array(row["id"], held=True)
        live = self.live.get(row["id"])
        for job_id, state in sorted((live.open if live else {}).items()):
            if state == "paused":
                continue
            try:
                await self.pause_job(job_id, by, wait_s=0.0)
            except ServiceError as exc:
                if exc.status != 409:
                    raise

    def release_hold(self, row: dict[str, Any], by: str) -> None:
        """Resume: the paused elements queue again, and releasing goes on."""
        self._store_array(row["id"], held=False)
        live = self.live.get(row["id"])
        for job_id, state in sorted((live.open if live else {}).items()):
            if state == "paused":
                try:
                    self.resume_job(job_id, by)
                except ServiceError as exc:
                    if exc.status != 409:
                        raise
        self.feed(row["id"])

    def set_throttle(self, row: dict[str, Any], throttle: int | None) -> None:
        self._store_array(row["id"], throttle=throttle)
        self.feed(row["id"])

    # ------------------------------------------------------------------------------------------
    # reads

    def blocked_reason(self, array_id: str) -> str:
        live = self.live.get(array_id)
        return live.blocked if live is not None else ""
