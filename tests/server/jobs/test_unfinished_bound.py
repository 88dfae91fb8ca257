"""A bound on the jobs the service holds unfinished (issue 24, ``HiveLabApp.max_unfinished_jobs``).

Each unfinished job is kept in memory (``service.active``, the core's job and queue entry) until it ends.
bench_overload offered a real server twice the submits it answers: it took 20,000 ``true`` jobs in 90 s,
ran ~15 a second, and its RSS grew with that backlog. With the bound, ``active`` never holds more than
``max_unfinished_jobs`` jobs: submits beyond it are answered 503 with Retry-After, and a job that ends
makes room again. And the backlog drains once submits stop (the core used to start a job waiting for
CPUs only at the next submit)."""

import asyncio

import pytest

from hive_lab_server.errors import ServiceError, ServiceFull
from hive_lab_server.execution.launchers.local import LocalLauncher
from hive_lab_server.jobs.service import HiveService
from hive_lab_server.wire.spec import parse_job_spec
from hive_lab_server.store import Store
from hive_scheduler import Scheduler, load_cluster_config
from waiting import wait_until_async


def make_service(tmp_path, bound: int, **cluster) -> HiveService:
    cfg = load_cluster_config({"nodes": 1, "gpus_per_node": 2, "gpu_type": "T4", "vcs": {"default": 2}, **cluster})
    return HiveService(scheduler=Scheduler(cfg), config=cfg, store=Store(f"sqlite:///{tmp_path / 's.sqlite'}"),
                       launcher=LocalLauncher(tmp_path / "state"), jobs_root=tmp_path / "jobs", poll_interval_s=0.02,
                       max_unfinished_jobs=bound)


def shed(service: HiveService) -> float:
    return service.metrics.registry.get_sample_value("hive_lab_submits_shed_total")


def test_submits_beyond_the_bound_are_refused_503_and_an_ended_job_makes_room(tmp_path):
    service = make_service(tmp_path, 4)
    spec = parse_job_spec({"command": "sleep 60", "tasks": [{"gpus": 2}]})

    async def main():
        await service.start()
        busy = service.admission.submit(spec, "ann", "default")
        await wait_until_async(lambda: service.store.get_job(busy["id"])["state"] == "running", "the busy job running")
        # group commit: the submits arriving together count one another (3 fit beside the busy job)
        got = await asyncio.gather(*(service.admission.submit_grouped(spec, "bob", "default") for _ in range(5)),
                                   return_exceptions=True)
        taken = [g for g in got if isinstance(g, dict)]
        refused = [g for g in got if isinstance(g, ServiceError)]
        assert [g["state"] for g in taken] == ["queued"] * 3 and len(refused) == 2, got
        assert all(isinstance(r, ServiceFull) and r.status == 503 and r.retry_after_s for r in refused)
        assert "max_unfinished_jobs" in refused[0].message
        assert len(service.active) == 4 and len(service.scheduler.jobs()) == 4
        with pytest.raises(ServiceFull):
            service.admission.submit(spec, "bob", "default")
        assert shed(service) == 3
        # what-if (nothing stored) is still answered
        assert service.admission.what_if(spec, "bob", "default")
        await service.launcher.stop(busy["id"], 0)  # it ends: one more fits (a queued one starts meanwhile)
        await wait_until_async(lambda: busy["id"] not in service.active, "the busy job ended")
        assert len(service.active) == 3
        again = service.admission.submit(spec, "bob", "default")
        assert again["state"] == "queued" and len(service.active) == 4
        for job_id in list(service.active):
            await service.launcher.stop(job_id, 0)
        await service.stop()

    asyncio.run(main())


def test_offered_more_than_it_runs_the_service_holds_at_most_the_bound_and_drains(tmp_path):
    """bench_overload in small: CPU-only ``true`` jobs offered in bursts much faster than 8 CPUs run them.
    ``active`` (what each unfinished job keeps in memory) never exceeds the bound; once submits stop,
    every taken job ends (none is left queued for CPUs that came back)."""
    bound = 12
    service = make_service(tmp_path, bound, cpus_per_node=8)
    spec = parse_job_spec({"command": "true", "tasks": [{"gpus": 0, "cpus": 1}]})
    most = 0

    def track(job_id, state, reason):
        nonlocal most
        most = max(most, len(service.active))

    async def main():
        await service.start()
        service.work.on_state_change(track)
        taken, refused = [], 0
        for _ in range(10):
            got = await asyncio.gather(*(service.admission.submit_grouped(spec, "ann", "default") for _ in range(20)),
                                       return_exceptions=True)
            taken += [g["id"] for g in got if isinstance(g, dict)]
            refused += sum(isinstance(g, ServiceFull) for g in got)
            assert len(service.active) <= bound
            await asyncio.sleep(0.05)
        await wait_until_async(lambda: not service.active, "every taken job ended", timeout=60)
        states = {service.store.get_job(j)["state"] for j in taken}
        await service.stop()
        return taken, refused, states

    taken, refused, states = asyncio.run(main())
    assert len(taken) + refused == 200 and refused > 0 and len(taken) >= bound
    assert states == {"succeeded"}
    assert most <= bound
