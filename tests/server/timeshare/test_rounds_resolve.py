"""The round driver solves a VC's Gavel policy again only when its inputs change (rounds.RoundDriver,
round_cache): jobs arriving, ending or resized; the VC's usable GPUs (a drained GPU); a measured
throughput moving by more than the tolerance. Otherwise a round reuses the allocation.

The real service (core, SQLite, local launcher running real processes) on 2 K80 + 2 V100, an injected
clock; the test calls ``plan()`` itself (no round timer) and counts ``solves``. Progress lines are
printed by the job itself (it echoes what the test hands it), with explicit ``t=`` so rates are exact.
Every wait is on a condition."""

from __future__ import annotations

import asyncio
import os

import numpy as np
import psutil
import pytest

from hive_lab_server.execution.launchers.local import LocalLauncher
from hive_lab_server.timeshare.round_cache import Inputs, what_changed
from hive_lab_server.timeshare.rounds import RoundDriver
from hive_lab_server.jobs.service import HiveService
from hive_lab_server.wire.spec import parse_job_spec
from hive_lab_server.store import Store
from hive_scheduler import Scheduler, load_cluster_config
from waiting import wait_until_async

MIXED = {
    "physicalCluster": {
        "cellTypes": {"K80-NODE": {"childCellType": "K80", "childCellNumber": 2, "isNodeLevel": True},
                      "V100-NODE": {"childCellType": "V100", "childCellNumber": 2, "isNodeLevel": True}},
        "physicalCells": [{"cellType": "K80-NODE", "cellAddress": "k80-node"},
                          {"cellType": "V100-NODE", "cellAddress": "v100-node"}],
    },
    "virtualClusters": {"lab": {"virtualCells": [{"cellType": "K80-NODE", "cellNumber": 1},
                                                 {"cellType": "V100-NODE", "cellNumber": 1}]}},
}
# waits for `release`; echoes each `say` file the test hands it (progress lines) to its log
ECHO = "while [ ! -e release ]; do if [ -e say ]; then cat say; rm say; fi; sleep 0.02; done"


class Clock:
    def __init__(self):
        self.t = 1_700_000_000.0

    def __call__(self) -> float:
        self.t += 0.001
        return self.t


@pytest.fixture
def _kill_leftovers(tmp_path):
    yield
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.cwd().startswith(str(tmp_path / "jobs")):
                proc.kill()
        except (psutil.Error, OSError):
            continue


def make_service(tmp_path) -> HiveService:
    cfg = load_cluster_config(MIXED)
    svc = HiveService(scheduler=Scheduler(cfg), config=cfg, store=Store(f"sqlite:///{tmp_path / 's.sqlite'}"),
                      launcher=LocalLauncher(tmp_path / "state"), jobs_root=tmp_path / "jobs", poll_interval_s=0.01,
                      progress_interval_s=0.02, stop_grace_s=2.0, preemption_grace_s=1.0, checkpoint_grace_s=1.0,
                      clock=Clock())
    svc.rounds = RoundDriver(svc, "max_min_fairness_perf", round_s=360)
    return svc


def submit(svc, **extra) -> str:
    spec = parse_job_spec({"vc": "lab", "command": ECHO, "tasks": [{"gpus": 1}], **extra})
    return svc.admission.submit(spec, "ann", "lab")["id"]


async def say(svc, tmp_path, job_id: str, line: str) -> None:
    """Hand the job a progress line to print; wait until the service has read it."""
    d = tmp_path / "jobs" / job_id
    await wait_until_async(lambda: not (d / "say").exists(), "the job took the last line")
    (d / "say.tmp").write_text(line + "\n")
    os.replace(d / "say.tmp", d / "say")
    steps = int(line.split("steps=")[1].split()[0])
    await wait_until_async(lambda: getattr(svc.progress.jobs.get(job_id), "steps", None) == steps, f"{job_id} read {line!r}")


@pytest.mark.timeout(240)
@pytest.mark.usefixtures("_kill_leftovers")
def test_solves_again_only_when_jobs_gpus_or_throughputs_change(tmp_path):
    async def main():
        svc = make_service(tmp_path)
        await svc.start()
        rounds = svc.rounds
        try:
            a = submit(svc, min_gpus=1, max_gpus=2)
            b = submit(svc)
            await wait_until_async(lambda: svc.active[a].state == "running" and svc.active[b].state == "running", "both running")

            rounds.plan()
            assert rounds.solves == 1 and rounds.solve_reasons["lab"] == "first solve"
            first = rounds.solved["lab"].allocation
            for _ in range(5):  # nothing changed: the same allocation, no solve
                rounds.plan()
            assert rounds.solves == 1 and rounds.solve_reasons["lab"] is None
            assert rounds.solved["lab"].allocation is first

            # a measured throughput: b learns 5 steps/s on K80 (everything was 1 step/s before)
            await say(svc, tmp_path, b, "hive-progress: steps=0 t=100 attempt=1 gpu_type=K80")
            rounds.plan()
            assert rounds.solves == 1  # one reading is no rate yet
            await say(svc, tmp_path, b, "hive-progress: steps=50 t=110 attempt=1 gpu_type=K80")
            rounds.plan()
            assert rounds.solves == 2
            assert rounds.solve_reasons["lab"] == f"throughput of {b} on K80: 1 -> 5 steps/s (more than 10%)"
            # noise within the tolerance (5 -> 5.1 steps/s): reused
            await say(svc, tmp_path, b, "hive-progress: steps=102 t=120 attempt=1 gpu_type=K80")
            rounds.plan()
            assert rounds.solves == 2 and rounds.solve_reasons["lab"] is None
            # drift beyond it since the last solve (5 -> 6 steps/s): solved again
            await say(svc, tmp_path, b, "hive-progress: steps=180 t=130 attempt=1 gpu_type=K80")
            rounds.plan()
            assert rounds.solves == 3 and rounds.solve_reasons["lab"].startswith(f"throughput of {b} on K80: 5 -> 6")
            # rates live in memory only: as after a restart, the tracker forgot them; the driver reads the
            # job's log (the record) again rather than solving with 1 step/s
            svc.progress.forget(b)
            rounds.plan()
            assert rounds.solves == 3 and rounds.solve_reasons["lab"] is None
            assert svc.progress.jobs[b].rates["K80"].per_s == pytest.approx(6.0)

            # a job arrives, then ends
            c = submit(svc)
            rounds.plan()
            assert rounds.solves == 4 and rounds.solve_reasons["lab"] == f"jobs arrived: {c}"
            rounds.plan()
            assert rounds.solves == 4
            await svc.cancel(c, "ann", wait_s=0)
            await wait_until_async(lambda: c not in svc.active, "c ended")
            rounds.plan()
            assert rounds.solves == 5 and rounds.solve_reasons["lab"] == f"jobs ended: {c}"

            # a resize (1 -> 2 GPUs), once the job is queued again with its new size
            await svc.moves.resize(a, 2, "by the test")
            await wait_until_async(lambda: a in svc.active and svc.active[a].lc.intent is None, "a resized")
            rounds.plan()
            assert rounds.solves == 6 and rounds.solve_reasons["lab"] == f"jobs resized: {a} 1 -> 2 GPUs"

            # the VC's GPUs: a drained K80 is one the VC cannot use; undrained, it can again
            svc.hardware_events.set_drain("k80-node", 1, True, "carol")
            rounds.plan()
            assert rounds.solves == 7
            assert rounds.solve_reasons["lab"] == "GPUs changed: 2 K80, 2 V100 -> 1 K80, 2 V100"
            assert rounds.solved["lab"].inputs.gpus == (("K80", 1), ("V100", 2))
            rounds.plan()
            assert rounds.solves == 7
            svc.hardware_events.set_drain("k80-node", 1, False, "carol")
            rounds.plan()
            assert rounds.solves == 8 and rounds.solve_reasons["lab"] == "GPUs changed: 1 K80, 2 V100 -> 2 K80, 2 V100"

            for job_id in (a, b):
                (tmp_path / "jobs" / job_id / "release").touch()
            await wait_until_async(lambda: not svc.active, "all done")
            rounds.plan()  # no jobs: nothing kept; the next job is a first solve
            assert "lab" not in rounds.solved and rounds.solves == 8
        finally:
            await svc.stop()

    asyncio.run(main())


def test_what_changed_names_the_change():
    thr = np.array([[1.0, 2.0], [3.0, 4.0]])
    old = Inputs(jobs=(("j1", 1), ("j2", 1)), gpus=(("K80", 2), ("V100", 2)), throughput=thr)
    assert what_changed(None, old) == "first solve"
    assert what_changed(old, Inputs(old.jobs, old.gpus, thr * 1.09)) is None
    assert what_changed(old, Inputs(old.jobs, old.gpus, thr * 1.2)).startswith("throughput of j1 on K80: 1 -> 1.2")
    assert what_changed(old, Inputs(old.jobs, old.gpus, thr * 1.2), rtol=0.25) is None
    assert what_changed(old, Inputs((("j1", 1), ("j3", 2)), old.gpus, thr)) == "jobs arrived: j3; ended: j2"
    assert what_changed(old, Inputs((("j1", 2), ("j2", 1)), old.gpus, thr)) == "jobs resized: j1 1 -> 2 GPUs"
    assert what_changed(old, Inputs(old.jobs, (("K80", 2),), thr[:, :1])) == "GPUs changed: 2 K80, 2 V100 -> 2 K80"
