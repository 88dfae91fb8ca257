"""A crash at any step of a Slurm launch never runs a job twice (issue 24), against a REAL Slurm cluster.

Slurm knows a job while it is queued or running, and forgets it soon after it ends. A server that died
after ``sbatch`` accepted a job, and came back after the job ended, found nothing: recovery took the job
for never started and ran it again. Now each launch is written down before ``sbatch`` and kept until the
service stored its exits; a restarted launcher reports each such task's exit (exit file, else lost).
A gang is one Slurm job (a het job), so it is accepted whole or not at all.
"""

from __future__ import annotations

import pathlib

import pytest

from hive_lab_server.execution.launchers.base import LaunchRequest, TaskLaunch
from hive_lab_server.execution.launchers.slurm import SlurmLauncher
from waiting import wait_until_async

pytestmark = pytest.mark.slurm
STEPS = ("recorded, before sbatch", "sbatch accepted, before it was tracked", "no crash")


class Crash(BaseException):
    """The server died here."""


@pytest.fixture
def cluster(slurm_cluster):
    slurm_cluster.cancel_all()
    yield slurm_cluster
    slurm_cluster.cancel_all()


def launcher(cluster, root: pathlib.Path) -> SlurmLauncher:
    return SlurmLauncher(slurm_conf=cluster.slurm_conf, jobs_root=str(root), sync_node_health=False, slurm_poll_s=0.2)


def gang(root: pathlib.Path, job: str) -> LaunchRequest:
    tasks = tuple(
        TaskLaunch(job_id=job, task=f"w-{i}", group="w", index=i, rank=i, node=node, gpu_indices=(0,),
                   gpu_uuids=None, command=f"echo ran >> {root}/{job}-w-{i}.runs", env={"HIVE_JOB_ID": job},
                   working_dir=str(root), log_path=str(root / job / "logs" / f"w-{i}.log"))
        for i, node in enumerate(("n1", "n2")))
    return LaunchRequest(job, "root", "batch", tasks)


@pytest.mark.parametrize("crash_at", STEPS)
async def test_a_gang_that_ends_while_the_server_is_down_is_reported_not_run_again(cluster, tmp_path, crash_at):
    first = launcher(cluster, tmp_path)
    request = gang(tmp_path, "j-crash")
    submit = first.cli.submit

    async def crashing_submit(*args, **kwargs):
        if crash_at == STEPS[0]:
            raise Crash(crash_at)
        slurm_id = await submit(*args, **kwargs)
        if crash_at == STEPS[1]:
            raise Crash(crash_at)
        return slurm_id

    first.cli.submit = crashing_submit
    try:
        await first.start(request)
    except Crash:
        pass
    ran = crash_at != STEPS[0]
    runs = [tmp_path / f"j-crash-w-{i}.runs" for i in range(2)]
    if ran:  # the gang ends while no server watches (the exit files are its wrapper's last word)
        await wait_until_async(lambda: all(pathlib.Path(t.log_path).parent.joinpath(".slurm", f"{t.task}.exit").exists()
                                           for t in request.tasks), "the Slurm job to end")

    restarted = launcher(cluster, tmp_path)  # the server's next start: what recovery asks, in its order
    await wait_until_async(lambda: _not_live(restarted), "Slurm to see the job ended")
    assert await restarted.running() == {}
    exits = sorted(await restarted.poll(), key=lambda e: e.task)
    if ran:
        assert [(e.task, e.exit_code) for e in exits] == [("w-0", 0), ("w-1", 0)]  # it ran: not "never started"
    else:
        assert [(e.task, e.exit_code) for e in exits] == [("w-0", None), ("w-1", None)]
        assert all("lost" in e.reason for e in exits)
    assert [r.read_text().count("ran") if r.exists() else 0 for r in runs] == [int(ran)] * 2  # once or not at all

    restarted.ack(exits)  # stored by the service: a later restart has nothing to report
    again = launcher(cluster, tmp_path)
    assert await again.poll() == []


async def _not_live(l: SlurmLauncher) -> bool:
    return "j-crash" not in await l.running()
