"""A course set up with one command, exactly as docs/jupyterhub.md says, under a real JupyterHub.

``hive-lab course init`` (run with the users' Python, as the docs' ``/opt/hive/bin/hive-lab``) writes the
Hub config, the service's settings, the course kernelspec and the dirs under a root; ``course check``
passes; a Hub started from what it wrote (plus only the test's ports, log-in and the kernelspec's
path) lets the student in, puts her in the course's VC, lets her use her 2-GPU limit in one task, and
shows her the course's GPU kernel, which runs as her in the course's VC.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
import pathlib

import pytest

pytestmark = pytest.mark.timeout(600)
CARA, IVY = "hubcara", "hubivy"


def _port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def course_hub(hub_factory, hub_venv):
    # under /tmp itself: the students' jobs live below it and their accounts must traverse it
    root = pathlib.Path(tempfile.mkdtemp(prefix="hive-course-", dir="/tmp"))
    os.chmod(root, 0o755)
    port = _port()
    hive_lab = [str(hub_venv.parent / "python"), "-m", "hive_lab.cli"]
    init = subprocess.run([*hive_lab, "course", "init", "--name", "cv-101", "--gpus", "4", "--gpus-per-node", "4",
                           "--gpu-type", "T4", "--students", CARA, "--instructors", IVY, "--max-gpus", "2",
                           "--time-limit", "1h", "--port", str(port), "--root", str(root)],
                          capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert init.returncode == 0, init.stdout + init.stderr
    check = subprocess.run([*hive_lab, "course", "check", "--root", str(root)], capture_output=True, text=True,
                           env={"PATH": "/usr/bin:/bin"})
    assert check.returncode == 0, check.stderr
    hub = hub_factory(users={CARA: [], IVY: []}, course={
        "hub_config": root / "etc/jupyterhub/jupyterhub_config.py", "service_port": port,
        "jupyter_path": str(root / "usr/local/share/jupyter")})
    hub.course_root = root
    hub.start_servers(CARA)
    yield hub
    shutil.rmtree(root, ignore_errors=True)


def wait_state(hub, job_id: str, *states: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = hub.service("GET", f"jobs/{job_id}", IVY).json()
        if job["state"] in states:
            return job
        assert time.monotonic() < deadline, f"job {job_id} stayed {job['state']}: {job.get('reason')}"
        time.sleep(0.2)


def test_the_student_is_in_her_course_and_can_use_her_limit_in_one_task(course_hub):
    hub = course_hub
    me = hub.service("GET", "me", CARA).json()
    assert "cv-101" in me["vcs"], me
    assert hub.service("GET", "me", IVY).json()["admin"] is True  # the instructors' group administers
    r = hub.request("POST", f"/user/{CARA}/hive_lab/api/jobs", user=CARA,
                    json={"name": "pair", "command": "id -u", "tasks": [{"gpus": 2}]})
    assert r.status_code == 201, r.text  # a 2-GPU task fits: the course's cells are pairs (levels)
    job = wait_state(hub, r.json()["id"], "succeeded", "failed")
    assert job["vc"] == "cv-101" and job["state"] == "succeeded", job
    assert job["time_limit_s"] == 3600  # the course's default time limit
    log = hub.service("GET", f"jobs/{job['id']}/logs", CARA).json()["data"]
    assert str(pwd.getpwnam(CARA).pw_uid) in log
    r = hub.request("POST", f"/user/{CARA}/hive_lab/api/jobs", user=CARA,
                    json={"name": "greedy", "command": "true", "tasks": [{"gpus": 4}]})
    assert r.status_code in (400, 403, 409) and "2" in r.text, r.text  # above her limit: a sentence why


def test_the_course_kernel_is_visible_to_her_and_runs_as_her_in_the_course(course_hub):
    import json
    import uuid

    import websocket

    hub = course_hub
    specs = hub.request("GET", f"/user/{CARA}/api/kernelspecs", user=CARA).json()["kernelspecs"]
    assert "cv-101-gpu" in specs, sorted(specs)
    r = hub.request("POST", f"/user/{CARA}/api/kernels", user=CARA, json={"name": "cv-101-gpu"})
    assert r.status_code == 201, r.text
    kernel_id = r.json()["id"]
    try:
        jobs = hub.service("GET", "jobs", IVY, params={"user": CARA}).json()["jobs"]
        (job,) = [j for j in jobs if j["kind"] == "kernel"]
        assert job["vc"] == "cv-101"
        job = wait_state(hub, job["id"], "running")
        url = hub.url.replace("http", "ws", 1) + f"/user/{CARA}/api/kernels/{kernel_id}/channels"
        ws = websocket.create_connection(url, header=[f"Authorization: token {hub.token(CARA)}"], timeout=60)
        msg_id = uuid.uuid4().hex
        ws.send(json.dumps({
            "header": {"msg_id": msg_id, "username": CARA, "session": uuid.uuid4().hex,
                       "msg_type": "execute_request", "version": "5.3"},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": "import os; print('UID', os.getuid())", "silent": False, "store_history": False,
                        "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}}))
        out = ""
        deadline = time.monotonic() + 120
        while f"UID {pwd.getpwnam(CARA).pw_uid}" not in out:
            assert time.monotonic() < deadline, out
            msg = json.loads(ws.recv())
            if msg.get("parent_header", {}).get("msg_id") == msg_id and msg["header"]["msg_type"] == "stream":
                out += msg["content"]["text"]
        ws.close()
    finally:
        hub.request("DELETE", f"/user/{CARA}/api/kernels/{kernel_id}", user=CARA)
