"""The service without HTTP: state listeners, a store failure leaves the core untouched."""

import asyncio

import pytest

from hive_lab_server.execution.launchers.local import LocalLauncher
from hive_lab_server.jobs.service import HiveService, StoreUnavailable
from hive_lab_server.wire.spec import parse_job_spec
from hive_lab_server.store import Store
from hive_scheduler import Scheduler, load_cluster_config
from waiting import wait_until_async


@pytest.fixture
def service(tmp_path):
    cfg = load_cluster_config({"nodes": 1, "gpus_per_node": 2, "gpu_type": "T4", "vcs": {"default": 2}})
    svc = HiveService(scheduler=Scheduler(cfg), config=cfg, store=Store(f"sqlite:///{tmp_path / 's.sqlite'}"),
                      launcher=LocalLauncher(tmp_path / "state"), jobs_root=tmp_path / "jobs", poll_interval_s=0.02)
    return svc


def test_listeners_run_after_commit_and_may_call_back(service):
    async def main():
        await service.start()
        seen = []

        def listener(job_id, state, reason):
            seen.append((job_id, state))
            if state == "running" and len([s for s in seen if s[1] == "running"]) == 1:
                service.admission.submit(parse_job_spec({"command": "true", "tasks": [{"gpus": 0, "cpus": 1}]}), "ann", "default")

        service.work.on_state_change(listener)
        first = service.admission.submit(parse_job_spec({"command": "true", "tasks": [{"gpus": 1}]}), "ann", "default")
        for _ in range(200):
            if sum(1 for _, st in seen if st == "succeeded") >= 2:
                break
            await asyncio.sleep(0.02)
        await service.stop()
        return first, seen

    first, seen = asyncio.run(main())
    assert (first["id"], "scheduled") in seen and (first["id"], "succeeded") in seen
    assert ("j-000002", "succeeded") in seen  # submitted from inside a listener


def test_store_failure_withdraws_the_job_from_the_core(service, monkeypatch):
    async def main():
        await service.start()
        spec = parse_job_spec({"command": "true", "tasks": [{"gpus": 2}]})

        def broken(batch, row):
            raise RuntimeError("disk full")

        monkeypatch.setattr(service.store, "insert_job", broken)
        with pytest.raises(StoreUnavailable) as refused:  # 503 + Retry-After, not a 500
            service.admission.submit(spec, "ann", "default")
        assert refused.value.status == 503 and refused.value.retry_after_s
        assert service.scheduler.free_gpu_count() == 2 and service.active == {}
        monkeypatch.undo()
        job = service.admission.submit(spec, "ann", "default")  # the GPUs were not leaked
        assert job["state"] == "scheduled"
        await service.launcher.stop(job["id"], 0)
        await service.stop()

    asyncio.run(main())


def test_group_commit_stores_submits_arriving_together_in_one_transaction(service, monkeypatch):
    """Submits arriving together while the GPUs are busy: one commit stores them queued; when the store
    refuses that commit, all are answered 503 and the core forgets them exactly (it decides the same after)."""
    from sqlalchemy import event

    commits = []
    event.listen(service.store.engine, "commit", lambda conn: commits.append(1))
    spec = parse_job_spec({"command": "sleep 60", "tasks": [{"gpus": 2}]})

    async def main():
        await service.start()
        busy = service.admission.submit(spec, "ann", "default")
        assert busy["state"] == "scheduled"
        # its launch (spawned off the loop) is recorded first, so only the grouped submits' commits count
        await wait_until_async(lambda: service.store.get_job(busy["id"])["state"] == "running", "the busy job running")
        commits.clear()
        jobs = await asyncio.gather(*(service.admission.submit_grouped(spec, "ann", "default") for _ in range(5)))
        assert [j["state"] for j in jobs] == ["queued"] * 5 and len(commits) == 1
        stored = [service.store.get_job(j["id"]) for j in jobs]
        assert [r["state"] for r in stored] == ["queued"] * 5
        core_jobs = [v.id for v in service.scheduler.jobs()]

        def broken(batch, row):
            raise RuntimeError("disk full")

        monkeypatch.setattr(service.store, "insert_job", broken)
        refused = await asyncio.gather(*(service.admission.submit_grouped(spec, "bob", "default") for _ in range(3)),
                                       return_exceptions=True)
        assert all(isinstance(r, StoreUnavailable) for r in refused)
        assert [v.id for v in service.scheduler.jobs()] == core_jobs and len(service.active) == 6
        monkeypatch.undo()
        again = await service.admission.submit_grouped(spec, "bob", "default")
        assert again["state"] == "queued" and [v.id for v in service.scheduler.jobs()] == core_jobs + [again["id"]]
        await service.launcher.stop(busy["id"], 0)
        await service.stop()

    asyncio.run(main())


def test_a_group_commit_takes_at_most_max_group_submits_a_turn(service):
    """Submits arriving together beyond MAX_GROUP: one transaction per MAX_GROUP of them, the loop turning
    between (a read waits for one group's work, not all of it: issue 40); every submit is answered after
    its own group's commit, and in the order they arrived."""
    from sqlalchemy import event

    from hive_lab_server.jobs.lifecycle.admission import MAX_GROUP

    commits = []
    event.listen(service.store.engine, "commit", lambda conn: commits.append(1))
    spec = parse_job_spec({"command": "sleep 60", "tasks": [{"gpus": 2}]})

    async def main():
        await service.start()
        busy = service.admission.submit(spec, "ann", "default")
        await wait_until_async(lambda: service.store.get_job(busy["id"])["state"] == "running", "the busy job running")
        commits.clear()
        turns = []

        async def count_turns():  # a callback of another request: runs between the groups
            while True:
                turns.append(len(commits))
                await asyncio.sleep(0)

        ticker = asyncio.ensure_future(count_turns())
        jobs = await asyncio.gather(*(service.admission.submit_grouped(spec, "ann", "default") for _ in range(MAX_GROUP + 6)))
        ticker.cancel()
        assert [j["state"] for j in jobs] == ["queued"] * (MAX_GROUP + 6) and len(commits) == 2
        assert 1 in turns  # the loop turned after the first group's commit, before the second's
        seqs = [service.store.get_job(j["id"])["seq"] for j in jobs]
        assert seqs == sorted(seqs)
        await service.launcher.stop(busy["id"], 0)
        await service.stop()

    asyncio.run(main())


def test_group_commit_with_overflow_queues_shadows_in_the_same_transaction(tmp_path, monkeypatch):
    """With the overflow wrapper (the server's default), jobs that may overflow are group-committed too:
    one commit for the submits arriving together, each queued with its shadow in the core; when the store
    refuses that commit, the core forgets them and their shadows exactly."""
    from sqlalchemy import event

    from hive_scheduler.overflow import OverflowScheduler

    cfg = load_cluster_config({"nodes": 2, "gpus_per_node": 2, "gpu_type": "T4", "vcs": {"a": 2, "b": 2}})
    svc = HiveService(scheduler=OverflowScheduler(Scheduler(cfg)), config=cfg,
                      store=Store(f"sqlite:///{tmp_path / 's.sqlite'}"), launcher=LocalLauncher(tmp_path / "state"),
                      jobs_root=tmp_path / "jobs", poll_interval_s=0.02)
    commits = []
    event.listen(svc.store.engine, "commit", lambda conn: commits.append(1))
    spec = parse_job_spec({"command": "sleep 60", "tasks": [{"gpus": 2}]})

    async def main():
        await svc.start()
        busy = [svc.admission.submit(spec, "ann", vc) for vc in ("a", "b")]  # no idle GPUs anywhere
        assert [b["state"] for b in busy] == ["scheduled", "scheduled"]
        # its launch (spawned off the loop) is recorded first, so only the grouped submits' commits count
        await wait_until_async(lambda: all(svc.store.get_job(b["id"])["state"] == "running" for b in busy),
                               "the busy jobs running")
        commits.clear()
        jobs = await asyncio.gather(*(svc.admission.submit_grouped(spec, "ann", "a") for _ in range(5)))
        assert [j["state"] for j in jobs] == ["queued"] * 5 and len(commits) == 1
        assert [svc.store.get_job(j["id"])["state"] for j in jobs] == ["queued"] * 5
        core_ids = sorted(svc.scheduler.inner._jobs)
        assert sum(i.endswith("@overflow") for i in core_ids) == 5  # each waits with its shadow

        def broken(batch, row):
            raise RuntimeError("disk full")

        monkeypatch.setattr(svc.store, "insert_job", broken)
        refused = await asyncio.gather(*(svc.admission.submit_grouped(spec, "bob", "a") for _ in range(3)),
                                       return_exceptions=True)
        assert all(isinstance(r, StoreUnavailable) for r in refused)
        assert sorted(svc.scheduler.inner._jobs) == core_ids and len(svc.active) == 7
        monkeypatch.undo()
        # b's node frees up: the first queued job of a runs there as overflow (its shadow started)
        await svc.launcher.stop(busy[1]["id"], 0)
        for _ in range(500):
            if svc.scheduler.is_overflowed(jobs[0]["id"]):
                break
            await asyncio.sleep(0.02)
        assert svc.scheduler.is_overflowed(jobs[0]["id"])
        for j in [busy[0], jobs[0]]:
            await svc.launcher.stop(j["id"], 0)
        await svc.stop()

    asyncio.run(main())
