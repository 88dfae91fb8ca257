"""The service's own idle cull of GPU kernels in VCs with a ``max_idle_s`` cap (``lifecycle.kernel_caps``).

The provisioner's culler runs in the kernel owner's Jupyter server, with the owner's kernelspec
(``idle_timeout: 0`` turns it off there). Here the service follows each running GPU kernel of a capped
VC itself, the way the provisioner does: a SUB socket on the kernel's IOPub (``kernels.culler``; nothing
is sent to the kernel), at the node address the provisioner connects to and the IOPub port of the
connection file the job was submitted with. A kernel executing a cell is never idle; a GPU of the kernel
that the hardware monitor sees busy counts as activity too. Idle time is counted on the service's clock.

A kernel the service cannot hear (it never publishes, or its connection file names no usable port) is
counted from its start after the culler's startup grace, so a job that only calls itself a kernel holds
its GPUs no longer than the cap either.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable, Mapping

from hive_lab_server.jobs.lifecycle.active import ActiveJob
from hive_lab_server.jobs.lifecycle.kernel_caps import KernelCap, cap_of
from hive_lab_server.wire.states import JobState
from hive_lab_server.kernels.culler import IdleCuller
from hive_lab_server.kernels.job import CONNECTION_FILE, duration


# what the service (root) takes from a user's kernel in one IOPub message: status messages are tiny; a
# larger output only drops and renews the connection, so the memory held for a kernel stays bounded
MAX_MESSAGE_BYTES = 64 * 2**20


async def _never(_idle_s: float) -> None:  # the service cancels the job itself (see ``idle``)
    return None


def iopub_of(job: ActiveJob) -> dict[str, Any] | None:
    """``{"transport", "iopub_port"}`` of the connection file the job was submitted with, or None when it
    names no unprivileged TCP port (the watch then hears nothing, and the job counts as idle)."""
    text = job.spec.files.get(CONNECTION_FILE)
    try:
        info = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
    port = info.get("iopub_port") if isinstance(info, dict) else None
    if isinstance(port, bool) or not isinstance(port, int) or not 1024 <= port <= 65535:
        return None
    if info.get("transport", "tcp") != "tcp":
        return None
    return {"transport": "tcp", "iopub_port": port}


class KernelIdleWatch:
    """One ``IdleCuller`` (listening only) per running GPU kernel of a VC whose cap sets ``max_idle_s``.

    ``address_of(node)``: where a task on ``node`` is reached (the launcher's host address);
    ``gpu_busy(job)``: whether the hardware monitor sees one of the job's GPUs busy now."""

    def __init__(self, caps: Mapping[str, KernelCap], clock: Callable[[], float],
                 address_of: Callable[[str], str], gpu_busy: Callable[[ActiveJob], bool] = lambda job: False,
                 startup_grace_s: float = 120.0):
        self.caps = caps
        self.clock = clock
        self.address_of = address_of
        self.gpu_busy = gpu_busy
        self.startup_grace_s = startup_grace_s
        self.watched: dict[str, tuple[int, IdleCuller]] = {}  # job id -> (attempt, its culler)

    def _limit(self, job: ActiveJob) -> float | None:
        return cap_of(job.vc, self.caps).max_idle_s

    def sync(self, jobs: Iterable[ActiveJob]) -> None:
        """Watch every running GPU kernel of a capped VC (from its start: a new attempt starts anew);
        stop watching the others. Called from the service's loop (a running event loop)."""
        keep = set()
        for job in jobs:
            if job.lc.state is not JobState.RUNNING or not job.placement or not self._limit(job) \
                    or not job.spec.gpu_kernel:
                continue
            keep.add(job.id)
            attempt = job.lc.attempt
            if job.id in self.watched and self.watched[job.id][0] == attempt:
                continue
            self._drop(job.id)
            info = iopub_of(job) or {"iopub_port": 0}
            culler = IdleCuller({**info, "ip": _ip(self.address_of(job.placement[0].node))},
                                float(self._limit(job)), _never, startup_grace_s=self.startup_grace_s,
                                clock=self.clock, max_message_bytes=MAX_MESSAGE_BYTES)
            if job.lc.started_at is not None:  # from the attempt's start, however late the loop saw it
                culler.count_from(job.lc.started_at)
            if info["iopub_port"]:
                culler.listen()
            self.watched[job.id] = (attempt, culler)
        for job_id in [j for j in self.watched if j not in keep]:
            self._drop(job_id)

    def idle(self, jobs: Mapping[str, ActiveJob]) -> list[tuple[str, str]]:
        """(job id, why) of each watched kernel idle for its VC's cap or longer (its GPUs not busy)."""
        out = []
        for job_id, (_, culler) in self.watched.items():
            job = jobs.get(job_id)
            if job is None:
                continue
            idle = culler.idle_for()
            if idle < culler.limit_s:
                continue
            if self.gpu_busy(job):
                culler.last_activity = self.clock()
                continue
            gpus = sum(float(t.gpus or 0) * int(t.count or 1) for t in job.spec.tasks)
            out.append((job_id, f"hive-lab (idle kernel culled: no execution for {duration(idle)} while holding "
                                f"{gpus:g} GPU{'' if gpus == 1 else 's'}; VC {job.vc} culls idle GPU kernels "
                                f"after {duration(culler.limit_s)}, whatever their kernelspec says)"))
        return out

    def _drop(self, job_id: str) -> None:
        entry = self.watched.pop(job_id, None)
        if entry is not None:
            entry[1].close()

    def close(self) -> None:
        for job_id in list(self.watched):
            self._drop(job_id)


def _ip(address: str) -> str:
    return "127.0.0.1" if address in ("", "localhost") else address
