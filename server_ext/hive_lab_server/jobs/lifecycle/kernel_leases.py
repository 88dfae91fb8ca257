"""A GPU kernel's job ends once nobody can reach its kernel any more, queued or running (issue 26).

The provisioner in the Jupyter server holding a kernel writes the time into the job's
``.hive-kernel/alive`` every few seconds from submission on, and its lease into ``.hive-kernel/lease``
(``HiveProvisioner.heartbeat_lease_s``). When that server is stopped it cancels its kernels' jobs itself;
when it dies (SIGKILL, its machine), nobody does: the kernel's own watchdog (``kernels.job``) acts only
once the kernel runs, and its end reads "exited with code 143". The service reads the same heartbeat for
every unfinished kernel job and cancels those whose lease ran out, saying why: a queued kernel of a dead
server never starts for nobody, and a running one ends with a reason in words.

The files lie in the owner's job dir: they are read with no link followed, non-blocking, regular files
only (``isolation.safe_files``); a job that forges its own heartbeat only keeps its own kernel.
"""

from __future__ import annotations

import math
import os
from typing import Iterable

from hive_lab_server.execution.isolation.safe_files import UnsafePath, open_regular
from hive_lab_server.kernels.job import KERNEL_DIR
from hive_lab_server.jobs.lifecycle.active import ActiveJob
from hive_lab_server.wire.states import FINAL_STATES

ALIVE = f"{KERNEL_DIR}/alive"
LEASE = f"{KERNEL_DIR}/lease"


def _number(base: str, rel: str) -> float | None:
    try:
        fd, _ = open_regular(base, rel)
    except (OSError, UnsafePath):
        return None
    try:
        data = os.read(fd, 64)
    finally:
        os.close(fd)
    try:
        value = float(data.decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        return None
    return value if math.isfinite(value) and value > 0 else None


def lapsed(working_dir: str, now: float) -> str | None:
    """Why the kernel of the job in ``working_dir`` is unreachable (its heartbeat older than its lease), else None."""
    beat, lease = _number(working_dir, ALIVE), _number(working_dir, LEASE)
    if beat is None or lease is None or now - beat <= lease:
        return None
    return (f"hive-lab (no heartbeat for {now - beat:.0f} s from the Jupyter server holding this kernel, lease "
            f"{lease:.0f} s: that server stopped or died, and nobody can reach the kernel any more)")


def unreachable_kernels(jobs: Iterable[ActiveJob], now: float) -> list[tuple[str, str]]:
    """(job id, who/why for the cancel) of each unfinished kernel job whose lease ran out."""
    out = []
    for job in jobs:
        if job.spec.kind != "kernel" or job.lc.state in FINAL_STATES:
            continue
        why = lapsed(job.working_dir, now)
        if why is not None:
            out.append((job.id, why))
    return out
