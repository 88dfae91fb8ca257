"""Accounting arithmetic (pure functions, explicit times) and the fair-share ledger derived from usage
records: it equals what the core's own ledger holds after the same history (so a restart that
restores it changes no decision)."""

import asyncio
import math

import pytest

from hive_lab_server.jobs.lifecycle import launch_plan
from hive_lab_server.usage.accounting import UsageQueryError, fair_share_snapshot, parse_since, usage_table
from hive_scheduler import JobRequest, Scheduler, TaskGroup
from hive_scheduler.fair_share import FairShareSettings

DAY = 86400.0
T0 = 1_780_000_000.0 - 1_780_000_000.0 % DAY  # a UTC midnight (2026-05-28)


def row(job, user, start, end, gpus=1, vc="course", cpu=None, peak=None, types=None, group="students"):
    return {"job_id": job, "attempt": 1, "user": user, "user_group": group, "vc": vc, "gpus": gpus, "share": 1.0,
            "gpu_types": types or {"T4": gpus}, "started_at": start, "ended_at": end, "cpu_seconds": cpu,
            "peak_memory_mb": peak}


def test_parse_since():
    now = T0 + 10 * DAY
    assert parse_since("7d", now) == now - 7 * DAY
    assert parse_since("24h", now) == now - DAY
    assert parse_since("90m", now) == now - 5400
    assert parse_since(None, now) == now - 7 * DAY  # the default
    assert parse_since("2026-05-28", now) == T0
    assert parse_since("2026-05-28T02:00:00+02:00", now) == T0
    assert parse_since("2026-05-28T00:00:00Z", now) == T0
    assert parse_since("0d", now) == now  # an empty window
    assert parse_since("2999-01-01", now) > now  # an empty window too (the answer shows since > until)
    for before_1970 in ("100000d", "9" * 400 + "d", "1969-12-31", "0001-01-01T00:00+01:00"):
        assert parse_since(before_1970, now) == 0.0  # everything
    for bad in ("week", "-1d", "7 days", "2026-13-01", "2026-02-30", "d", "1e3d"):
        with pytest.raises(UsageQueryError) as err:
            parse_since(bad, now)
        assert err.value.field == "since"


def test_usage_table_clips_to_the_window_and_counts_running_attempts_to_now():
    now = T0 + 3600
    rows = [row("j1", "ann", T0 - 600, T0 + 600, gpus=2, cpu=50.0, peak=1024),  # half before the window
            row("j2", "bob", T0 + 1000, None),  # still running
            row("j3", "ann", T0 - 900, T0 - 300, gpus=4, cpu=7.0)]  # ended before the window
    table = usage_table(rows, since=T0, now=now, by="user")
    assert table == [
        {"user": "ann", "gpu_seconds": 1200.0, "cpu_seconds": 50.0, "peak_memory_mb": 1024.0, "jobs": 1,
         "gpu_seconds_by_type": {"T4": 1200.0}},
        {"user": "bob", "gpu_seconds": 2600.0, "cpu_seconds": None, "peak_memory_mb": None, "jobs": 1,
         "gpu_seconds_by_type": {"T4": 2600.0}},
    ]
    assert [(r["vc"], r["gpu_seconds"], r["jobs"]) for r in usage_table(rows, T0, now, "vc")] == [("course", 3800.0, 2)]
    assert [(r["job"], r["gpu_seconds"], r["cpu_seconds"]) for r in usage_table(rows, T0, now, "job")] == [
        ("j1", 1200.0, 50.0), ("j2", 2600.0, None)]


def test_usage_by_day_splits_at_utc_midnight():
    rows = [row("j1", "ann", T0 - 1800, T0 + 3600, gpus=1, cpu=10.0, types={"A100": 1})]
    days = usage_table(rows, since=T0 - DAY, now=T0 + DAY, by="day")
    assert [(d["day"], d["gpu_seconds"], d["cpu_seconds"], d["jobs"]) for d in days] == [
        ("2026-05-27", 1800.0, None, 1), ("2026-05-28", 3600.0, 10.0, 1)]  # CPU counts on the day it ended
    assert days[0]["gpu_seconds_by_type"] == {"A100": 1800.0}


def test_usage_table_rejects_an_unknown_key():
    with pytest.raises(UsageQueryError):
        usage_table([], 0, 1, "week")


def _request(job_id, user, group, gpus, t):
    return JobRequest(id=job_id, vc="course", user=user, group=group, priority=0, submit_time=t,
                      tasks=(TaskGroup(name="main", count=1, gpus=gpus),))


def test_derived_ledger_equals_the_cores_own():
    cfg = {"nodes": 1, "gpus_per_node": 4, "gpu_type": "T4", "vcs": {"course": 4}}
    settings = FairShareSettings(half_life_s=3600.0)
    core = Scheduler(cfg, policy="fair_share", fair_share=settings)
    core.submit(_request("a", "ann", "students", 2, T0), T0)
    core.submit(_request("b", "bob", "staff", 1, T0 + 100), T0 + 100)
    core.finish("a", T0 + 1900)
    core.submit(_request("c", "ann", "students", 1, T0 + 2000), T0 + 2000)
    now = T0 + 5000
    core.submit(_request("probe", "zed", "", 1, now), now)  # advances the core's ledger to now
    records = [row("a", "ann", T0, T0 + 1900, gpus=2), row("b", "bob", T0 + 100, None, group="staff"),
               row("c", "ann", T0 + 2000, None)]
    derived = fair_share_snapshot(records, now, settings.half_life_s)
    own = core.usage_snapshot()
    assert derived["at"] == own["at"] == now
    for table in ("users", "groups"):
        assert derived[table].keys() == {k for k, v in own[table].items() if v}
        for key, value in derived[table].items():
            assert value == pytest.approx(own[table][key], rel=1e-9)
    lam = math.log(2) / 3600.0
    assert derived["users"]["bob"] == pytest.approx((1 - math.exp(-lam * 4900)) / lam)
    restored = Scheduler(cfg, policy="fair_share", fair_share=settings)
    restored.restore_usage(derived)  # the service's path at start
    assert restored.usage_ledger().user_ratio("ann") > restored.usage_ledger().user_ratio("bob")


def test_the_service_accounts_with_its_injected_clock_and_restores_fair_share(tmp_path):
    """Exact figures through the real service, store and local launcher, with a clock the test moves."""
    import asyncio

    from hive_lab_server.execution.launchers.local import LocalLauncher
    from hive_lab_server.jobs.service import HiveService
    from hive_lab_server.wire.spec import parse_job_spec
    from hive_lab_server.store import Store
    from hive_scheduler import load_cluster_config

    cfg = load_cluster_config({"nodes": 1, "gpus_per_node": 2, "gpu_type": "T4", "vcs": {"course": 2}})
    clock = [T0]
    settings = FairShareSettings(half_life_s=DAY)

    def service():
        return HiveService(scheduler=Scheduler(cfg, policy="fair_share", fair_share=settings), config=cfg,
                           store=Store(f"sqlite:///{tmp_path / 's.sqlite'}"), launcher=LocalLauncher(tmp_path / "state"),
                           jobs_root=tmp_path / "jobs", poll_interval_s=0.02, stop_grace_s=20, clock=lambda: clock[0])
    # (a long stop grace: a SIGKILL after a short one could beat the wrapper writing the task's CPU time)

    async def first_life():
        svc = service()
        await svc.start()
        job = svc.admission.submit(parse_job_spec({"command": "echo ready; sleep 60", "tasks": [{"gpus": 2}]}), "ann", "course",
                         group="students")
        log = launch_plan.log_path(svc.jobs_root, job["id"], "main-0")

        async def started():
            # "running": its process started (its launch runs on the loop); the echo: its command runs
            while svc.active[job["id"]].state != "running" or b"ready" not in (log.read_bytes() if log.exists() else b""):
                await asyncio.sleep(0.02)

        await asyncio.wait_for(started(), 60)
        clock[0] = T0 + 600
        running = svc.usage(since=T0 - DAY, by="user", users=None)
        await svc.cancel(job["id"], "carol", wait_s=30)
        clock[0] = T0 + 900
        ended = svc.usage(since=T0 - DAY, by="user", users=None)
        await svc.stop()
        return running, ended

    running, ended = asyncio.run(first_life())
    assert [(r["user"], r["gpu_seconds"]) for r in running] == [("ann", 1200.0)]  # 2 GPUs x 600 s, up to now
    assert [(r["user"], r["gpu_seconds"], r["jobs"]) for r in ended] == [("ann", 1200.0, 1)]  # closed at the cancel
    assert ended[0]["cpu_seconds"] is not None  # the local launcher measured the (idle) task

    async def second_life():
        svc = service()
        clock[0] = T0 + 900 + DAY
        await svc.start()  # the fair-share ledger is derived from the stored records
        snap = svc.scheduler.usage_snapshot()
        await svc.stop()
        return snap

    snap = asyncio.run(second_life())
    lam = math.log(2) / DAY
    expected = 2 / lam * (math.exp(-lam * (300 + DAY)) - math.exp(-lam * (900 + DAY)))
    assert snap["users"] == {"ann": pytest.approx(expected)} and snap["groups"] == {"students": pytest.approx(expected)}


def test_fair_share_group_is_the_identity_group_that_grants_the_vc():
    from hive_lab_server.auth.access import AccessPolicy

    policy = AccessPolicy({"@cv-101": ["cv-101"], "@nlp": ["nlp"], "@staff": ["*"]}, [], [], None, ["cv-101", "nlp"])
    both = policy.caller("ann", ("nlp", "cv-101"))
    assert policy.fair_share_group(both, "cv-101") == "cv-101"
    assert policy.fair_share_group(both, "nlp") == "nlp"
    assert policy.fair_share_group(policy.caller("tim", ("staff",)), "nlp") == "staff"  # "*" grants every VC
    assert policy.fair_share_group(policy.caller("zoe", ("zz", "aa")), "nlp") == "aa"  # none grants it: the first
    assert policy.fair_share_group(policy.caller("bob"), "nlp") == ""  # no groups


def test_a_share_of_a_gpu_is_accounted_at_its_rate(tmp_path):
    """A quarter of a GPU held for 600 s is 150 GPU-seconds (issue 16: accounting counts GPU-hours by share)."""
    from hive_lab_server.execution.launchers.local import LocalLauncher
    from hive_lab_server.jobs.service import HiveService
    from hive_lab_server.wire.spec import parse_job_spec
    from hive_lab_server.store import Store
    from hive_scheduler import load_cluster_config

    cfg = load_cluster_config({"nodes": 1, "gpus_per_node": 2, "gpu_type": "T4", "vcs": {"course": 2}})
    clock = [T0]

    async def life():
        svc = HiveService(scheduler=Scheduler(cfg), config=cfg, store=Store(f"sqlite:///{tmp_path / 's.sqlite'}"),
                          launcher=LocalLauncher(tmp_path / "state"), jobs_root=tmp_path / "jobs",
                          poll_interval_s=0.02, stop_grace_s=0.5, clock=lambda: clock[0])
        await svc.start()
        job = svc.admission.submit(parse_job_spec({"command": "sleep 60", "tasks": [{"gpus": 0.25}]}), "ann", "course")

        async def started():
            while svc.active[job["id"]].state != "running":
                await asyncio.sleep(0.02)

        await asyncio.wait_for(started(), 60)
        clock[0] = T0 + 600
        await svc.cancel(job["id"], "ann", wait_s=30)
        rows = svc.usage(since=T0 - DAY, by="user", users=None)
        await svc.stop()
        return rows

    rows = asyncio.run(life())
    assert [(r["user"], r["gpu_seconds"]) for r in rows] == [("ann", 150.0)]


def test_usage_rows_of_some_vcs_only(tmp_path):
    """``Store.usage_rows(vcs=...)``: the rows of those VCs (the instructor's table for one course)."""
    from hive_lab_server.store import Store

    store = Store(f"sqlite:///{tmp_path / 'u.sqlite'}")
    with store.begin() as batch:
        for seq, (user, vc) in enumerate([("ann", "cv-101"), ("bob", "nlp-202"), ("ann", "nlp-202")], start=1):
            store.insert_job(batch, {"seq": seq, "id": f"j-{seq:06d}", "name": "x", "user": user, "vc": vc,
                                     "kind": "batch", "state": "running", "reason": "", "priority": 0,
                                     "opportunistic": False, "gpus": 1, "gpu_type": None, "spec": {},
                                     "submitted_at": T0, "started_at": T0, "finished_at": None, "exit_code": None,
                                     "retries": 0, "max_retries": 0, "attempt": 1, "working_dir": "/w",
                                     "output_dir": "/o", "updated_at": T0})
            store.open_usage(batch, {**row(f"j-{seq:06d}", user, T0, None, vc=vc), "attempt": 1})
    rows = store.usage_rows(vcs=["nlp-202"])
    assert [(r["user"], r["vc"]) for r in rows] == [("bob", "nlp-202"), ("ann", "nlp-202")]
    assert len(store.usage_rows()) == 3
    table = usage_table(store.usage_rows(vcs=["cv-101"]), T0 - DAY, T0 + 100, "user")
    assert [(r["user"], r["gpu_seconds"]) for r in table] == [("ann", 100.0)]
