"""Run time limits (issue 15): the lifecycle event on the pure machine with a fake clock, the real
service (real core, local launcher running real processes, SQLite) with an injected clock across a
restart, and the REST API of an in-process Jupyter server (bad values, the VC maximum, a real limit)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import psutil
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from hive_lab_server.execution.launchers.local import LocalLauncher
from hive_lab_server.jobs.lifecycle import machine as m
from hive_lab_server.wire.states import Intent, JobState
from hive_lab_server.jobs.lifecycle.time_limit import TimeLimitError, effective_limit, limit_text, parse_vc_time_limits
from hive_lab_server.jobs.service import HiveService
from hive_lab_server.wire.spec import parse_job_spec
from hive_lab_server.store import Store
from hive_scheduler import Scheduler, load_cluster_config
from waiting import wait_until_async

S = JobState


# --- the machine ---------------------------------------------------------------------------------

def running(limit, started_at, attempt=1):
    job = m.Job("j", time_limit_s=limit, max_retries=1)
    job, _ = m.step(job, m.Placed(("main-0",)))
    job, _ = m.step(job, m.LaunchBegin(job.attempt))
    job, effects = m.step(job, m.LaunchStarted(job.attempt, at=started_at))
    assert effects[0].fields == {"started_at": started_at}  # the unit stores exactly the start the deadline uses
    return job


def test_limit_stops_the_job_then_it_fails_with_the_reason():
    job = running(7200, 100.0)
    assert job.deadline == 7300.0
    same, effects = m.step(job, m.TimeUp(7299.9))
    assert same == job and effects == []
    job, effects = m.step(job, m.TimeUp(7300.0))
    assert job.state is S.RUNNING and job.intent is Intent.FAIL
    assert [type(e) for e in effects] == [m.Record, m.StopTasks]
    assert effects[0].fields["stop_reason"] == "time limit 2h reached" and effects[1].grace == "stop"
    again, effects = m.step(job, m.TimeUp(9000.0))  # once stopping, the clock changes nothing
    assert again == job and effects == []
    job, _ = m.step(job, m.Exit("main-0", -15))
    job, effects = m.step(job, m.Stopped(job.attempt))
    assert job.state is S.FAILED and job.reason == "time limit 2h reached"
    assert any(isinstance(e, m.Core) and e.call == "finish" for e in effects)


def test_no_limit_no_deadline_and_only_running_jobs_have_one():
    assert running(None, 5.0).deadline is None
    queued = m.Job("q", time_limit_s=10)
    assert queued.deadline is None and m.step(queued, m.TimeUp(1e9)) == (queued, [])


def test_the_deadline_holds_across_a_restart():
    """The stored row (state running, started_at) read back gives the same deadline; Recovered keeps it."""
    before = running(60, 1000.0)
    stored = m.Job("j", state=S.RUNNING, attempt=before.attempt, tasks=before.tasks, left=before.left,
                   time_limit_s=60, started_at=1000.0, max_retries=1)
    job, _ = m.step(stored, m.Recovered(frozenset({"main-0"}), at=1030.0))
    assert job.deadline == before.deadline == 1060.0
    assert m.step(job, m.TimeUp(1059.0))[1] == []
    job, _ = m.step(job, m.TimeUp(1060.0))
    assert job.intent is Intent.FAIL and job.intent_reason == "time limit 1m reached"


def test_an_attempt_that_started_while_the_server_was_down_counts_from_recovery():
    stored = m.Job("j", state=S.SCHEDULED, attempt=1, tasks=("main-0",), left=frozenset({"main-0"}), time_limit_s=30)
    job, effects = m.step(stored, m.Recovered(frozenset({"main-0"}), at=500.0))
    assert job.state is S.RUNNING and job.deadline == 530.0
    assert any(isinstance(e, m.Record) and e.fields.get("started_at") == 500.0 for e in effects)


def test_a_stop_already_stored_at_the_deadline_is_finished_after_a_restart():
    """The intent (failed, reason) is stored before the stop: a restart ends the job failed with it."""
    stored = m.Job("j", state=S.RUNNING, attempt=1, tasks=("main-0",), left=frozenset({"main-0"}), time_limit_s=5,
                   started_at=0.0, intent=Intent.FAIL, intent_reason="time limit 5s reached")
    job, effects = m.step(stored, m.Recovered(frozenset({"main-0"}), at=100.0))
    assert any(isinstance(e, m.StopTasks) for e in effects)
    job, _ = m.step(job, m.Stopped(job.attempt))
    assert job.state is S.FAILED and job.reason == "time limit 5s reached"


def test_a_retry_gets_the_full_limit_again():
    job = running(100, 0.0)
    job, _ = m.step(job, m.Lost("GPU 0 failed"))
    job, _ = m.step(job, m.Stopped(job.attempt))
    assert job.state is S.QUEUED and job.deadline is None
    job, _ = m.step(job, m.Placed(("main-0",)))
    job, _ = m.step(job, m.LaunchBegin(job.attempt))
    job, _ = m.step(job, m.LaunchStarted(job.attempt, at=500.0))
    assert job.deadline == 600.0 and m.step(job, m.TimeUp(599.0))[1] == []


@settings(max_examples=200, deadline=None)
@given(limit=st.floats(0.5, 1e6), start=st.floats(0, 1e9), ticks=st.lists(st.floats(0, 2e6), max_size=8))
def test_stopped_exactly_when_the_clock_reaches_the_deadline(limit, start, ticks):
    job = running(limit, start)
    for dt in sorted(ticks):
        after, _ = m.step(job, m.TimeUp(start + dt))
        if start + dt >= start + limit:
            assert after.intent is Intent.FAIL
            return
        assert after == job


def test_limit_text_and_vc_rules():
    assert [limit_text(s) for s in (7200, 5400, 90, 1, 0.5, 86400 + 60)] == ["2h", "1h30m", "1m30s", "1s", "0.5s",
                                                                             "1d1m"]
    rules = parse_vc_time_limits({"cv-101": {"default_s": 3600, "max_s": 14400}, "*": {"max_s": 86400}},
                                 ["cv-101", "research"])
    assert effective_limit(None, "batch", "cv-101", rules) == 3600
    assert effective_limit(None, "kernel", "cv-101", rules) is None  # kernels: only when their kernelspec asks
    assert effective_limit(7200, "kernel", "cv-101", rules) == 7200
    assert effective_limit(None, "batch", "research", rules) is None
    with pytest.raises(TimeLimitError, match=r"over the maximum of VC cv-101, 4h \(14400 s\)"):
        effective_limit(5 * 3600, "batch", "cv-101", rules)
    with pytest.raises(TimeLimitError, match="over the maximum of VC research, 1d"):
        effective_limit(2 * 86400, "batch", "research", rules)
    for bad, msg in (({"nope": {"max_s": 1}}, "no VC 'nope'"), ({"cv-101": {"max_s": -1}}, "max_s: seconds > 0"),
                     ({"cv-101": {"default_s": 10, "max_s": 5}}, "default_s .* is above max_s"),
                     ({"cv-101": {"limit": 5}}, "give a dict with default_s")):
        with pytest.raises(TimeLimitError, match=msg):
            parse_vc_time_limits(bad, ["cv-101"])


# --- random interleavings (test_lifecycle_machine's world) with a logical clock and time limits ------

from test_lifecycle_machine import ACTIONS, World, check_safety, run  # noqa: E402


class TimedWorld(World):
    """The lifecycle world of test_lifecycle_machine plus a logical clock: jobs may carry a limit; the
    shell's deadline check is ``tick`` (TimeUp for the jobs whose derived deadline passed)."""

    def __init__(self, limits):
        super().__init__()
        self.clock = 0.0
        self.limits = limits
        self.timed_out: set[str] = set()

    def submit(self, gpus, retries):
        job_id = super().submit(gpus, retries)
        if job_id is not None:
            limit = self.limits[self.seq % len(self.limits)]
            for d in (self.stored, self.mem):
                d[job_id] = replace(d[job_id], time_limit_s=limit)
        return job_id

    def launch_one(self, i):
        self.clock += 1.0
        real_unit = self.unit

        def unit(facts, request=False):  # the launcher's start carries the clock reading
            facts = [(j, replace(e, at=self.clock) if isinstance(e, m.LaunchStarted) else e) for j, e in facts]
            return real_unit(facts, request)

        self.unit = unit
        try:
            super().launch_one(i)
        finally:
            self.unit = real_unit

    def tick(self, dt):
        self.clock += dt
        due = [(j, m.TimeUp(self.clock)) for j, job in sorted(self.mem.items())
               if job.deadline is not None and job.deadline <= self.clock]
        if due:
            self.timed_out.update(j for j, _ in due)
            self.unit(due)

    def crash_and_recover(self):
        real_unit = self.unit

        def unit(facts, request=False):  # recovery carries the restart's clock reading
            facts = [(j, replace(e, at=self.clock) if isinstance(e, m.Recovered) else e) for j, e in facts]
            return real_unit(facts, request)

        self.unit = unit
        try:
            return super().crash_and_recover()
        finally:
            self.unit = real_unit


TIMED_ACTIONS = st.one_of(ACTIONS, st.tuples(st.just("tick"), st.sampled_from([0.5, 1.0, 3.0, 10.0])),
                          st.tuples(st.just("tick"), st.sampled_from([1.0, 5.0])))


@settings(max_examples=200, deadline=None)
@given(actions=st.lists(TIMED_ACTIONS, min_size=10, max_size=80),
       limits=st.lists(st.sampled_from([None, 0.5, 1.0, 2.0, 20.0]), min_size=1, max_size=3))
def test_random_interleavings_with_time_limits_crashes_and_store_failures(actions, limits):
    world = TimedWorld(limits)
    for a in actions:
        if a[0] == "tick":
            world.tick(a[1])
            check_safety(world)
        else:
            run_one(world, a)
    world.settle()
    check_safety(world)
    for job_id in world.acked_submits:
        job = world.stored[job_id]
        assert job.final, job  # every job ends, time limits or not
        if job_id in world.acked_cancels:
            assert job.state is S.CANCELLED
        elif job.reason.startswith("time limit"):
            assert job.state is S.FAILED and job_id in world.timed_out and job.time_limit_s is not None
    assert not world.core_held and not any(world.live.values())
    event(f"jobs stopped at their limit: {min(len(world.timed_out), 3)}+")


def run_one(world, a):
    """One action of test_lifecycle_machine's ``run`` (without its final settle)."""
    saved = world.settle
    world.settle = lambda: None
    try:
        run(world, [a])
    finally:
        world.settle = saved


# --- the real service, injected clock, across a restart -------------------------------------------

class Clock:
    def __init__(self, t: float = 1_700_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture(autouse=True)
def _no_task_outlives_its_test(tmp_path):
    yield
    jobs = str(tmp_path / "jobs")
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.cwd().startswith(jobs):
                proc.kill()
        except (psutil.Error, OSError):
            continue


def make_service(tmp_path, clock, **kw):
    cfg = load_cluster_config("default")
    return HiveService(scheduler=Scheduler(cfg), config=cfg, store=Store(f"sqlite:///{tmp_path / 's.sqlite'}"),
                       launcher=LocalLauncher(tmp_path / "state"), jobs_root=tmp_path / "jobs",
                       poll_interval_s=0.01, stop_grace_s=1.0, clock=clock, **kw)


@pytest.mark.timeout(120)
def test_service_stops_at_the_limit_and_the_deadline_survives_a_restart(tmp_path):
    clock = Clock()

    async def main():
        svc = make_service(tmp_path, clock, vc_time_limits={"default": {"default_s": 600, "max_s": 3600}})
        await svc.start()
        spec = parse_job_spec({"command": "sleep 60", "tasks": [{"gpus": 1}], "time_limit_s": 120})
        job = svc.admission.submit(spec, "ann", "default")["id"]
        other = svc.admission.submit(parse_job_spec({"command": "sleep 60", "tasks": [{"gpus": 1}]}), "ann", "default")["id"]
        await wait_until_async(lambda: all(svc.store.get_job(j)["state"] == "running" for j in (job, other)), "both running")
        started = svc.store.get_job(job)["started_at"]
        obj = svc.job_object(job, detail=False, private=True)
        assert obj["time_limit_s"] == 120 and obj["time_left_s"] == pytest.approx(120 - (clock.t - started))
        assert svc.job_object(other, detail=False, private=True)["time_limit_s"] == 600  # the VC's default
        clock.t = started + 100
        await svc.stop()  # a restart: the tasks keep running

        svc = make_service(tmp_path, clock, vc_time_limits={"default": {"default_s": 600, "max_s": 3600}})
        await svc.start()
        try:
            assert svc.store.get_job(job)["state"] == "running"  # adopted; 20 s left
            assert svc.job_object(job, detail=False, private=True)["time_left_s"] == pytest.approx(20)
            clock.t = started + 120
            await wait_until_async(lambda: svc.store.get_job(job)["state"] == "failed", "the job failed at its limit")
            row = svc.store.get_job(job)
            assert row["reason"] == "time limit 2m reached", row
            assert svc.store.get_job(other)["state"] == "running"  # its own limit (600 s) is not reached
            assert [h["reason"] for h in svc.store.history(job)][-1] == "time limit 2m reached"
        finally:
            await svc.stop()

    asyncio.run(main())


@pytest.mark.timeout(120)
def test_a_limit_that_passed_while_the_server_was_down_stops_the_job_at_recovery(tmp_path):
    clock = Clock()

    async def main():
        svc = make_service(tmp_path, clock)
        await svc.start()
        job = svc.admission.submit(parse_job_spec({"command": "sleep 60", "tasks": [{"gpus": 1}], "time_limit_s": 30}),
                         "ann", "default")["id"]
        await wait_until_async(lambda: svc.store.get_job(job)["state"] == "running", "running")
        await svc.stop()
        clock.t += 3600
        svc = make_service(tmp_path, clock)
        await svc.start()
        try:
            await wait_until_async(lambda: svc.store.get_job(job)["state"] == "failed", "failed after the restart")
            assert svc.store.get_job(job)["reason"] == "time limit 30s reached"
            assert svc.scheduler.free_gpu_count() == 4
        finally:
            await svc.stop()

    asyncio.run(main())


# --- REST on a real Jupyter server ---------------------------------------------------------------

@pytest.fixture
def jp_server_config(tmp_path):
    return {
        "ServerApp": {"jpserver_extensions": {"hive_lab_server": True}},
        "HiveLabApp": {
            "cluster_config": "default",
            "db_url": f"sqlite:///{tmp_path / 'hive.sqlite'}",
            "jobs_root": str(tmp_path / "jobs"),
            "poll_interval_s": 0.02,
            "stop_grace_s": 1.0,
            "vc_time_limits": {"default": {"max_s": 14400}},
        },
        "Isolation": {"run_as": "server"},
    }


@pytest.mark.parametrize("value, message", [
    (0, "time_limit_s: input should be greater than 0"),
    (-5, "time_limit_s: input should be greater than 0"),
    ("2h", "time_limit_s: give the run time limit in seconds as a number"),
    (True, "time_limit_s: give the run time limit in seconds as a number"),
    (5 * 3600, "time_limit_s: 5h (18000 s) is over the maximum of VC default, 4h (14400 s)"),
])
def test_bad_limits_are_400_and_store_nothing(api, value, message):
    code, body = api("POST", "jobs", {"command": "true", "tasks": [{"gpus": 0, "cpus": 1}], "time_limit_s": value})
    assert code == 400, body
    assert body["error"].startswith(message) and body["field"] == "time_limit_s", body
    assert api("GET", "jobs")[1]["total"] == 0


def test_a_sleep_60_job_with_a_1s_limit_fails_naming_the_limit(api, run):
    code, job = api("POST", "jobs", {"command": "sleep 60", "tasks": [{"gpus": 1}], "time_limit_s": 1})
    assert code == 201, job
    assert job["time_limit_s"] == 1

    got = job
    for _ in range(1200):  # a bounded wait on a condition (the job ends long before its sleep 60 would)
        code, got = api("GET", f"jobs/{job['id']}")
        if got["state"] in ("failed", "succeeded", "cancelled"):
            break
        run(asyncio.sleep(0.05))
    assert got["state"] == "failed" and got["reason"] == "time limit 1s reached", got
    assert any(h["reason"] == "time limit 1s reached" for h in got["history"])
    assert got["deadline"] is None and got["time_left_s"] is None  # over: no time left to show
