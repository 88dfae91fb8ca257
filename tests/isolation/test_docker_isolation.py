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


@pytest.fixture
def gpu_srv(live_server_factory, docker_engine, docker_test_image, unix_accounts, shared_tmp):
    """A Docker server over fake NVIDIA nodes (no GPUs here), world-openable as a careless install."""
    import os
    import stat

    dev = shared_tmp / "dev"
    dev.mkdir(mode=0o755)
    for name, minor in (("nvidia0", 0), ("nvidia1", 1), ("nvidiactl", 255)):
        os.mknod(dev / name, 0o666 | stat.S_IFCHR, os.makedev(195, minor))
        os.chmod(dev / name, 0o666)
    srv = live_server_factory(
        launcher="docker", users={A: {}}, vc_access={"*": ["*"]},
        config={"DockerLauncher": {"base_url": docker_engine.base_url, "pull_missing": False},
                "Isolation": {"run_as": "owner", "gpu_device_glob": str(dev / "nvidia[0-9]*"),
                              "gpu_control_globs": [str(dev / "nvidiactl")]}})
    srv.dev = dev
    return srv


def test_a_setgid_copy_made_in_a_gpu_container_opens_no_gpu_after_it(gpu_srv, docker_test_image, unix_accounts):
    """The reviewer's escape in a container: it holds the GPU nodes' group (what the NVIDIA runtime needs),
    makes a setgid copy of python3 for every group it holds in its job dir (its only host-writable
    mount); the student's own process running a copy on the host gets no group from it (the jobs root is
    a nosuid mount) and opens no GPU node. After a restart the server has cleared the copies' setgid bit."""
    import os
    import stat

    from fixtures.unix_accounts import run_as

    srv = gpu_srv
    gpu_gid = os.stat(srv.dev / "nvidia0").st_gid
    for node in srv.dev.iterdir():  # Docker needs the group: root:<group> 0660
        st = node.stat()
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o660) and st.st_gid == gpu_gid != 0, node
    job, out = _run(srv, A, docker_test_image,
                    'for g in $(id -G); do cp /usr/bin/python3 "$HIVE_WORKING_DIR/gpy-$g" && chgrp $g '
                    '"$HIVE_WORKING_DIR/gpy-$g" && chmod 2755 "$HIVE_WORKING_DIR/gpy-$g"; done; echo groups $(id -G)')
    assert job["state"] == "succeeded", (job, out)
    groups = out.split("groups ", 1)[1].split()
    assert str(gpu_gid) in groups, out  # the container did hold the group
    wd = srv.jobs_root / job["id"]
    probe = (f"import os; print('egid', os.getegid())\nfor n in ['nvidia0', 'nvidia1', 'nvidiactl']:\n"
             f"    try: os.close(os.open({str(srv.dev)!r} + '/' + n, os.O_RDWR)); print(n, 'OPENED')\n"
             f"    except OSError as e: print(n, e.strerror)\n")
    for g in groups:
        copy = wd / f"gpy-{g}"
        st = os.stat(copy)
        assert st.st_mode & stat.S_ISGID and st.st_gid == int(g), (copy, oct(st.st_mode))
        r = run_as(unix_accounts[A], str(copy), "-c", probe)
        assert r.returncode == 0 and f"egid {gpu_gid}" not in r.stdout, (g, r.stdout, r.stderr)
        results = [line for line in r.stdout.splitlines() if line.startswith("nvidia")]
        assert len(results) == 3 and all(line.endswith("Permission denied") for line in results), (g, r.stdout)
    srv.restart()
    assert not os.stat(wd / f"gpy-{gpu_gid}").st_mode & stat.S_ISGID  # disarmed at start
