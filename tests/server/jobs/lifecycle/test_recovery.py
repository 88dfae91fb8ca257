"""Crash recovery for real: a jupyter server process with running and queued jobs is SIGKILLed, things
happen while it is down (a task ends normally, another is killed), and a restarted server puts the
core back together from the store and what really runs. No job is lost, none runs twice, no GPU is
given twice."""

import asyncio
import collections
import concurrent.futures
import json
import os
import pathlib
import signal
import threading
import time

import pytest
import websocket

from fixtures.live_server import LiveServer
from hive_lab_server.execution.launchers.local import LocalLauncher
from hive_lab_server.jobs.service import HiveService
from hive_lab_server.wire.spec import parse_job_spec
from hive_lab_server.store import Store
from hive_scheduler import Scheduler, load_cluster_config
from recovery_gates import ExitBetweenCallsLauncher
from waiting import wait_until, wait_until_async

# Each task appends "start|end <job> <attempt> <gpus> <time>" to RUNS and waits for its go-file.
TASK = ('echo "start $HIVE_JOB_ID $HIVE_ATTEMPT $CUDA_VISIBLE_DEVICES $(date +%s.%N)" >> "$RUNS"; '
        'while [ ! -e "$GO_DIR/go-$NAME" ] && [ ! -e "$GO_DIR/go-all" ]; do sleep 0.05; done; '
        'echo "end $HIVE_JOB_ID $HIVE_ATTEMPT $CUDA_VISIBLE_DEVICES $(date +%s.%N)" >> "$RUNS"')


def runs(path):
    out = []
    if path.exists():
        for line in path.read_text().splitlines():
            kind, job, attempt, gpus, at = line.split(" ")
            out.append((kind, job, int(attempt), tuple(int(g) for g in gpus.split(",")), float(at)))
    return out


def task_pid(srv, job_id):
    (info,) = list(srv.jobs_root.glob(f".*launcher/{job_id}/*.json"))
    return int(json.loads(info.read_text())["pid"])


def assert_no_gpu_given_twice(srv):
    cluster = srv.request("GET", "cluster").json()
    holders = collections.Counter()
    running = srv.request("GET", "jobs", params={"state": "running,scheduled"}).json()["jobs"]
    for job in running:
        for p in job["placement"]:
            for g in p["gpus"]:
                holders[(p["node"], g)] += 1
    assert all(n == 1 for n in holders.values()), holders
    for gpu in cluster["gpus"]:
        if (gpu["node"], gpu["index"]) in holders:
            assert gpu["state"] == "used", gpu
    assert cluster["gpus_free"] == cluster["gpus_total"] - sum(holders.values())


@pytest.mark.timeout(240)
def test_sigkill_and_restart_loses_nothing(tmp_path):
    go_dir = tmp_path / "go"
    go_dir.mkdir()
    runs_file = tmp_path / "runs.txt"
    srv = LiveServer(tmp_path / "srv", cluster_config={"nodes": 1, "gpus_per_node": 4, "gpu_type": "T4",
                                                       "vcs": {"default": 4}})
    try:
        srv.start()

        def submit(name, gpus):
            r = srv.request("POST", "jobs", json={
                "name": name, "command": TASK, "max_retries": 1, "tasks": [{"gpus": gpus}],
                "env": {"RUNS": str(runs_file), "GO_DIR": str(go_dir), "NAME": name}})
            assert r.status_code == 201, r.text
            return r.json()["id"]

        ids = {name: submit(name, gpus) for name, gpus in
               [("keep", 2), ("ends", 1), ("dies", 1), ("q-big", 2), ("q-small", 1)]}
        for name in ("keep", "ends", "dies"):
            srv.wait_for_job(ids[name], "running")
        for name in ("q-big", "q-small"):
            assert srv.request("GET", f"jobs/{ids[name]}").json()["state"] == "queued"
        wait_until(lambda: len(runs(runs_file)) >= 3, "the three running tasks' start records")
        before = {j: srv.request("GET", f"jobs/{j}").json() for j in ids.values()}
        keep_pid = task_pid(srv, ids["keep"])
        dies_pid = task_pid(srv, ids["dies"])
        ends_exit = next(srv.jobs_root.glob(f".*launcher/{ids['ends']}/*.json")).with_suffix(".exit")

        srv.kill()  # SIGKILL: no shutdown code runs
        assert srv.proc.returncode == -signal.SIGKILL
        (go_dir / "go-ends").touch()  # finishes normally while nobody watches
        os.killpg(dies_pid, signal.SIGKILL)  # dies while nobody watches: lost, retried
        killed_at = time.time()
        wait_until(lambda: any(r[0] == "end" and r[1] == ids["ends"] for r in runs(runs_file)), "ends' end record")
        wait_until(ends_exit.exists, "ends' exit file")

        srv.start()
        after = {j: srv.request("GET", f"jobs/{j}").json() for j in ids.values()}
        # the running job was adopted: same process, same GPUs, still running
        keep = after[ids["keep"]]
        assert keep["state"] == "running" and task_pid(srv, ids["keep"]) == keep_pid
        assert keep["placement"] == before[ids["keep"]]["placement"]
        assert any("adopted" in h["reason"] for h in keep["history"])
        # the one that ended while the server was down succeeded with its real exit code
        ends = srv.wait_for_job(ids["ends"], "succeeded", "failed")
        assert ends["state"] == "succeeded" and ends["exit_code"] == 0
        # the one killed while the server was down was lost and queued again (1 retry allowed); it keeps
        # its place (submitted before the queued ones), so it runs again first
        dies = srv.wait_for_job(ids["dies"], "running")
        assert dies["retries"] == 1 and any("lost" in h["reason"] for h in dies["history"]), dies
        assert [h["state"] for h in dies["history"]][-2:] == ["scheduled", "running"]
        # the queued jobs are still there, still waiting for GPUs
        for name in ("q-big", "q-small"):
            assert after[ids[name]]["state"] in ("queued", "scheduled", "running")
        assert srv.request("GET", f"jobs/{ids['q-big']}").json()["state"] == "queued"  # needs 2, 1 is free
        assert_no_gpu_given_twice(srv)
        started = collections.Counter(r[1] for r in runs(runs_file) if r[0] == "start")
        assert started[ids["keep"]] == 1 and started[ids["ends"]] == 1  # nothing ran twice

        (go_dir / "go-all").touch()
        for jid in ids.values():
            done = srv.wait_for_job(jid, "succeeded", "failed", timeout=60)
            assert done["state"] == "succeeded", done
        final = runs(runs_file)
        started = collections.Counter(r[1] for r in final if r[0] == "start")
        assert started == {ids["keep"]: 1, ids["ends"]: 1, ids["dies"]: 2, ids["q-big"]: 1, ids["q-small"]: 1}
        # GPU intervals never overlap (the killed attempt ended when it was killed)
        spans = collections.defaultdict(list)
        open_ = {}
        for kind, job, attempt, gpus, at in final:
            if kind == "start":
                open_[(job, attempt)] = (gpus, at)
            else:
                g, t0 = open_.pop((job, attempt))
                spans[g].append((t0, at, job))
        for (job, attempt), (g, t0) in open_.items():
            assert job == ids["dies"] and attempt == 1
            spans[g].append((t0, killed_at, job))
        by_gpu = collections.defaultdict(list)
        for gpus, intervals in spans.items():
            for g in gpus:
                by_gpu[g].extend(intervals)
        for g, intervals in by_gpu.items():
            intervals.sort()
            for (s1, e1, j1), (s2, e2, j2) in zip(intervals, intervals[1:]):
                assert s2 >= e1 - 0.05, f"GPU {g} given to {j1} and {j2} at once"
    finally:
        srv.close()


# --- the service answers only once recovery is over; a task ending during recovery keeps its exit ---

GATES_DIR = pathlib.Path(__file__).resolve().parent  # where recovery_gates.py is, for the server's PYTHONPATH
WAIT_FOR_GO = 'while [ ! -e "$GO" ]; do sleep 0.02; done; exit {code}'


RECOVERY_WAIT_S = 8.0  # (2 s was too short for a loaded machine's recovery after the gate: a busy CI run)


@pytest.mark.timeout(120)
def test_requests_wait_for_recovery_and_see_its_result(tmp_path):
    """A real server whose recovery is held at a gate (the real local launcher's first running() waits
    for a file): jupyter_server itself answers, hive-lab's REST answers 503 after recovery_wait_s, and a
    request arriving during recovery is answered after it, with the recovered state (the job that ended
    while the server was down is succeeded, not "running" as stored before the restart)."""
    gate = tmp_path / "gate"
    gate.touch()
    go = tmp_path / "go"
    srv = LiveServer(
        tmp_path / "srv", launcher="recovery_gates:GatedLocalLauncher",
        config={"HiveLabApp": {"recovery_wait_s": RECOVERY_WAIT_S}},
        env={"HIVE_TEST_RECOVERY_GATE": str(gate),
             "PYTHONPATH": os.pathsep.join(filter(None, [str(GATES_DIR), os.environ.get("PYTHONPATH")]))},
    )
    try:
        srv.start()
        r = srv.request("POST", "jobs", json={"command": WAIT_FOR_GO.format(code=0), "tasks": [{"gpus": 1}],
                                              "env": {"GO": str(go)}})
        assert r.status_code == 201, r.text
        job_id = r.json()["id"]
        srv.wait_for_job(job_id, "running")
        exit_file = next(srv.jobs_root.glob(f".*launcher/{job_id}/*.json")).with_suffix(".exit")

        srv.kill()
        go.touch()  # the job ends while the server is down
        wait_until(exit_file.exists, "the exit file written while the server is down")
        gate.unlink()

        started: dict = {}
        starter = threading.Thread(target=lambda: started.update(srv=srv.start()), daemon=True)
        starter.start()
        waiting = pathlib.Path(f"{gate}.waiting")
        wait_until(waiting.exists, lambda: "recovery to reach its gate; server log:\n" + srv.log()[-3000:])

        # recovery is held: jupyter_server's own API is not
        assert srv.request("GET", "/api/status", timeout=10).status_code == 200
        # hive-lab's REST waits recovery_wait_s, then says to retry: a read, a submit and the live updates, sent
        # together (one wait for the three)
        def live_updates():
            with pytest.raises(websocket.WebSocketBadStatusException) as refused:
                websocket.create_connection(srv.ws_url(), header=[f"Authorization: token {srv.token}"], timeout=30)
            return refused.value.status_code

        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            read = pool.submit(srv.request, "GET", f"jobs/{job_id}", timeout=30)
            write = pool.submit(srv.request, "POST", "jobs", json={"command": "true", "tasks": [{"gpus": 1}]},
                                timeout=30)
            live = pool.submit(live_updates)
        r = read.result()
        assert r.status_code == 503, r.text
        assert r.json()["error"] == "hive-lab is recovering its jobs; retry in a moment"
        assert r.headers["Retry-After"] == "1"
        r = write.result()
        assert r.status_code == 503, r.text  # nothing is submitted while the core is being rebuilt
        assert live.result() == 503  # nor the live updates

        # a request that arrives during recovery is answered once it is over, with its outcome
        answer: dict = {}
        getter = threading.Thread(target=lambda: answer.update(r=srv.request("GET", f"jobs/{job_id}", timeout=30)),
                                  daemon=True)
        getter.start()
        # (sent well inside recovery_wait_s: it waits in the server; what recovery has left after the gate must end
        # within the rest of that wait: a few tenths of a second alone, seconds on a loaded machine)
        time.sleep(0.5)
        gate.touch()
        getter.join(30)
        r = answer["r"]
        assert r.status_code == 200, r.text
        assert r.json()["state"] == "succeeded" and r.json()["exit_code"] == 0, r.json()
        starter.join(60)
        assert started.get("srv") is srv
        jobs = srv.request("GET", "jobs").json()
        assert [j["id"] for j in jobs["jobs"]] == [job_id]  # the refused submit stored nothing
        ws = websocket.create_connection(srv.ws_url(), header=[f"Authorization: token {srv.token}"], timeout=10)
        assert json.loads(ws.recv())["type"] == "hello"
        ws.close()
    finally:
        gate.touch()
        srv.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("code", [0, 7])
def test_a_task_ending_during_recovery_keeps_its_exit_code(tmp_path, code):
    """The real local launcher; the task ends exactly between the recovery's two launcher calls after
    adopting it (whichever order they come in). It is recorded with its real exit code, not as lost."""
    cfg = load_cluster_config({"nodes": 1, "gpus_per_node": 2, "gpu_type": "T4", "vcs": {"default": 2}})
    db = f"sqlite:///{tmp_path / 's.sqlite'}"
    go = tmp_path / "go"

    def service(launcher):
        return HiveService(scheduler=Scheduler(cfg), config=cfg, store=Store(db), launcher=launcher,
                           jobs_root=tmp_path / "jobs", poll_interval_s=0.02)

    async def main():
        first = service(LocalLauncher(tmp_path / "state"))
        await first.start()
        spec = parse_job_spec({"command": WAIT_FOR_GO.format(code=code), "tasks": [{"gpus": 1}],
                               "max_retries": 2, "env": {"GO": str(go)}})
        job_id = first.admission.submit(spec, "ann", "default")["id"]
        await wait_until_async(lambda: first.store.get_job(job_id)["state"] == "running", "the job running")
        await first.stop()  # the task keeps running

        launcher = ExitBetweenCallsLauncher(tmp_path / "state", job_id=job_id, go_file=go)
        second = service(launcher)
        try:
            await second.start()
            assert go.exists() and not launcher.armed, launcher.calls  # the task ended during recovery
            return job_id, second.store.get_job(job_id), second.store.history(job_id)
        finally:
            await second.stop()

    job_id, row, history = asyncio.run(main())
    assert row["state"] == ("succeeded" if code == 0 else "failed"), (row, history)
    assert row["exit_code"] == code and row["retries"] == 0, row
    assert not any("lost" in h["reason"] for h in history), history
