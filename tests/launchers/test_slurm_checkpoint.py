"""The checkpoint signal through a REAL Slurm cluster (tests/fixtures/slurm_cluster.py): ``scancel
--signal=USR1 --full`` reaches the job's processes; the batch shell and the task functions outlive it,
so a job that checkpoints exits 0 with its checkpoint written, for one task and for a gang of steps."""

from __future__ import annotations

import asyncio
import time

import pytest

from hive_lab_server.execution.launchers.base import LaunchRequest

from test_slurm_launcher import cluster, collect, launcher, log_of, task  # noqa: F401  (cluster: a fixture)

pytestmark = pytest.mark.slurm

HANDLES_USR1 = ("python3 -c 'import signal, sys, time\n"
                "def on_usr1(*_):\n    print(\"checkpointed\", flush=True); sys.exit(0)\n"
                "signal.signal(signal.SIGUSR1, on_usr1); print(\"started\", flush=True)\n"
                "while True: time.sleep(0.05)'")


async def wait_started(root, job, names):
    deadline = time.monotonic() + 30
    while not all((root / job / "logs" / f"{n}.log").exists() and "started" in log_of(root, job, n) for n in names):
        assert time.monotonic() < deadline, [log_of(root, job, n) for n in names
                                             if (root / job / "logs" / f"{n}.log").exists()]
        await asyncio.sleep(0.1)


@pytest.mark.parametrize("tasks", [[("main-0", "n1", [0])], [("w-0", "n1", [0]), ("w-1", "n2", [1])]])
async def test_checkpoint_signal_reaches_the_job_and_it_exits_cleanly(cluster, tmp_path, tasks):  # noqa: F811
    job = "ck"
    l = launcher(cluster, tmp_path)
    launches = tuple(task(tmp_path, job, name, rank, node, gpus, HANDLES_USR1)
                     for rank, (name, node, gpus) in enumerate(tasks))
    await l.start(LaunchRequest(job, "root", "batch", launches))
    await wait_started(tmp_path, job, [t[0] for t in tasks])
    await l.checkpoint(job, grace_s=20)
    await l.stop(job, grace_s=5)
    exits = await collect(l, len(tasks))
    assert sorted(e.exit_code for e in exits) == [0] * len(tasks), exits
    for name, _, _ in tasks:
        assert "checkpointed" in log_of(tmp_path, job, name)
    assert await l.running() == {}
