"""``hive_lab.progress(steps)``: tell hive-lab how far a job got (docs/checkpoint.md, "Progress").

It prints one line to stdout, which the job's log keeps and the service reads::

    hive-progress: steps=1200 total=5000 t=1732390000.125 attempt=3 gpu_type=V100

``total`` (optional) is the steps the whole job will take; with it the service shows the remaining
steps and an estimated finish, and the live policies that need remaining work use it.
``steps`` is the job's total so far (after a resume, count on from the checkpoint), ``t`` the time it
was measured (seconds since the epoch), ``attempt`` and ``gpu_type`` come from the task's environment
(``HIVE_ATTEMPT``, ``HIVE_GPU_TYPE``). Programs in other languages print the same line; only
``steps`` is required. From consecutive lines of one attempt the service learns the job's rate in
steps/s on each GPU type and shows it in the job's details (``progress``).
"""

from __future__ import annotations

import os
import sys
import time
from typing import IO

PREFIX = "hive-progress:"


def progress_line(steps: int, t: float | None = None, attempt: str | None = None, gpu_type: str | None = None,
                  total: int | None = None) -> str:
    """The line ``progress`` prints (without the newline)."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be a whole number >= 0 (the total so far), got {steps!r}")
    if total is not None and (isinstance(total, bool) or not isinstance(total, int) or total < 0):
        raise ValueError(f"total must be a whole number >= 0 (the steps of the whole job), got {total!r}")
    parts = [PREFIX, f"steps={steps}"] + ([f"total={total}"] if total is not None else []) + [f"t={time.time() if t is None else float(t):.3f}"]
    attempt = os.environ.get("HIVE_ATTEMPT") if attempt is None else attempt
    gpu_type = os.environ.get("HIVE_GPU_TYPE") if gpu_type is None else gpu_type
    if attempt:
        parts.append(f"attempt={attempt}")
    if gpu_type:
        parts.append(f"gpu_type={gpu_type}")
    return " ".join(parts)


def progress(steps: int, *, total: int | None = None, t: float | None = None, file: IO[str] | None = None) -> None:
    """Report that the job has done ``steps`` steps in all (``total``: of how many; ``t``: when, default now).

    Inside a hive-lab job the line goes to the job's progress channel (``$HIVE_PROGRESS_FILE``), not to
    its output: the log stays the user's. Elsewhere (or with ``file``) it is printed."""
    line = progress_line(steps, t, total=total) + "\n"
    channel = os.environ.get("HIVE_PROGRESS_FILE") if file is None else None
    if channel:
        with open(channel, "a", encoding="utf-8") as out:
            out.write(line)
        return
    out = sys.stdout if file is None else file
    out.write(line)
    out.flush()
