"""A seeded run of the service (HiveService, its store, the core with overflow) with a scripted launcher
and a logical clock, printed as a trace: every stored state change with its reason, every placement,
every job's end. Run it against two trees and compare: a refactoring that changes no behaviour prints
the same trace, byte for byte (issue 23's differential check).

    PYTHONPATH=scheduler:server_ext python benchmarks/service_trace.py [--seed 23] [--steps 600] > after.txt
    PYTHONPATH=/tmp/before/scheduler:/tmp/before/server_ext python benchmarks/service_trace.py > before.txt
    cmp before.txt after.txt

The script: submits (1-2 task groups of 1-4 GPUs, priorities, some opportunistic), cancels, task exits
(0 or not) and clock steps, drawn from the seed; after each, the service settles (the launcher's exits
polled and applied, every launch and stop done) before the next, so the order is the seed's alone.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import random
import sys
import tempfile

try:  # the layout after issue 23's move, else the one before it
    from hive_lab_server.execution.launchers.base import Launcher, TaskExit
    from hive_lab_server.jobs.service import HiveService
    from hive_lab_server.wire.spec import parse_job_spec
except ImportError:  # pragma: no cover - the code before
    from hive_lab_server.launchers.base import Launcher, TaskExit
    from hive_lab_server.service import HiveService
    from hive_lab_server.spec import parse_job_spec
from hive_lab_server.store import Store
from hive_scheduler import Scheduler, load_cluster_config
from hive_scheduler.overflow import OverflowScheduler

CLUSTER = {"nodes": 4, "gpus_per_node": 4, "gpu_type": "T4", "vcs": {"a": 8, "b": 4, "c": 4}}


class ScriptedLauncher(Launcher):
    """Tasks 'run' until the script ends them (or the service stops them: exit 143)."""

    name = "scripted"

    def __init__(self) -> None:
        super().__init__()
        self.live: dict[str, list[str]] = {}
        self.exits: list[TaskExit] = []

    async def start(self, request) -> None:
        self.live[request.job_id] = [t.task for t in request.tasks]

    async def stop(self, job_id: str, grace_s: float) -> None:
        for task in self.live.pop(job_id, []):
            self.exits.append(TaskExit(job_id, task, 143, "stopped"))

    async def poll(self) -> list[TaskExit]:
        out, self.exits = self.exits, []
        return out

    async def running(self) -> dict[str, set[str]]:
        return {job: set(tasks) for job, tasks in self.live.items()}

    async def adopt(self, request) -> None:
        self.live.setdefault(request.job_id, [t.task for t in request.tasks])

    def end(self, job_id: str, code: int) -> None:
        for task in self.live.pop(job_id, []):
            self.exits.append(TaskExit(job_id, task, code))


async def run(seed: int, steps: int, tmp: str) -> list[str]:
    rng = random.Random(seed)
    now = [1_000_000.0]
    cfg = load_cluster_config(CLUSTER)
    launcher = ScriptedLauncher()
    store = Store(f"sqlite:///{tmp}/trace.sqlite")
    service = HiveService(scheduler=OverflowScheduler(Scheduler(cfg, private_placement=True)), config=cfg,
                          store=store, launcher=launcher, jobs_root=f"{tmp}/jobs", poll_interval_s=0.001,
                          clock=lambda: now[0], stop_grace_s=0.0, preemption_grace_s=0.0, checkpoint_grace_s=0.0)
    await service.start()

    async def settle() -> None:
        for _ in range(10_000):
            if not launcher.exits and all(op.done() for op in service.work._ops.values()):
                await asyncio.sleep(0.003)  # one more poll: exits a stop reported meanwhile
                if not launcher.exits and all(op.done() for op in service.work._ops.values()):
                    return
            await asyncio.sleep(0.001)
        raise RuntimeError("the service did not settle")

    users = ["ann", "bob", "cy", "dee"]
    for step in range(steps):
        action = rng.random()
        now[0] += rng.choice([0.0, 1.0, 5.0, 30.0])
        if action < 0.45:
            groups = [{"name": f"g{i}", "count": rng.choice([1, 1, 2]), "gpus": rng.choice([1, 1, 2, 4])}
                      for i in range(rng.choice([1, 1, 2]))]
            priority = rng.choice([0, 0, 10, 100, "opportunistic"])
            spec = parse_job_spec({"name": f"s{step}", "command": "true", "tasks": groups, "priority": priority,
                                   "max_retries": rng.choice([0, 1])})
            try:
                service.admission.submit(spec, rng.choice(users), rng.choice(["a", "a", "b", "c"]))
            except Exception as exc:  # noqa: BLE001 - a refusal is part of the trace
                print(f"refused s{step}: {type(exc).__name__}: {exc}", file=sys.stderr)
        elif action < 0.85 and launcher.live:
            job = rng.choice(sorted(launcher.live))
            launcher.end(job, rng.choice([0, 0, 0, 1]))
        elif service.active:
            job = rng.choice(sorted(service.active))
            try:
                await service.cancel(job, "ann", wait_s=0)
            except Exception as exc:  # noqa: BLE001
                print(f"cancel {job} refused: {exc}", file=sys.stderr)
        await settle()
    await service.stop()
    lines = []
    with store.engine.connect() as conn:
        from sqlalchemy import text

        for row in conn.execute(text("SELECT job_id, state, at, reason FROM job_events ORDER BY id")):
            lines.append("event " + " | ".join(map(str, row)))
        for row in conn.execute(text("SELECT id, state, exit_code, retries, attempt, reason, started_at, finished_at "
                                     "FROM jobs ORDER BY seq")):
            lines.append("job " + " | ".join(map(str, row)))
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=23)
    ap.add_argument("--steps", type=int, default=600)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lines = asyncio.run(run(args.seed, args.steps, tmp))
    print("\n".join(lines))
    print("sha256", hashlib.sha256("\n".join(lines).encode()).hexdigest(), file=sys.stderr)


if __name__ == "__main__":
    main()
