"""Shares of a GPU on the service's side: the check at submit, the MIG device a share is given when its
placement is stored, its enforcement when it launches (MPS daemon use, memory budget), the same again
for a share that ran on through a restart, and their release when the job leaves its GPU.

How each GPU type enforces shares is ``hardware/sharing.py``. ``ShareGrants`` is one part of the
service: it is handed the GPU chains, the store, the unfinished jobs, the unit of work (``work.Work``),
the share modes (``sharing``), the GPUs' UUIDs, the cluster view (a GPU's type) and a way to hear of
state changes; it owns the MPS daemons' use and the memory budgets.
"""

from __future__ import annotations

import logging
import subprocess
from typing import TYPE_CHECKING, Any, Callable, Mapping

from hive_lab_server.hardware.sharing import BudgetWatch, GpuSharing, MpsDaemons, ShareRefused
from hive_lab_server.execution.launchers.base import LaunchError
from hive_lab_server.wire.spec import JobSpec
from hive_lab_server.errors import ServiceError
from hive_lab_server.jobs.lifecycle import machine as m
from hive_lab_server.jobs.lifecycle.work import Work

if TYPE_CHECKING:
    from hive_lab_server.jobs.lifecycle.active import ActiveJob
    from hive_lab_server.store import Store

log = logging.getLogger("hive_lab_server")


class ShareGrants:
    def __init__(self, *, chains: Mapping[str, Any], store: Store, active: Mapping[str, "ActiveJob"], work: Work,
                 sharing: GpuSharing, gpu_uuids: Mapping[tuple[str, int], str], cluster: Callable[[], dict],
                 on_state_change: Callable[[Callable[[str, str, str], None]], None]):
        self.chains = chains
        self.store = store
        self.active = active
        self.work = work
        self.sharing = sharing
        self.gpu_uuids = gpu_uuids
        self.cluster = cluster
        self.on_state_change = on_state_change
        self.mps = MpsDaemons(sharing)
        self.budgets = BudgetWatch()
        self.grants: dict[str, tuple[str, int, str, str]] = {}  # job -> (node, gpu, device, mode)
        self._listening = False

    def check_share(self, spec: JobSpec) -> None:
        asked = spec.tasks[0].gpu_type
        types = [asked] if asked else sorted({ch.gpu_type for ch in self.chains.values()})
        try:
            self.sharing.check_request(types, spec.gpu_share)
        except ShareRefused as exc:
            raise ServiceError(400, str(exc), "tasks[0].gpus") from None

    def gpu_type_of(self, node: str, gpu: int) -> str | None:
        for g in self.cluster()["gpus"]:
            if g["node"] == node and g["index"] == gpu:
                return g.get("type")
        return None

    @staticmethod
    def _share_of(job: "ActiveJob") -> float | None:
        return job.spec.share

    def share_device(self, job: "ActiveJob") -> str | None:
        """A share placed on a GPU in MIG mode: its MIG device, taken when its placement is stored so the
        store keeps it (a restart gives it the same one). None: not a share, not MIG, or none free (its
        launch then fails saying why)."""
        share = self._share_of(job)
        p = job.placement[0] if job.placement else None
        if share is None or p is None or not p.gpus:
            return None
        gpu = p.gpus[0]
        if self.sharing.mode(self.gpu_type_of(p.node, gpu), p.node, gpu) != "mig":
            return None
        self.sharing.release(job.id)  # a new attempt: the device of an earlier one goes back first
        d = self.sharing.take_mig(job.id, p.node, gpu, share)
        self._listen_shares()
        job.share_device = d.uuid if d is not None else None
        return job.share_device

    def _listen_shares(self) -> None:
        if not self._listening:  # from the first share on (inside the loop)
            self._listening = True
            self.on_state_change(self._share_state)

    def share_grant(self, job: "ActiveJob", p: Any, adopted: bool = False):
        """The share's enforcement on its GPU (None: the job holds whole GPUs); ShareRefused -> LaunchError.
        ``adopted``: it runs already (after a restart): its MPS daemon is not started again."""
        share = self._share_of(job)
        if share is None or not p.gpus:
            return None
        gpu = p.gpus[0]
        device = self.gpu_uuids.get((p.node, gpu)) or str(gpu)
        try:
            grant = self.sharing.grant(job.id, self.gpu_type_of(p.node, gpu), p.node, gpu, share, device,
                                       job.spec.tasks[0].gpu_memory_mb)
            if grant.mode == "mps":
                if adopted:
                    self.mps.adopt(p.node, gpu, job.id)
                else:
                    self.mps.acquire(p.node, gpu, device, job.id)
        except (ShareRefused, OSError, subprocess.SubprocessError) as exc:
            self.sharing.release(job.id)
            raise LaunchError(f"GPU share: {exc}") from None
        self._listen_shares()
        self.grants[job.id] = (p.node, gpu, device, grant.mode)
        if grant.memory_budget_mb:
            self.budgets.budgets[job.id] = grant.memory_budget_mb
        return grant

    def share_adopt(self, job: "ActiveJob") -> None:
        """A share that ran on through a restart: its MIG device (stored with its placement), its use of
        its GPU's MPS daemon and its memory budget are in force again."""
        if self._share_of(job) is None or not job.placement:
            return
        try:
            self.share_grant(job, job.placement[0], adopted=True)
        except LaunchError as exc:
            log.warning("hive-lab: the share of %s after a restart: %s", job.id, exc)

    def _share_state(self, job_id: str, state: str, reason: str) -> None:
        """A share's job left its GPU: its MIG device, MPS daemon use and budget go."""
        job = self.active.get(job_id)
        if state in ("scheduled", "running") or (job is not None and job.state in ("scheduled", "running")):
            return  # (a notice of an earlier state, after the job was placed again)
        self.sharing.release(job_id)
        if job_id not in self.grants:
            return
        node, gpu, device, mode = self.grants.pop(job_id)
        self.budgets.forget(job_id)
        if mode == "mps":
            self.mps.release(node, gpu, device, job_id)

    def share_memory(self, used_mb: dict[str, float]) -> None:
        """Called after each GPU sampling round with each job's GPU memory (NVML per-process memory):
        a share over its budget gets a warning in its history, then is stopped with the reason."""
        warnings, stops = self.budgets.check({j: used_mb[j] for j in used_mb if j in self.active})
        if warnings:
            def write(batch, at: float) -> None:
                for job_id, why in warnings:
                    job = self.active.get(job_id)
                    if job is not None:
                        self.store.add_event(batch, job_id, job.lc.state.value, at, why)

            self.work.unit([], write=write)
        if stops:
            self.work.unit([(job_id, m.Cancel(f"hive-lab ({why})")) for job_id, why in stops
                        if job_id in self.active and self.active[job_id].lc.intent is None])
