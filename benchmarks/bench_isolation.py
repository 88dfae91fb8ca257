"""How much a task's start-to-exit costs with isolation (own account via setpriv, own cgroup, log
copier) against the plain local launcher. Needs root and the account hive-stu-a (tests/fixtures/
unix_accounts.py makes it). Prints the median of N runs of ``true``.

    python benchmarks/bench_isolation.py [N]
"""

from __future__ import annotations

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


async def one(launcher: LocalLauncher, root: pathlib.Path, job_id: str, user: str) -> float:
    wd = root / job_id
    owner = launcher.task_owner(user)
    for d in (wd, wd / "logs"):
        private_dir(d, owner, stop_at=root)
    task = TaskLaunch(job_id=job_id, task="main-0", group="main", index=0, rank=0, node="n", gpu_indices=(),
                      gpu_uuids=None, command="true", env={}, working_dir=str(wd),
                      log_path=str(wd / "logs" / "main-0.log"), memory_mb=256, cpus=1, user=user)
    t0 = time.perf_counter()
    await launcher.start(LaunchRequest(job_id=job_id, user=user, kind="batch", tasks=(task,)))
    while not await launcher.poll():
        await asyncio.sleep(0.001)
    return time.perf_counter() - t0


async def main(n: int) -> None:
    root = pathlib.Path(tempfile.mkdtemp(prefix="hive-bench-", dir="/tmp"))
    os.chmod(root, 0o711)
    try:
        for label, iso in (("plain (server's user, no cgroup, no copier)", Isolation.server_identity()),
                           ("isolated (hive-stu-a, cgroup, log copier)", Isolation(run_as="owner"))):
            launcher = LocalLauncher(root / f".state-{len(label)}", isolation=iso, jobs_root=str(root))
            times = [await one(launcher, root, f"{label[:4]}-{i}", "hive-stu-a") for i in range(n)]
            print(f"{label}: median {statistics.median(times) * 1000:.1f} ms start-to-exit of `true` "
                  f"over {n} runs (cgroups: {launcher.cgroup_version})")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20))
