"""Gandiva's grow-shrink live (elastic_rounds, rounds.RoundDriver.grow_shrink): the rounds grow an
elastic job into idle GPUs of its VC and shrink it when another job waits, through the resize
lifecycle event (checkpoint, restart with HIVE_WORLD_SIZE); the job's result equals an uninterrupted
run. The real service (core, SQLite, local launcher running real processes) on 2 K80 + 2 V100, an
injected clock; the test drives the rounds itself (``run_round``), every wait is on a condition."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

from checkpointing_job import MIXED, TRAIN, expected
from hive_lab_server.execution.launchers.local import LocalLauncher
from hive_lab_server.timeshare.rounds import RoundDriver
from hive_lab_server.jobs.service import HiveService
from hive_lab_server.wire.spec import parse_job_spec
from hive_lab_server.store import Store
from hive_scheduler import Scheduler, load_cluster_config
from test_rounds_resolve import Clock, _kill_leftovers  # noqa: F401
from waiting import wait_until_async

TOTAL = 60
WAIT = "while [ ! -e release ]; do sleep 0.05; done"


def make_service(tmp_path) -> HiveService:
    cfg = load_cluster_config(MIXED)
    svc = HiveService(scheduler=Scheduler(cfg), config=cfg, store=Store(f"sqlite:///{tmp_path / 's.sqlite'}"),
                      launcher=LocalLauncher(tmp_path / "state"), jobs_root=tmp_path / "jobs", poll_interval_s=0.01,
                      stop_grace_s=2.0, preemption_grace_s=1.0, checkpoint_grace_s=20.0, clock=Clock())
    svc.rounds = RoundDriver(svc, "gandiva", round_s=360)
    return svc


def allow(tmp_path, job_id: str, steps: int) -> None:
    d = tmp_path / "jobs" / job_id
    d.mkdir(parents=True, exist_ok=True)
    (d / "allow.tmp").write_text(str(steps))
    (d / "allow.tmp").replace(d / "allow")


def reached(tmp_path, job_id: str) -> int:
    try:
        return int((tmp_path / "jobs" / job_id / "output" / "reached").read_text())
    except (OSError, ValueError):
        return -1


def attempts(tmp_path, job_id: str) -> list[dict]:
    path = tmp_path / "jobs" / job_id / "output" / "attempts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def history(svc, job_id):
    return [h["reason"] for h in svc.store.history(job_id)]


def settled(svc, plan) -> bool:
    """Every job does what the round chose: runs on its type, or is paused (or ended)."""
    for job_id, gpu_type in plan.items():
        job = svc.active.get(job_id)
        if job is None:
            continue
        if job.lc.intent is not None:
            return False
        if gpu_type is None:
            if job.state != "paused":
                return False
        elif job.state != "running":
            return False
    return True


def gpus(svc, job_id) -> int:
    return svc.active[job_id].spec.tasks[0].gpus


@pytest.mark.timeout(300)
@pytest.mark.usefixtures("_kill_leftovers")
def test_rounds_grow_into_idle_gpus_and_shrink_for_a_waiting_job(tmp_path):
    async def main():
        svc = make_service(tmp_path)
        await svc.start()
        rounds = svc.rounds
        try:
            spec = parse_job_spec({"vc": "lab", "command": f"{sys.executable} train.py {TOTAL}",
                                   "files": {"train.py": TRAIN}, "checkpoint": True, "min_gpus": 1, "max_gpus": 2,
                                   "tasks": [{"gpus": 1, "gpu_type": "K80"}]})
            e = svc.admission.submit(spec, "ann", "lab")["id"]
            allow(tmp_path, e, 20)
            await wait_until_async(lambda: reached(tmp_path, e) == 20, "the elastic job at step 20")

            # alone in the VC: the round grows it into the idle GPU of its type
            await rounds.run_round()
            await wait_until_async(lambda: svc.active[e].state == "running" and len(attempts(tmp_path, e)) == 2
                        and any(r.startswith("resized") for r in history(svc, e)), "the grown attempt")
            assert gpus(svc, e) == 2
            t = svc.moves.placed_gpu_type(svc.active[e])
            assert f"resized 1 -> 2 GPUs: round 1 of gandiva: grown 1 -> 2 GPUs: 1 idle GPU of {t} in VC lab" \
                in history(svc, e)
            allow(tmp_path, e, 40)
            await wait_until_async(lambda: reached(tmp_path, e) == 40, "the elastic job at step 40")

            # next round: cooling down (resized last round); nothing else changed: no resize
            await rounds.run_round()
            assert gpus(svc, e) == 2 and len(attempts(tmp_path, e)) == 2

            # three one-GPU jobs: 4 GPUs in the VC, 5 asked, so one waits
            others = [svc.admission.submit(parse_job_spec({"vc": "lab", "command": WAIT, "tasks": [{"gpus": 1}]}),
                                 "bob", "lab")["id"] for _ in range(3)]
            shrunk = False
            plan = await rounds.run_round()
            await wait_until_async(lambda: settled(svc, plan), "round 3 carried out")
            for _ in range(3):  # the round after the others came in (and settled) shrinks it
                plan = await rounds.run_round()
                if gpus(svc, e) == 1:
                    shrunk = True
                    break
                await wait_until_async(lambda: settled(svc, plan), "the round carried out")
            assert shrunk, [history(svc, j) for j in [e, *others]]
            shrink = f"resized 2 -> 1 GPUs: round {rounds.round} of gandiva: shrunk 2 -> 1 GPUs: "
            await wait_until_async(lambda: any(r.startswith(shrink) and any(f"{o} waits for 1 GPU of " in r for o in others)
                                    for r in history(svc, e)),
                        "the shrink in the history")
            # the next round: everyone fits (1 + 3 GPUs of 4), nobody waits, no GPU idle: nothing resized
            await wait_until_async(lambda: svc.active[e].state == "running", "the shrunk attempt")
            plan = await rounds.run_round()
            assert all(v is not None for v in plan.values()), plan
            await wait_until_async(lambda: all(svc.active[j].state == "running" for j in [e, *others]), "all four running")
            assert gpus(svc, e) == 1

            allow(tmp_path, e, TOTAL)
            await wait_until_async(lambda: e not in svc.active, "the elastic job done")
            assert svc.store.get_job(e)["state"] == "succeeded"
            assert (tmp_path / "jobs" / e / "output" / "result.txt").read_text() == expected(TOTAL)
            sizes = [a["HIVE_WORLD_SIZE"] for a in attempts(tmp_path, e)]
            assert sizes[:2] == ["1", "2"] and sizes[-1] == "1"
            for j in others:
                (tmp_path / "jobs" / j / "release").touch()
            await wait_until_async(lambda: not svc.active, "all done")
        finally:
            await svc.stop()

    asyncio.run(main())
