"""Job lifecycle on a real Jupyter server process with real local subprocesses: the task environment,
multi-task jobs, logs (and follow mode), staged files and outputs, failures, cancel (SIGTERM then
SIGKILL), preemption with retries."""

import json
import os

import psutil
import pytest

from fixtures.live_server import LiveServer
from waiting import wait_until


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    server = LiveServer(
        tmp_path_factory.mktemp("lifecycle"),
        cluster_config={"nodes": 1, "gpus_per_node": 4, "gpu_type": "T4", "levels": ["pair"],
                        "vcs": {"a": 2, "b": 2}},
        users={"ann": {}}, vc_access={"ann": ["a", "b"]},
    ).start()
    yield server
    server.close()


def submit(srv, body, user="ann"):
    r = srv.request("POST", "jobs", user=user, json=body)
    assert r.status_code == 201, r.text
    return r.json()


def log_of(srv, job_id, task="main-0", user="ann"):
    r = srv.request("GET", f"jobs/{job_id}/logs", user=user, params={"task": task})
    assert r.status_code == 200, r.text
    return r.json()["data"]


def env_lines(text):
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def test_multi_task_job_gets_distributed_env(srv):
    show = "env | grep -E '^(HIVE_|CUDA_VISIBLE|NVIDIA_VISIBLE|MASTER_|WORLD_SIZE|RANK|MY_VAR)' | sort"
    job = submit(srv, {"vc": "a", "command": show, "env": {"MY_VAR": "x y"},
                       "tasks": [{"name": "worker", "count": 2, "gpus": 1}]})
    done = srv.wait_for_job(job["id"], "succeeded", "failed", user="ann")
    assert done["state"] == "succeeded", done
    envs = [env_lines(log_of(srv, job["id"], f"worker-{i}")) for i in range(2)]
    placement = {p["task"]: p for p in done["placement"]}
    for i, env in enumerate(envs):
        assert env["HIVE_JOB_ID"] == job["id"] and env["HIVE_TASK_NAME"] == f"worker-{i}"
        assert env["HIVE_TASK_INDEX"] == str(i) and env["RANK"] == str(i) and env["WORLD_SIZE"] == "2"
        assert env["CUDA_VISIBLE_DEVICES"] == ",".join(map(str, placement[f"worker-{i}"]["gpus"]))
        assert env["NVIDIA_VISIBLE_DEVICES"] == env["CUDA_VISIBLE_DEVICES"]
        assert env["MASTER_ADDR"] == "127.0.0.1" and env["MY_VAR"] == "x y"
    assert envs[0]["MASTER_PORT"] == envs[1]["MASTER_PORT"] and int(envs[0]["MASTER_PORT"]) > 0
    assert envs[0]["CUDA_VISIBLE_DEVICES"] != envs[1]["CUDA_VISIBLE_DEVICES"]


def test_single_task_job_has_no_distributed_env(srv):
    job = submit(srv, {"vc": "a", "command": "env | sort", "tasks": [{"gpus": 0}]})
    srv.wait_for_job(job["id"], "succeeded", user="ann")
    env = env_lines(log_of(srv, job["id"]))
    assert "MASTER_ADDR" not in env and "RANK" not in env and env["CUDA_VISIBLE_DEVICES"] == ""


def test_files_are_staged_and_outputs_served(srv):
    job = submit(srv, {"vc": "a", "tasks": [{"gpus": 0}],
                       "files": {"main.py": "print('hello from main')\n", "pkg/data.txt": "42"},
                       "command": "python3 main.py && cp pkg/data.txt \"$HIVE_OUTPUT_DIR/answer.txt\""})
    done = srv.wait_for_job(job["id"], "succeeded", "failed", user="ann")
    assert done["state"] == "succeeded", (done, log_of(srv, job["id"]))
    assert log_of(srv, job["id"]) == "hello from main\n"
    files = srv.request("GET", f"jobs/{job['id']}/outputs", user="ann").json()["files"]
    assert files == [{"path": "answer.txt", "size": 2}]
    r = srv.request("GET", f"jobs/{job['id']}/outputs/answer.txt", user="ann")
    assert r.status_code == 200 and r.content == b"42"
    r = srv.request("GET", f"jobs/{job['id']}/outputs/../main.py", user="ann")
    assert r.status_code == 404


def test_staged_files_are_private_from_the_start(srv):
    """Spec ``files`` (secrets, for kernels: the connection key and the user's token) are created 0600
    in dirs created 0700; the job sees them that way from its first instruction."""
    job = submit(srv, {"vc": "a", "tasks": [{"gpus": 0}], "files": {"secret.txt": "s3cret", "conf/key.json": "{}"},
                       "command": "stat -c '%a %n' . secret.txt conf conf/key.json output logs && cat secret.txt"})
    done = srv.wait_for_job(job["id"], "succeeded", "failed", user="ann")
    out = log_of(srv, job["id"])
    assert done["state"] == "succeeded", (done, out)
    modes = dict(reversed(line.split(" ", 1)) for line in out.splitlines()[:6])
    assert modes == {".": "700", "secret.txt": "600", "conf": "700", "conf/key.json": "600", "output": "700",
                     "logs": "700"}, out
    assert out.endswith("s3cret")
    assert [p["address"] for p in done["placement"]] == ["127.0.0.1"]  # the local launcher runs tasks here


def test_logs_follow_streams_until_the_task_ends(srv):
    gate = srv.tmp / "follow-gate"
    job = submit(srv, {"vc": "a", "tasks": [{"gpus": 0}],
                       "command": f"for i in 1 2 3; do echo line-$i; done; while [ ! -e {gate} ]; do sleep 0.02; done; "
                                  "echo line-4; echo line-5"})
    srv.wait_for_job(job["id"], "running", user="ann")
    r = srv.request("GET", f"jobs/{job['id']}/logs", user="ann", params={"follow": "1"}, stream=True)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/plain")
    got = b""
    chunks = r.iter_content(chunk_size=None)
    while b"line-3" not in got:  # streamed while the task runs: it cannot end before the gate opens
        got += next(chunks)
    gate.touch()
    got += b"".join(chunks)
    assert got.decode() == "".join(f"line-{i}\n" for i in range(1, 6))


def test_failure_stops_the_gang_and_records_the_exit_code(srv):
    job = submit(srv, {"vc": "b", "tasks": [
        {"name": "bad", "gpus": 1, "command": "sleep 0.3; exit 3"},
        {"name": "slow", "gpus": 1, "command": "echo $$ > slow.pid; exec sleep 60"},
    ]})
    done = srv.wait_for_job(job["id"], "failed", "succeeded", timeout=20, user="ann")
    assert done["state"] == "failed" and done["exit_code"] == 3
    assert "bad-0 exited with code 3" in done["reason"]
    pid = int((srv.jobs_root / job["id"] / "slow.pid").read_text())
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_cancel_sigterm_then_sigkill(srv):
    polite = submit(srv, {"vc": "a", "tasks": [{"gpus": 1}],
                          "command": "trap 'echo bye; exit 0' TERM; echo ready; while true; do sleep 0.05; done"})
    stubborn = submit(srv, {"vc": "b", "tasks": [{"gpus": 1}],
                            "command": "trap 'echo not-yet' TERM; echo ready; while true; do sleep 0.05; done"})
    for job in (polite, stubborn):
        srv.wait_for_job(job["id"], "running", user="ann")
        wait_until(lambda: "ready" in log_of(srv, job["id"]), "the task's trap to be set")
    r = srv.request("DELETE", f"jobs/{polite['id']}", user="ann")
    assert r.status_code == 200 and r.json()["state"] == "cancelled", r.json()
    assert r.json()["exit_code"] == 0, r.json()  # it left on SIGTERM: no SIGKILL after the grace
    assert "bye" in log_of(srv, polite["id"])
    r = srv.request("DELETE", f"jobs/{stubborn['id']}", user="ann")
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    # SIGTERM first (its trap printed), SIGKILL once the grace ran out (137)
    assert r.json()["exit_code"] == 137 and "not-yet" in log_of(srv, stubborn["id"])
    history = srv.request("GET", f"jobs/{stubborn['id']}", user="ann").json()["history"]
    assert history[-1]["state"] == "cancelled" and "cancelled by ann" in history[-1]["reason"]


def test_openpai_spec_runs(srv):
    r = srv.request("POST", "jobs", user="ann", json={
        "jobName": "pai", "virtualCluster": "a",
        "taskRoles": [{"name": "w", "taskNumber": 2, "gpuNumber": 1, "cpuNumber": 1, "memoryMB": 512,
                       "command": "echo $HIVE_TASK_NAME"}]})
    assert r.status_code == 201, r.text
    done = srv.wait_for_job(r.json()["id"], "succeeded", user="ann")
    assert done["tasks"] == ["w-0", "w-1"] and done["name"] == "pai"
    assert log_of(srv, done["id"], "w-1") == "w-1\n"


def wait_for_starts(runs, n: int) -> None:
    """"running" means the task's process was started, not that its shell got to the echo yet."""
    wait_until(lambda: (runs.read_text().count("start") if runs.exists() else 0) >= n, f"{n} starts")
    assert runs.read_text().count("start") == n


def test_preempted_job_is_retried_then_fails_without_retries(srv):
    runs = srv.tmp / "opp-runs.txt"
    opp = submit(srv, {"vc": "a", "priority": "opportunistic", "max_retries": 1, "tasks": [{"gpus": 4}],
                       "command": f"echo start >> {runs}; exec sleep 60"})
    running = srv.wait_for_job(opp["id"], "running", user="ann")
    assert running["opportunistic"] is True
    wait_for_starts(runs, 1)  # (a stop before its command runs means the command never starts)
    # a guaranteed job of VC b needs its GPUs back
    g = submit(srv, {"vc": "b", "tasks": [{"gpus": 2}], "command": "sleep 1"})
    requeued = srv.wait_for_job(opp["id"], "queued", "failed", timeout=20, user="ann")
    assert requeued["state"] == "queued" and requeued["retries"] == 1, requeued
    assert f"preempted by {g['id']}" in requeued["reason"] or any(
        f"preempted by {g['id']}" in h["reason"] for h in requeued["history"])
    srv.wait_for_job(g["id"], "succeeded", timeout=20, user="ann")
    srv.wait_for_job(opp["id"], "running", timeout=20, user="ann")
    wait_for_starts(runs, 2)
    # preempted again: no retries left -> failed
    g2 = submit(srv, {"vc": "b", "tasks": [{"gpus": 1}], "command": "true"})
    failed = srv.wait_for_job(opp["id"], "failed", "queued", timeout=20, user="ann")
    assert failed["state"] == "failed" and "no retries left" in failed["reason"], failed
    srv.wait_for_job(g2["id"], "succeeded", timeout=20, user="ann")
    assert runs.read_text().count("start") == 2
    states = [h["state"] for h in failed["history"]]
    assert states[:4] == ["submitted", "scheduled", "running", "queued"] and states[-1] == "failed"


def test_gpus_are_given_by_uuid_when_nvml_knows_them(live_server_factory, tmp_path):
    """With (the fake) NVML describing the machine, tasks see their GPUs' UUIDs, not indices."""
    hw = tmp_path / "hardware.yaml"
    hw.write_text("hostname: ws\ngpus:\n" + "".join(
        f"- {{model: NVIDIA A100-SXM4-80GB, memory_mb: 81920, uuid: GPU-0000000{i}-aaaa-4bbb-8ccc-00000000000{i}}}\n"
        for i in range(2)))
    srv = live_server_factory(cluster_config=None, config={"HiveLabApp": {"nvml_backend": f"fake:{hw}",
                                                                          "gpu_sample_interval_s": 0}})
    r = srv.request("POST", "jobs", json={"command": "echo $CUDA_VISIBLE_DEVICES/$NVIDIA_VISIBLE_DEVICES",
                                          "tasks": [{"gpus": 2}]})
    assert r.status_code == 201, r.text
    done = srv.wait_for_job(r.json()["id"], "succeeded", "failed")
    uuids = [f"GPU-0000000{i}-aaaa-4bbb-8ccc-00000000000{i}" for i in range(2)]
    assert done["placement"][0]["gpu_uuids"] == uuids
    logs = srv.request("GET", f"jobs/{done['id']}/logs").json()["data"]
    assert logs == f"{','.join(uuids)}/{','.join(uuids)}\n"


def test_follow_ends_with_its_task_not_the_job(srv):
    job = submit(srv, {"vc": "a", "tasks": [{"name": "quick", "gpus": 0, "cpus": 1, "command": "echo done-quick"},
                                            {"name": "slow", "gpus": 0, "cpus": 1, "command": "sleep 20"}]})
    srv.wait_for_job(job["id"], "running", user="ann")
    r = srv.request("GET", f"jobs/{job['id']}/logs", user="ann", params={"task": "quick-0", "follow": "1"}, timeout=60)
    assert r.text == "done-quick\n"
    assert srv.request("GET", f"jobs/{job['id']}", user="ann").json()["state"] == "running"  # the slow task runs on
    chunk = srv.request("GET", f"jobs/{job['id']}/logs", user="ann", params={"task": "quick-0"}).json()
    assert chunk["eof"] is True
    assert srv.request("GET", f"jobs/{job['id']}/logs", user="ann", params={"task": "slow-0"}).json()["eof"] is False
    srv.request("DELETE", f"jobs/{job['id']}", user="ann")
