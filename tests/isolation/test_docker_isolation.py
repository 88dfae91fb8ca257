"""Docker launcher with isolation on, through a live server and the private test engine: the container
runs as the owner's uid:gid and sees the owner's job dir only (no other job's dir, no jobs root)."""

from __future__ import annotations

import pytest

from fixtures.unix_accounts import ACCOUNTS

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]

A, B = ACCOUNTS


@pytest.fixture
def planted(shared_tmp):
    from planted import plant

    return plant(shared_tmp / "planted", marker="/tmp/hive-marker.log")  # inside the container


@pytest.fixture
def srv(live_server_factory, docker_engine, docker_test_image, unix_accounts, planted):
    return live_server_factory(
        launcher="docker", users={A: {}, B: {}}, vc_access={"*": ["*"]},
        config={"DockerLauncher": {"base_url": docker_engine.base_url, "pull_missing": False,
                                   "allowed_mount_roots": [str(planted.root)]},
                "Isolation": {"run_as": "owner"}})


def _run(srv, user, image, command):
    r = srv.request("POST", "jobs", user=user, json={"image": image, "command": command, "tasks": [{"gpus": 1}]})
    assert r.status_code == 201, r.text
    job = srv.wait_for_job(r.json()["id"], "succeeded", "failed", timeout=120, user=user)
    return job, srv.request("GET", f"jobs/{job['id']}/logs", user=user).json()["data"]


def test_container_runs_as_the_owner_and_mounts_only_their_job_dir(srv, docker_test_image, unix_accounts):
    jobs_root = str(srv.jobs_root)
    job_a, out = _run(srv, A, docker_test_image,
                      f'id -u; id -g; grep -c " {jobs_root}" /proc/self/mountinfo; echo "wd=$HIVE_WORKING_DIR"')
    assert job_a["state"] == "succeeded", (job_a, out)
    uid, gid, mounts = out.split()[:3]
    pw = unix_accounts[A]
    assert (uid, gid) == (str(pw.pw_uid), str(pw.pw_gid))
    assert mounts == "1"  # the job's own dir, nothing else under the jobs root
    a_dir = f"{jobs_root}/{job_a['id']}"
    job_b, out_b = _run(srv, B, docker_test_image, f'ls {a_dir} 2>&1; echo "rc=$?"; id -u')
    assert job_b["state"] == "succeeded", (job_b, out_b)
    assert "rc=0" not in out_b and out_b.split()[-1] == str(unix_accounts[B].pw_uid)


def test_the_servers_root_user_gets_no_container(srv, docker_test_image):
    r = srv.request("POST", "jobs", json={"image": docker_test_image, "command": "id -u", "tasks": [{"gpus": 1}]})
    assert r.status_code == 403 and "never run as root" in r.text, r.text


def test_a_planted_path_and_ld_preload_never_run_as_root(srv, docker_test_image, unix_accounts, planted):
    """Issue 22 on the Docker launcher: a job's env naming the student's own tools (PATH) and library
    (LD_PRELOAD, mounted into the container as its data dir) reaches no root process: both are host
    variables the container never gets, and every process in it runs as the student, who can still load
    the library on purpose (so the check could see a root line)."""
    r = srv.request("POST", "jobs", user=A, json={
        "image": docker_test_image, "tasks": [{"gpus": 1}], "data_dir": str(planted.root),
        "env": planted.env,
        "command": f'echo "env:${{LD_PRELOAD:-none}}"; LD_PRELOAD={planted.lib} id -u; cat /tmp/hive-marker.log'})
    assert r.status_code == 201, r.text
    job = srv.wait_for_job(r.json()["id"], "succeeded", "failed", timeout=120, user=A)
    out = srv.request("GET", f"jobs/{job['id']}/logs", user=A).json()["data"]
    assert job["state"] == "succeeded", (job, out)
    assert "env:none" in out, out  # the host's LD_PRELOAD (and PATH) never reach the container
    lines = [ln for ln in out.splitlines() if ln.startswith("preload ")]
    assert planted.root_lines(lines) == [], lines
    assert planted.ran_as(unix_accounts[A].pw_uid, lines), out  # loaded on purpose: as the student
