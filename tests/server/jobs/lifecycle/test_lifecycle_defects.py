"""Issue 11's lifecycle defects, each reproduced on the real service: the real core, the real local
launcher running real processes, a real SQLite store (faults from a real full filesystem or SQLite's
own page limit, no mocks). The clock is injected; every wait is on a condition."""

from __future__ import annotations

import asyncio
import itertools
import pathlib
import subprocess

import psutil
import pytest
from sqlalchemy import text

from fixtures.live_server import LiveServer
from hive_lab_server.execution.launchers.local import LocalLauncher
from hive_lab_server.jobs.service import HiveService, StoreUnavailable
from hive_lab_server.wire.spec import parse_job_spec
from hive_lab_server.store import Store
from hive_scheduler import Scheduler, load_cluster_config
from waiting import wait_until, wait_until_async


class FakeClock:
    def __init__(self, t: float = 1_700_000_000.0):
        self.t = t

    def __call__(self) -> float:
        self.t += 0.001
        return self.t


@pytest.fixture(autouse=True)
def _no_task_outlives_its_test(tmp_path):
    """Tasks survive their service's stop on purpose (a restarted server adopts them); the tests here
    stop services mid-job, so whatever still runs in this test's job dirs is killed afterwards."""
    yield
    jobs = str(tmp_path / "jobs")
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.cwd().startswith(jobs):
                proc.kill()
        except (psutil.Error, OSError):
            continue


def make_service(tmp_path, cluster, store=None, **kw):
    cfg = load_cluster_config(cluster)
    return HiveService(scheduler=Scheduler(cfg), config=cfg,
                       store=store or Store(f"sqlite:///{tmp_path / 's.sqlite'}"),
                       launcher=LocalLauncher(tmp_path / "state"), jobs_root=tmp_path / "jobs",
                       poll_interval_s=0.01, stop_grace_s=2.0, preemption_grace_s=0.5, clock=FakeClock(), **kw)


def state(svc, job_id):
    return svc.store.get_job(job_id)["state"]


# --- defect 1 -------------------------------------------------------------------------------------

@pytest.mark.timeout(120)
def test_placed_then_preempted_before_launch(tmp_path):
    """VC a full; in VC b (8 GPUs) X (prio 100, 8 GPUs), then L (prio 0, 4 GPUs, max_retries 3), then H
    (prio 100, 8 GPUs): when X ends, L is placed and preempted in one step. L must not keep "exits
    still to come" (its next attempt's exit counts), must not use up a retry, must run exactly once."""
    runs = tmp_path / "runs.txt"
    go = tmp_path / "go-x"

    async def main():
        svc = make_service(tmp_path, {"nodes": 2, "gpus_per_node": 8, "gpu_type": "T4", "vcs": {"a": 8, "b": 8}})
        await svc.start()
        try:
            def sub(vc, prio, gpus, command, retries=0):
                spec = parse_job_spec({"vc": vc, "priority": prio, "max_retries": retries, "command": command,
                                       "tasks": [{"gpus": gpus}]})
                return svc.admission.submit(spec, "ann", vc)["id"]

            a = sub("a", 0, 8, f"while [ ! -e {tmp_path}/go-a ]; do sleep 0.02; done")
            x = sub("b", 100, 8, f"while [ ! -e {go} ]; do sleep 0.02; done")
            low = sub("b", 0, 4, f"echo run >> {runs}; sleep 0.3", retries=3)
            high = sub("b", 100, 8, "true")
            await wait_until_async(lambda: state(svc, x) == "running", "X running")
            assert state(svc, low) == "queued" and state(svc, high) == "queued"
            go.touch()
            for job in (x, high, low):
                await wait_until_async(lambda: state(svc, job) in ("succeeded", "failed"), f"{job} finished")
            (tmp_path / "go-a").touch()
            await wait_until_async(lambda: state(svc, a) == "succeeded", "a finished")
            row = svc.store.get_job(low)
            history = svc.store.history(low)
            assert row["state"] == "succeeded" and row["exit_code"] == 0, (row, history)
            assert row["retries"] == 0, history  # the attempt that never started cost no retry
            assert any("before it started" in h["reason"] for h in history), history
            assert runs.read_text().count("run") == 1  # ran once
            assert svc.active == {} and svc.scheduler.free_gpu_count() == 16  # nothing holds GPUs
        finally:
            await svc.stop()

    asyncio.run(main())


# --- defect 3: store faults -------------------------------------------------------------------------

class SmallDisk:
    """A real, small filesystem (tmpfs with ``size=``) holding the SQLite store. ``fill()`` fills it
    with a file (the next write of the store fails with SQLITE_FULL, "database or disk is full", as on a
    full disk); ``free()`` deletes that file."""

    def __init__(self, root: pathlib.Path):
        self.root = root
        self.filler = root / "filler"
        self.store: Store | None = None

    def open_store(self) -> Store:
        self.store = Store(f"sqlite:///{self.root / 's.sqlite'}")
        return self.store

    def fill(self):
        with self.store.engine.connect() as conn:  # an empty WAL: the next commit needs new blocks
            conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
        with open(self.filler, "wb") as f:
            try:
                for _ in itertools.count():
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass
        try:  # the last partial block too
            with open(self.filler, "ab") as f:
                for _ in range(4096):
                    f.write(b"\0")
                    f.flush()
        except OSError:
            pass

    def free(self):
        self.filler.unlink()


@pytest.fixture
def small_disk(tmp_path):
    root = tmp_path / "disk"
    root.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", str(root)],
                       check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {exc}")
    try:
        yield SmallDisk(root)
    finally:
        subprocess.run(["umount", "-l", str(root)], check=False)


@pytest.mark.timeout(120)
def test_store_faults_lose_nothing_and_recover_without_restart(tmp_path, small_disk):
    """While the store is full: a submit is refused with 503 (nothing stored, nothing in the core); a
    job exiting keeps its exit (not "lost"); a cancel refused with 503 can be sent again; once space
    returns the writes go through without a restart and every job ends as it should."""
    store = small_disk.open_store()
    full = small_disk
    go = tmp_path / "go"
    spec = lambda cmd, gpus=1: parse_job_spec({"command": cmd, "tasks": [{"gpus": gpus}]})  # noqa: E731

    async def main():
        svc = make_service(tmp_path, {"nodes": 1, "gpus_per_node": 4, "gpu_type": "T4", "vcs": {"default": 4}},
                           store=store)
        await svc.start()
        try:
            ends = svc.admission.submit(spec(f"while [ ! -e {go} ]; do sleep 0.02; done; exit 3"), "ann", "default")["id"]
            keeps = svc.admission.submit(spec("trap 'exit 0' TERM; while true; do sleep 0.02; done"), "ann", "default")["id"]
            await wait_until_async(lambda: state(svc, ends) == "running" and state(svc, keeps) == "running", "running")
            free_before = svc.scheduler.free_gpu_count()
            full.fill()
            # a submit: 503 with Retry-After, nothing stored, nothing in the core
            with pytest.raises(StoreUnavailable) as refused:
                svc.admission.submit(spec("true", gpus=2), "ann", "default")
            assert refused.value.status == 503 and refused.value.retry_after_s > 0
            assert svc.scheduler.free_gpu_count() == free_before and len(svc.active) == 2
            # a cancel: 503, the job is untouched and may be cancelled again
            with pytest.raises(StoreUnavailable):
                await svc.cancel(keeps, "ann", wait_s=0)
            assert svc.active[keeps].lc.intent is None
            # a job exits while the store is full: its exit is kept, not turned into "lost"
            go.touch()
            await wait_until_async(lambda: svc.work.store_error is not None and any(j == ends for j, _ in svc.work.pending),
                        "the exit pending")
            assert state(svc, ends) == "running"
            full.free()  # space returns: no restart needed
            await wait_until_async(lambda: state(svc, ends) == "failed", "the exit stored")
            row = svc.store.get_job(ends)
            assert row["exit_code"] == 3 and "lost" not in row["reason"], row
            job = await svc.cancel(keeps, "ann", wait_s=10)  # the refused cancel, sent again
            assert job["state"] == "cancelled", job
            ok = svc.admission.submit(spec("true", gpus=2), "ann", "default")["id"]
            await wait_until_async(lambda: state(svc, ok) == "succeeded", "a submit after the fault")
            assert svc.scheduler.free_gpu_count() == 4 and svc.work.store_error is None
        finally:
            await svc.stop()

    asyncio.run(main())


@pytest.mark.timeout(120)
def test_exit_seen_while_store_full_survives_a_crash(tmp_path, small_disk):
    """The exit of a task seen while the store was full is not lost if the server dies before the
    store accepts it: the launcher keeps the exit record until the exit is stored (``ack``)."""
    store = small_disk.open_store()
    full = small_disk
    go = tmp_path / "go"
    cluster = {"nodes": 1, "gpus_per_node": 2, "gpu_type": "T4", "vcs": {"default": 2}}

    async def first():
        svc = make_service(tmp_path, cluster, store=store)
        await svc.start()
        job = svc.admission.submit(parse_job_spec({"command": f"while [ ! -e {go} ]; do sleep 0.02; done; exit 5",
                                         "max_retries": 2, "tasks": [{"gpus": 1}]}), "ann", "default")["id"]
        await wait_until_async(lambda: state(svc, job) == "running", "running")
        full.fill()
        go.touch()
        await wait_until_async(lambda: any(j == job for j, _ in svc.work.pending), "the exit pending")
        # the server dies here (no shutdown code runs: the loop is simply gone)
        svc._loop_task.cancel()
        svc.store.close()
        return job

    async def second(job):
        full.free()
        svc = make_service(tmp_path, cluster, store=small_disk.open_store())
        await svc.start()
        try:
            row = svc.store.get_job(job)
            assert row["state"] == "failed" and row["exit_code"] == 5 and row["retries"] == 0, \
                (row, svc.store.history(job))
        finally:
            await svc.stop()

    job = asyncio.run(first())
    asyncio.run(second(job))


@pytest.mark.timeout(120)
def test_failed_preempting_submit_leaves_nothing_demoted_or_stopping(tmp_path, small_disk):
    """A submit that would preempt a running job is refused (503) when the store is full: the victim
    keeps running, is not demoted or stopped, in the core and in the store."""
    store = small_disk.open_store()
    full = small_disk

    async def main():
        svc = make_service(tmp_path, {"nodes": 1, "gpus_per_node": 4, "gpu_type": "T4", "levels": ["pair"],
                                      "vcs": {"a": 2, "b": 2}},
                           store=store)
        await svc.start()
        try:
            # max_retries 0: ended by its preemption (opportunistic work requeues by default)
            opp = svc.admission.submit(parse_job_spec({"vc": "a", "priority": "opportunistic", "tasks": [{"gpus": 4}],
                                             "max_retries": 0,
                                             "command": "trap 'exit 0' TERM; while true; do sleep 0.02; done"}),
                             "ann", "a")["id"]
            await wait_until_async(lambda: state(svc, opp) == "running", "running")
            view = svc.scheduler.job(opp)
            full.fill()
            with pytest.raises(StoreUnavailable):
                svc.admission.submit(parse_job_spec({"vc": "b", "tasks": [{"gpus": 2}], "command": "true"}), "ann", "b")
            assert svc.scheduler.job(opp) == view  # not preempted, not demoted in the core
            assert svc.active[opp].lc.intent is None and state(svc, opp) == "running"
            full.free()  # the same submit now preempts it (so the refused one would have)
            high = svc.admission.submit(parse_job_spec({"vc": "b", "tasks": [{"gpus": 2}], "command": "true"}), "ann", "b")
            await wait_until_async(lambda: state(svc, high["id"]) == "succeeded", "the preemptor ran")
            assert state(svc, opp) == "failed" and "preempted by" in svc.store.get_job(opp)["reason"]
        finally:
            await svc.stop()

    asyncio.run(main())


# --- defect 2 and the REST side of defect 3, on a real server process -------------------------------

STUBBORN = "trap 'echo not-yet' TERM; echo $$ > task.pid; echo ready; while true; do sleep 0.05; done"


@pytest.mark.timeout(180)
def test_cancel_answered_200_survives_sigkill_during_the_stop_grace(tmp_path):
    srv = LiveServer(tmp_path / "srv", cluster_config={"nodes": 1, "gpus_per_node": 2, "gpu_type": "T4",
                                                       "vcs": {"default": 2}},
                     config={"HiveLabApp": {"stop_grace_s": 4.0, "cancel_wait_s": 0.1}})
    try:
        srv.start()
        r = srv.request("POST", "jobs", json={"command": STUBBORN, "tasks": [{"gpus": 1}]})
        assert r.status_code == 201, r.text
        job_id = r.json()["id"]
        srv.wait_for_job(job_id, "running")
        pid_file = srv.jobs_root / job_id / "task.pid"
        wait_until(pid_file.exists, "the task's pid")
        pid = int(pid_file.read_text())
        r = srv.request("DELETE", f"jobs/{job_id}")
        assert r.status_code == 200 and r.json()["state"] == "running", r.text  # stopping: the grace runs
        srv.kill()  # SIGKILL inside the stop grace period
        assert psutil.pid_exists(pid)  # the task ignored SIGTERM and outlived the server
        srv.start()
        done = srv.wait_for_job(job_id, "cancelled", "succeeded", "failed", timeout=60)
        assert done["state"] == "cancelled" and "cancelled by" in done["reason"], done
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        assert srv.request("GET", "cluster").json()["gpus_free"] == 2
    finally:
        srv.close()


@pytest.mark.timeout(180)
def test_full_store_answers_503_with_retry_after_and_recovers(tmp_path, small_disk):
    srv = LiveServer(tmp_path / "srv", cluster_config={"nodes": 1, "gpus_per_node": 2, "gpu_type": "T4",
                                                       "vcs": {"default": 2}},
                     config={"HiveLabApp": {"db_url": f"sqlite:///{small_disk.root / 's.sqlite'}",
                                            "cancel_wait_s": 5.0}})
    try:
        srv.start()
        r = srv.request("POST", "jobs", json={"command": "trap 'exit 0' TERM; while true; do sleep 0.05; done",
                                              "tasks": [{"gpus": 1}]})
        assert r.status_code == 201, r.text
        job_id = r.json()["id"]
        srv.wait_for_job(job_id, "running")
        small_disk.open_store()
        small_disk.fill()
        r = srv.request("POST", "jobs", json={"command": "true", "tasks": [{"gpus": 1}]})
        assert r.status_code == 503 and int(r.headers["Retry-After"]) > 0, (r.status_code, r.text)
        assert "retry" in r.json()["error"]
        r = srv.request("DELETE", f"jobs/{job_id}")
        assert r.status_code == 503 and int(r.headers["Retry-After"]) > 0, (r.status_code, r.text)
        assert srv.request("GET", f"jobs/{job_id}").json()["state"] == "running"
        small_disk.free()
        r = srv.request("DELETE", f"jobs/{job_id}")  # the same cancel, again: no restart needed
        assert r.status_code == 200 and r.json()["state"] == "cancelled", r.text
        r = srv.request("POST", "jobs", json={"command": "true", "tasks": [{"gpus": 1}]})
        assert r.status_code == 201, r.text
        assert srv.wait_for_job(r.json()["id"], "succeeded", "failed")["state"] == "succeeded"
        assert [j["id"] for j in srv.request("GET", "jobs").json()["jobs"]] == [r.json()["id"], job_id]
    finally:
        srv.close()
