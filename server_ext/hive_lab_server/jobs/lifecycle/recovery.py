"""Recovery after a restart: the stored facts go through the same machine, then the launcher is
reconciled (adopted tasks, exits reported while the server was down, lost tasks, orphans).

``Recovery`` is one part of the service: it is handed the store, the launcher, the core, the unfinished
jobs (which it fills), the drained nodes and GPUs, the share modes (a share's MIG device is held again)
and the unit of work (``work.RecoveryWork``), through which it applies what it finds.
"""

from __future__ import annotations

import logging
import pathlib
from typing import TYPE_CHECKING, Any, MutableMapping

from hive_lab_server.jobs.lifecycle import launch_plan, machine as m
from hive_lab_server.jobs.lifecycle.active import ActiveJob, request_from
from hive_lab_server.wire.launch_spec import LaunchSpec
from hive_lab_server.wire.states import PLACED_STATES, Intent, JobState
from hive_lab_server.jobs.lifecycle.work import RecoveryWork

if TYPE_CHECKING:
    from hive_scheduler.protocol import LiveSchedulerCore

    from hive_lab_server.execution.launchers.base import Launcher
    from hive_lab_server.hardware.sharing import GpuSharing
    from hive_lab_server.store import Store

log = logging.getLogger("hive_lab_server")
S = JobState


class Recovery:
    """Rebuild ``active`` from the store and reconcile it with the launcher."""

    def __init__(self, *, store: Store, launcher: Launcher, core: LiveSchedulerCore, active: MutableMapping[str, ActiveJob],
                 drained_nodes: set[str], drained_gpus: set[tuple[str, int]], sharing: GpuSharing,
                 jobs_root: pathlib.Path, stop_grace_s: float, work: RecoveryWork):
        self.store = store
        self.launcher = launcher
        self.core = core
        self.active = active
        self.drained_nodes = drained_nodes
        self.drained_gpus = drained_gpus
        self.sharing = sharing
        self.jobs_root = jobs_root
        self.stop_grace_s = stop_grace_s
        self.work = work

    def _active_from_row(self, row: dict[str, Any], placement: list[dict[str, Any]]) -> ActiveJob:
        spec = LaunchSpec.of(row["spec"])
        request = request_from(row["id"], row["vc"], row["user"], spec.tasks, row["priority"],
                                spec.within, row["submitted_at"], groups=row.get("owner_groups"),
                                kind=row.get("kind") or "batch", group=row.get("user_group") or "",
                                pinned_cell=spec.pinned_cell)
        tasks = tuple(p["task"] for p in sorted(placement, key=lambda p: p["rank"]))
        state = JobState(row["state"])
        intent = Intent(row["stop_intent"]) if row.get("stop_intent") else None
        lc = m.Job(row["id"], state=state, max_retries=row["max_retries"], retries=row["retries"],
                   attempt=row["attempt"], tasks=tasks if state in PLACED_STATES else (),
                   left=frozenset(tasks) if state in PLACED_STATES else frozenset(), intent=intent,
                   intent_reason=row.get("stop_reason") or "", reason=row["reason"],
                   ended=tuple((t, int(c)) for t, c in (row.get("task_exits") or {}).items() if t in tasks)
                   if state in PLACED_STATES else (),
                   policy=m.completion_policy(spec.tasks),
                   time_limit_s=spec.time_limit_s,
                   started_at=row["started_at"] if state is S.RUNNING else None)
        placed = state in PLACED_STATES
        job = ActiveJob(id=row["id"], seq=row["seq"], user=row["user"], vc=row["vc"], spec=spec, request=request,
                        working_dir=row["working_dir"], output_dir=row["output_dir"], queued_at=row["updated_at"],
                        opportunistic=bool(row["opportunistic"]), lc=lc,
                        placement=launch_plan.placement_from_rows(placement) if placed else [],
                        share_device=launch_plan.share_device_from_rows(placement) if placed else None)
        if job.share_device:  # held again before anything else is granted: no other share gets its MIG device
            self.sharing.hold_mig(job.id, job.share_device)
        return job

    async def recover(self) -> None:
        rows = self.store.active_jobs()
        for d in self.store.drains():
            if d["gpu"] is None:
                self.drained_nodes.add(d["node"])
            else:
                self.drained_gpus.add((d["node"], d["gpu"]))
        now = self.work.now()
        facts: list[tuple[str, m.Event]] = []
        for node in sorted(self.drained_nodes):
            facts += self.work.facts_of(self.core.set_node_health(node, False, now))
        for node, gpu in sorted(self.drained_gpus):
            facts += self.work.facts_of(self.core.set_gpu_health(node, gpu, False, now))
        alive = await self.launcher.running()
        # exits the launcher kept while nobody acknowledged them (the server or the store was down):
        # proof that an attempt started, so recovery never runs it again unrecorded
        early_exits = await self.launcher.poll()
        ended: dict[str, set[str]] = {}
        for e in early_exits:
            ended.setdefault(e.job_id, set()).add(e.task)
        placements = self.store.placements([r["id"] for r in rows if r["state"] in ("scheduled", "running")])
        for row in rows:
            job = self._active_from_row(row, placements.get(row["id"], []))
            self.active[job.id] = job
            if job.lc.deadline is not None:  # the stored start + the limit: the deadline holds across restarts
                self.work.watch_deadline(job.id, job.lc.deadline)
            facts.append((job.id, m.Recovered(frozenset(alive.get(job.id, ())), frozenset(ended.get(job.id, ())),
                                              at=now)))
        self.work.unit(facts)
        await self.work.adopted()
        # What runs now, THEN the exits the launcher knows (also those from while the server was down).
        # In this order a task that ends between the two calls is in the snapshot and its exit in the
        # poll, so it is recorded with its real exit code; only a task missing from the snapshot whose
        # exit nobody reports is lost. (Polling first would call a task ending in between lost.)
        alive = {job_id: set(tasks) for job_id, tasks in (await self.launcher.running()).items()}
        exits = early_exits + await self.launcher.poll()
        reported = {(e.job_id, e.task) for e in exits}
        self.work.handle_exits(exits)
        for e in exits:  # reported exits are authoritative: these tasks are over, whatever the snapshot says
            alive.get(e.job_id, set()).discard(e.task)
        lost = []
        for job in list(self.active.values()):
            if job.lc.state is S.RUNNING and job.lc.intent is None:
                lost += [(job.id, m.Exit(t, None, "not running after the server restarted"))
                         for t in sorted(job.lc.left - alive.get(job.id, set())) if (job.id, t) not in reported]
        if lost:
            self.work.unit(lost)
        self.work.check_deadlines()  # limits that passed while the server was down: the same path as ever
        # anything running that the store does not know as placed is stopped
        for job_id, tasks in sorted(alive.items()):
            job = self.active.get(job_id)
            if tasks and (job is None or job.lc.state not in PLACED_STATES):
                log.warning("hive-lab: stopping orphan tasks of %s found after restart", job_id)
                try:
                    await self.launcher.adopt(launch_plan.tracking_request(job_id, job.user if job else "",
                                                                           sorted(tasks), self.jobs_root))
                    await self.launcher.stop(job_id, self.stop_grace_s)
                except Exception:
                    log.exception("hive-lab: stopping orphan %s failed", job_id)
        self.work.publish([], cluster=True)

