"""The local launcher's ``start`` of a 1-task job, timed directly (issue 40: submit -> running): what the service
waits for between "scheduled" and "running", as a LiveServer's launcher does it (the server's own user, a cgroup
per task when the machine has them, a log copier). Prints the median over ``--starts`` starts of ``sleep 600``
(each stopped before the next).

    .venv/bin/python benchmarks/bench_launch.py [--starts 30]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pathlib
import shutil
import statistics
import sys
import tempfile
import time

from hive_lab_server.execution.isolation import Isolation
from hive_lab_server.execution.launchers.base import LaunchRequest, TaskLaunch
from hive_lab_server.execution.launchers.local import LocalLauncher
try:  # (the gate runs this script against older commits too: staging lived in jobs/ before 6a30093)
    from hive_lab_server.execution.staging import private_dir
except ModuleNotFoundError:
    from hive_lab_server.jobs.staging import private_dir


def request(root: pathlib.Path, job_id: str) -> LaunchRequest:
    wd = root / job_id
    for d in (wd, wd / "logs"):
        private_dir(d, None, stop_at=root)
    task = TaskLaunch(job_id=job_id, task="main-0", group="main", index=0, rank=0, node="n", gpu_indices=(),
                      gpu_uuids=None, command="sleep 600", env={}, working_dir=str(wd),
                      log_path=str(wd / "logs" / "main-0.log"), memory_mb=256, cpus=1, user="bench")
    return LaunchRequest(job_id=job_id, user="bench", kind="batch", tasks=(task,))


async def run(starts: int, root: pathlib.Path) -> list[float]:
    launcher = LocalLauncher(root / ".state", isolation=Isolation(run_as="server"), jobs_root=str(root))
    times = []
    try:
        for i in range(starts):
            req = request(root, f"j{i}")
            t0 = time.perf_counter()
            await launcher.start(req)
            times.append(time.perf_counter() - t0)
            await launcher.stop(req.job_id, 0)
            while not await launcher.poll():
                await asyncio.sleep(0.001)
    finally:
        await launcher.close()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=30)
    args = parser.parse_args()
    root = pathlib.Path(tempfile.mkdtemp(prefix="bench-launch-"))
    try:
        times = asyncio.run(run(args.starts, root))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"local launcher start, 1 task: median {statistics.median(times) * 1000:.2f} ms, max {max(times) * 1000:.2f} ms"
          f" ({args.starts} starts; load average {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
