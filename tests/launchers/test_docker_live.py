"""Batch jobs in real containers through a live hive-lab server (REST in, Docker engine underneath)."""

from __future__ import annotations

import time

import pytest
from waiting import wait_until

# the first docker test may build the test image (apt + dpkg-deb + docker import, about half a minute on a fresh machine)
pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]


@pytest.fixture
def docker_server(live_server_factory, docker_engine, docker_test_image):
    def make(**kw):
        config = {"DockerLauncher": {"base_url": docker_engine.base_url, "pull_missing": False}}
        config.update(kw.pop("config", {}))
        return live_server_factory(launcher="docker", config=config, **kw)

    return make


def submit(srv, **body):
    body.setdefault("tasks", [{"name": "main", "count": 1, "gpus": 1}])
    r = srv.request("POST", "jobs", json=body)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def logs(srv, job_id, task="main-0"):
    return srv.request("GET", f"jobs/{job_id}/logs", params={"task": task}).json()["data"]


def containers(docker_engine, job_id, all_=True):
    return docker_engine.client().containers.list(all=all_, filters={"label": f"hive-lab.job={job_id}"})


def container_ids(docker_engine, job_id) -> list[str]:
    """One API call (``containers.list`` looks each one up, and one removed meanwhile raises NotFound)."""
    return [c["Id"] for c in docker_engine.client().api.containers(all=True, filters={"label": f"hive-lab.job={job_id}"})]


def test_job_runs_in_a_container_with_its_gpus_and_limits(docker_server, docker_engine, docker_test_image):
    srv = docker_server()
    job_id = submit(
        srv, image=docker_test_image,
        command="echo gpus=$CUDA_VISIBLE_DEVICES; cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null "
                "|| cat /sys/fs/cgroup/memory.max; python3 -c 'import sys; print(sys.prefix)'",
        tasks=[{"name": "main", "count": 1, "gpus": 2, "cpus": 1, "memory_mb": 300}],
    )
    job = srv.wait_for_job(job_id, "succeeded", "failed", timeout=60)
    assert job["state"] == "succeeded", job
    gpus = ",".join(map(str, job["placement"][0]["gpus"]))
    out = logs(srv, job_id)
    assert f"gpus={gpus}" in out and str(300 * 1024 * 1024) in out and "/usr\n" in out
    wait_until(lambda: container_ids(docker_engine, job_id) == [], "its container to go")  # once its exit is stored


def test_cancel_oom_and_missing_image(docker_server, docker_engine, docker_test_image):
    srv = docker_server()
    sleeper = submit(srv, image=docker_test_image, command="echo up; exec sleep 300")
    srv.wait_for_job(sleeper, "running", timeout=60)
    assert [c.status for c in containers(docker_engine, sleeper)] == ["running"]
    r = srv.request("DELETE", f"jobs/{sleeper}")
    assert r.status_code == 200
    srv.wait_for_job(sleeper, "cancelled", timeout=30)
    deadline = time.monotonic() + 20
    while container_ids(docker_engine, sleeper):
        assert time.monotonic() < deadline
        time.sleep(0.2)

    hog = submit(srv, image=docker_test_image, command="python3 -c 'b = bytearray(400 << 20)'",
                 tasks=[{"name": "main", "count": 1, "gpus": 1, "memory_mb": 64}])
    job = srv.wait_for_job(hog, "failed", timeout=60)
    assert "OOMKilled" in job["reason"], job

    missing = submit(srv, image="hive-lab/not-here:0", command="true")
    job = srv.wait_for_job(missing, "failed", timeout=30)
    assert "hive-lab/not-here:0" in job["reason"], job
    assert srv.request("GET", "cluster").json()["gpus_free"] == 4  # every GPU back


def test_server_restart_adopts_running_containers(docker_server, docker_engine, docker_test_image):
    srv = docker_server()
    job_id = submit(srv, image=docker_test_image,
                    command="for i in 1 2 3 4 5 6 7 8 9 10; do echo tick-$i; sleep 0.5; done")
    srv.wait_for_job(job_id, "running", timeout=60)
    srv.kill()  # SIGKILL: no goodbye
    time.sleep(0.5)
    srv.start()
    job = srv.wait_for_job(job_id, "succeeded", "failed", timeout=60)
    assert job["state"] == "succeeded", job
    assert logs(srv, job_id).split() == [f"tick-{i}" for i in range(1, 11)]  # each line once
    wait_until(lambda: container_ids(docker_engine, job_id) == [], "its container to go")


def test_imageless_jobs_still_run_as_local_processes(docker_server):
    srv = docker_server()
    job_id = submit(srv, command="echo local-$HIVE_JOB_ID")
    job = srv.wait_for_job(job_id, "succeeded", "failed", timeout=30)
    assert job["state"] == "succeeded", job
    assert f"local-{job_id}" in logs(srv, job_id)


def test_service_rides_out_a_docker_daemon_restart(docker_server, docker_engine, docker_test_image):
    if not docker_engine.started:
        pytest.skip("the engine was not started by this session; it cannot be restarted here")
    srv = docker_server()
    job_id = submit(srv, image=docker_test_image, command="echo before; sleep 5; echo after; exit 3")
    srv.wait_for_job(job_id, "running", timeout=60)
    docker_engine.restart()  # --live-restore: the container keeps running while the daemon is away
    job = srv.wait_for_job(job_id, "failed", "succeeded", timeout=60)
    assert job["exit_code"] == 3 and "code 3" in job["reason"], job
    assert logs(srv, job_id).split() == ["before", "after"]
    ok = submit(srv, image=docker_test_image, command="echo fresh")  # and new jobs start again
    assert srv.wait_for_job(ok, "succeeded", "failed", timeout=60)["state"] == "succeeded"
