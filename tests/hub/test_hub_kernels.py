"""Kernels in a student's single-user server (client mode) talk to the one hive-lab service as her.

- ``%%submit`` in an ordinary kernel of her server (run as her Unix account, with the server's Hub
  environment): the job is recorded under her.
- a ``hive`` GPU kernel started from her server (kernelspec installed by her with ``hive-lab
  kernelspec install --user``): the kernel's job is hers, in her course's VC, scheduled by the service.
"""

from __future__ import annotations

import json
import pwd
import time
import uuid

import pytest
from hub_people import ANN, IVY

pytestmark = pytest.mark.timeout(600)


class KernelSession:
    """A kernel of a user's server, driven over its websocket (as JupyterLab does)."""

    def __init__(self, hub, user: str, kernel_name: str):
        import websocket

        self.hub, self.user = hub, user
        r = hub.request("POST", f"/user/{user}/api/kernels", user=user, json={"name": kernel_name})
        assert r.status_code == 201, r.text
        self.id = r.json()["id"]
        ws_url = hub.url.replace("http", "ws", 1) + f"/user/{user}/api/kernels/{self.id}/channels"
        self.ws = websocket.create_connection(ws_url, header=[f"Authorization: token {hub.token(user)}"], timeout=120)
        self.session = uuid.uuid4().hex

    def execute(self, code: str, timeout: float = 120) -> tuple[str, dict]:
        msg_id = uuid.uuid4().hex
        self.ws.send(json.dumps({
            "header": {"msg_id": msg_id, "username": self.user, "session": self.session,
                       "msg_type": "execute_request", "version": "5.3"},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True},
        }))
        out, reply, idle = [], None, False
        deadline = time.monotonic() + timeout
        while (reply is None or not idle) and time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = msg["header"]["msg_type"]
            if kind == "stream":
                out.append(msg["content"]["text"])
            elif kind == "error":
                out.append("\n".join(msg["content"]["traceback"]))
            elif kind == "execute_reply":
                reply = msg["content"]
            elif kind == "status" and msg["content"]["execution_state"] == "idle":
                idle = True
        assert reply is not None, f"no reply to {code!r}; output so far: {''.join(out)}"
        return "".join(out), reply

    def close(self) -> None:
        self.ws.close()
        self.hub.request("DELETE", f"/user/{self.user}/api/kernels/{self.id}", user=self.user)


def test_submit_magic_in_a_students_kernel_is_recorded_under_her(hub):
    kernel = KernelSession(hub, ANN, "python3")
    try:
        out, reply = kernel.execute("%load_ext hive_lab")
        assert reply["status"] == "ok", out
        out, reply = kernel.execute(
            "job = get_ipython().run_cell_magic('submit', '--name from-a-kernel --gpus 1', 'import os; print(\"uid\", os.getuid())')\n"
            "import os; print('JOB', job.id, job.client.server.source, os.getuid())"
        )
        assert reply["status"] == "ok", out
        job_line = next(line for line in out.splitlines() if line.startswith("JOB "))
        _, job_id, *_source, uid = job_line.split()
        assert int(uid) == pwd.getpwnam(ANN).pw_uid  # her kernel runs as her
        job = hub.service("GET", f"jobs/{job_id}", IVY).json()
        assert job["user"] == ANN and job["vc"] == "cv-101" and job["name"] == "from-a-kernel"
    finally:
        kernel.close()
    wait_final(hub, job_id)
    # the cell ran as a job of the service's, under her own Unix account
    logged = hub.service("GET", f"jobs/{job_id}/logs", ANN).json()["data"]
    assert f"uid {pwd.getpwnam(ANN).pw_uid}" in logged, logged


def test_a_gpu_kernel_started_from_a_students_server_is_her_job(hub):
    kernel = KernelSession(hub, ANN, "hive-gpu-1")
    try:
        out, reply = kernel.execute("import os; print('HIVE', os.environ.get('HIVE_JOB_ID'), os.getuid())", timeout=180)
        assert reply["status"] == "ok", out
        _, job_id, uid = next(line.split() for line in out.splitlines() if line.startswith("HIVE "))
        assert int(uid) == pwd.getpwnam(ANN).pw_uid  # the service started her GPU kernel as her
        job = hub.service("GET", f"jobs/{job_id}", IVY).json()
        assert job["user"] == ANN and job["vc"] == "cv-101" and job["state"] == "running", job
        assert len(job["placement"]) == 1 and len(job["placement"][0]["gpus"]) == 1
        # her own view of it goes through her server too
        mine = hub.request("GET", f"/user/{ANN}/hive_lab/api/jobs", user=ANN, params={"user": "me"}).json()["jobs"]
        assert job_id in {j["id"] for j in mine}
    finally:
        kernel.close()
    wait_final(hub, job_id)  # shutting the kernel down ends its job (releases the GPU)


def test_a_kernelspec_with_a_planted_path_and_ld_preload_never_runs_them_as_root(hub, tmp_path_factory):
    """Issue 22 through the kernel provisioner: ann's own kernelspec sets PATH to her planted tools and
    LD_PRELOAD to her library. Her GPU kernel's job runs them as her; nothing of the service (root) does."""
    import os
    import pathlib
    import shutil
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "isolation"))
    from planted import plant

    base = pathlib.Path(f"/tmp/hive-planted-{uuid.uuid4().hex[:8]}")
    planted = plant(base)
    account = pwd.getpwnam(ANN)
    import subprocess

    subprocess.run(
        [str(hub.venv_bin / "python"), "-m", "hive_lab.cli", "kernelspec", "install", "--name", "hive-planted",
         "--gpus", "1", "--user"],
        check=True, capture_output=True, user=account.pw_uid, group=account.pw_gid,
        env={"HOME": account.pw_dir, "PATH": f"{hub.venv_bin}:/usr/bin:/bin"}, cwd=account.pw_dir)
    spec_file = pathlib.Path(account.pw_dir) / ".local/share/jupyter/kernels/hive-planted/kernel.json"
    spec = json.loads(spec_file.read_text())
    spec.setdefault("env", {}).update(planted.env)
    spec_file.write_text(json.dumps(spec))
    os.chown(spec_file, account.pw_uid, account.pw_gid)
    kernel = KernelSession(hub, ANN, "hive-planted")
    try:
        out, reply = kernel.execute("import os, subprocess; print('UID', os.getuid()); subprocess.run(['id', '-u'])",
                                    timeout=180)
        assert reply["status"] == "ok", out
        assert f"UID {account.pw_uid}" in out, out
        job_id = kernel_job_id(hub, kernel)
    finally:
        kernel.close()
    wait_final(hub, job_id)
    try:
        assert planted.root_lines() == [], planted.lines()
        assert planted.ran_as(account.pw_uid), planted.lines()  # her kernel's job did get the variables
    finally:
        shutil.rmtree(base, ignore_errors=True)


def kernel_job_id(hub, kernel: "KernelSession") -> str:
    out, _ = kernel.execute("import os; print('JOB', os.environ.get('HIVE_JOB_ID'))")
    return next(line.split()[1] for line in out.splitlines() if line.startswith("JOB "))


def wait_final(hub, job_id: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while hub.service("GET", f"jobs/{job_id}", IVY).json()["state"] not in ("succeeded", "cancelled", "failed"):
        assert time.monotonic() < deadline, f"job {job_id} did not end"
        time.sleep(0.2)


def test_a_gpu_kernel_the_service_refuses_is_its_4xx_and_sentence_in_the_students_server(hub):
    """ann (course cv-101) installs a GPU kernel of nlp-201's: her server's provisioner asks the service as
    her, which refuses; her server answers what the service said (JupyterLab shows ``message``), not 500."""
    import subprocess

    account = pwd.getpwnam(ANN)
    subprocess.run(
        [str(hub.venv_bin / "python"), "-m", "hive_lab.cli", "kernelspec", "install", "--name", "hive-other-course",
         "--gpus", "1", "--vc", "nlp-201", "--user"],
        check=True, capture_output=True, user=account.pw_uid, group=account.pw_gid,
        env={"HOME": account.pw_dir, "PATH": f"{hub.venv_bin}:/usr/bin:/bin"}, cwd=account.pw_dir)
    sentence = f"hive-lab refused the kernel's GPU request: user {ANN} may not submit to VC nlp-201; your VCs: cv-101"
    body = {"path": "other.ipynb", "name": "other.ipynb", "type": "notebook", "kernel": {"name": "hive-other-course"}}
    for method, path, json_body in (("POST", f"/user/{ANN}/api/sessions", body),
                                    ("POST", f"/user/{ANN}/api/kernels", {"name": "hive-other-course"})):
        r = hub.request(method, path, user=ANN, json=json_body)
        assert r.status_code == 403, (path, r.status_code, r.text)
        assert r.json()["message"] == sentence, r.text
    mine = hub.service("GET", "jobs", IVY, params={"user": ANN}).json()["jobs"]
    assert not [j for j in mine if j["vc"] == "nlp-201"], mine  # nothing was queued for it
