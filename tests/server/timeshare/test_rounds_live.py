"""Gavel's policies live (rounds.RoundDriver) on the real service: real core, local launcher running
real processes, SQLite; a VC with one K80 and one V100. Rounds are driven by the test (no clock)."""

from __future__ import annotations

import asyncio

import psutil
import pytest

from hive_lab_server.execution.launchers.local import LocalLauncher
from hive_lab_server.timeshare.rounds import RoundDriver
from hive_lab_server.jobs.service import HiveService
from hive_lab_server.wire.spec import parse_job_spec
from hive_lab_server.store import Store
from hive_scheduler import Scheduler, load_cluster_config
from hive_scheduler.hetero import load_throughputs
from waiting import wait_until_async

MIXED = {
    "physicalCluster": {
        "cellTypes": {"K80-NODE": {"childCellType": "K80", "childCellNumber": 1, "isNodeLevel": True},
                      "V100-NODE": {"childCellType": "V100", "childCellNumber": 1, "isNodeLevel": True}},
        "physicalCells": [{"cellType": "K80-NODE", "cellAddress": "k80-node"},
                          {"cellType": "V100-NODE", "cellAddress": "v100-node"}],
    },
    "virtualClusters": {"lab": {"virtualCells": [{"cellType": "K80-NODE", "cellNumber": 1},
                                                 {"cellType": "V100-NODE", "cellNumber": 1}]}},
}
WAIT = "while [ ! -e release ]; do sleep 0.05; done"
RESNET = "ResNet-50 (batch size 64)"  # Gavel: 0.62 steps/s on a K80, 4.39 on a V100
RECOMMENDATION = "Recommendation (batch size 1024)"  # Gavel: 20.05 on a K80, 13.28 on a V100


class Clock:
    def __init__(self):
        self.t = 1_700_000_000.0

    def __call__(self) -> float:
        self.t += 0.001
        return self.t


@pytest.fixture(autouse=True)
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
                      stop_grace_s=2.0, preemption_grace_s=1.0, checkpoint_grace_s=1.0, clock=Clock(),
                      throughputs=load_throughputs())
    svc.rounds = RoundDriver(svc, "max_min_fairness_perf", round_s=360)
    return svc


def submit(svc, job_type, gpu_type=None) -> str:
    task = {"gpus": 1, **({"gpu_type": gpu_type} if gpu_type else {})}
    spec = parse_job_spec({"vc": "lab", "command": WAIT, "job_type": job_type, "tasks": [task]})
    return svc.admission.submit(spec, "ann", "lab")["id"]


def settled(svc, plan) -> bool:
    """Every job does what the round chose: runs on its type, or is paused."""
    for job_id, gpu_type in plan.items():
        job = svc.active.get(job_id)
        if job is None or job.lc.intent is not None:
            return False
        if gpu_type is None:
            if job.state != "paused":
                return False
        elif job.state != "running" or svc.moves.placed_gpu_type(job) != gpu_type:
            return False
    return True


def history(svc, job_id):
    return [h["reason"] for h in svc.store.history(job_id)]


@pytest.mark.timeout(240)
def test_jobs_move_to_their_faster_type_and_take_turns(tmp_path):
    async def main():
        svc = make_service(tmp_path)
        await svc.start()
        try:
            # each starts on the type that is slow for it
            resnet = submit(svc, RESNET, "K80")
            rec = submit(svc, RECOMMENDATION, "V100")
            await wait_until_async(lambda: svc.active[resnet].state == "running" and svc.active[rec].state == "running",
                        "both running")
            plan = await svc.rounds.run_round()
            # by hand: each job's best type is the other's worst, so max-min fairness swaps them
            assert plan == {resnet: "V100", rec: "K80"}
            await wait_until_async(lambda: settled(svc, plan), "round 1 carried out")
            assert "migrated K80 -> V100: round 1 of max_min_fairness_perf: faster type" in history(svc, resnet)
            assert "migrated V100 -> K80: round 1 of max_min_fairness_perf: faster type" in history(svc, rec)
            assert svc.rounds.solves == 1 and svc.rounds.solve_reasons["lab"] == "first solve"
            plan = await svc.rounds.run_round()  # nothing better: nothing moves
            assert plan == {resnet: "V100", rec: "K80"}
            assert svc.active[resnet].lc.attempt == 2 and svc.active[rec].lc.attempt == 2
            # the same jobs, GPUs and throughputs (their states changed): the allocation is reused
            assert svc.rounds.solves == 1 and svc.rounds.solve_reasons["lab"] is None

            # a third job: two GPUs for three jobs, so they take turns
            other = submit(svc, RESNET)
            ran: dict[str, set[str]] = {j: set() for j in (resnet, rec, other)}
            for n in range(4):
                plan = await svc.rounds.run_round()
                # solved once when the third job arrived, then the rounds only take turns on that allocation
                assert svc.rounds.solves == 2, svc.rounds.solve_reasons
                assert svc.rounds.solve_reasons["lab"] == (f"jobs arrived: {other}" if n == 0 else None)
                assert sorted(t for t in plan.values() if t) <= ["K80", "V100"]  # one job per GPU
                assert sum(1 for t in plan.values() if t is None) == 1
                await wait_until_async(lambda: settled(svc, plan), f"round {svc.rounds.round} carried out")
                for job_id, gpu_type in plan.items():
                    if gpu_type:
                        ran[job_id].add(gpu_type)
            assert all(ran.values()), ran  # everyone ran within four rounds
            assert ran[rec] == {"K80"}  # never put on the type that is slower for it
            paused = [r for j in ran for r in history(svc, j) if r.startswith("paused: round ")]
            assert paused and all(r.endswith("of max_min_fairness_perf") for r in paused)
            for job_id in ran:
                (tmp_path / "jobs" / job_id).mkdir(parents=True, exist_ok=True)
                (tmp_path / "jobs" / job_id / "release").touch()
            await wait_until_async(lambda: all(job.state == "paused" for job in svc.active.values()), "the running ones done")
            for job_id in list(svc.active):
                svc.moves.resume(job_id, "by the test")
            await wait_until_async(lambda: not svc.active, "all done")
            assert all(svc.store.get_job(j)["state"] == "succeeded" for j in ran)
            assert svc.scheduler.free_gpu_count() == 2
        finally:
            await svc.stop()

    asyncio.run(main())


@pytest.mark.timeout(240)
def test_a_job_held_by_its_dependencies_takes_no_part_in_rounds(tmp_path):
    async def main():
        svc = make_service(tmp_path)
        await svc.start()
        try:
            first = submit(svc, RESNET, "K80")
            spec = parse_job_spec({"vc": "lab", "command": WAIT, "job_type": RESNET, "tasks": [{"gpus": 1}],
                                   "after": [first]})
            held = svc.admission.submit(spec, "ann", "lab")
            assert held["state"] == "queued" and held["reason"] == f"waiting for {first} to succeed"
            assert [j.id for j in svc.rounds.candidates("lab")] == [first]
            plan = await svc.rounds.run_round()
            assert held["id"] not in plan and svc.active[held["id"]].state == "queued"
        finally:
            await svc.stop()

    asyncio.run(main())
