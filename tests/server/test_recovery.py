"""Crash recovery for real: a jupyter server process with running and queued jobs is SIGKILLed, things
happen while it is down (a task ends normally, another is killed), and a restarted server puts the
core back together from the store and what really runs. No job is lost, none runs twice, no GPU is
given twice."""

import collections
import json
import os
import signal
import time

import pytest

from fixtures.live_server import LiveServer

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
        deadline = time.monotonic() + 10
        while len(runs(runs_file)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        before = {j: srv.request("GET", f"jobs/{j}").json() for j in ids.values()}
        keep_pid = task_pid(srv, ids["keep"])
        dies_pid = task_pid(srv, ids["dies"])

        srv.kill()  # SIGKILL: no shutdown code runs
        assert srv.proc.returncode == -signal.SIGKILL
        (go_dir / "go-ends").touch()  # finishes normally while nobody watches
        os.killpg(dies_pid, signal.SIGKILL)  # dies while nobody watches: lost, retried
        killed_at = time.time()
        deadline = time.monotonic() + 10
        while not any(r[0] == "end" and r[1] == ids["ends"] for r in runs(runs_file)) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)

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
