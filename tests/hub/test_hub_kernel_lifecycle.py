"""A student's GPU kernels under a real JupyterHub, as the day goes (issue 26):

- a GPU kernel that waits in the queue opens its websocket and answers its status at once through the
  proxy (no 60 s hold, no 503);
- when her server stops, her kernels' jobs end with a reason in words: a queued one never starts later
  as an orphan holding a GPU, a running one is not left to a watchdog's "exit code 143".
"""

from __future__ import annotations

import pathlib
import time

import pytest
from hub_people import ANN, BOB, IVY

pytestmark = pytest.mark.timeout(600)
FINAL = ("succeeded", "failed", "cancelled")


def blocker(hub, user: str, vc: str) -> str:
    r = hub.service("POST", "jobs", user, json={"name": "blocker", "command": "sleep 600", "vc": vc,
                                                 "tasks": [{"gpus": 1}]})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def wait_state(hub, job_id: str, *states: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = hub.service("GET", f"jobs/{job_id}", IVY).json()
        if job["state"] in states:
            return job
        assert time.monotonic() < deadline, f"job {job_id} stayed {job['state']} (wanted {states}): {job.get('reason')}"
        time.sleep(0.2)


def kernel_jobs(hub) -> dict[str, dict]:
    jobs = hub.service("GET", "jobs", IVY, params={"limit": 500}).json()["jobs"]
    return {j["id"]: j for j in jobs if j["user"] == ANN and j["kind"] == "kernel"}


def start_kernel(hub, kernelspec: str = "hive-gpu-1") -> tuple[str, dict]:
    """A GPU kernel in ann's server (JupyterLab's POST); returns its id and its new job."""
    before = set(kernel_jobs(hub))
    r = hub.request("POST", f"/user/{ANN}/api/kernels", user=ANN, json={"name": kernelspec})
    assert r.status_code == 201, r.text
    (job,) = [j for i, j in kernel_jobs(hub).items() if i not in before]
    return r.json()["id"], job


@pytest.fixture
def full_cluster(hub):
    """Both GPUs busy (one per course): ann's next GPU kernel waits in the queue."""
    jobs = [blocker(hub, ANN, "cv-101"), blocker(hub, BOB, "nlp-201")]
    for job_id in jobs:
        wait_state(hub, job_id, "running")
    yield jobs
    for job_id in jobs:
        hub.service("DELETE", f"jobs/{job_id}", IVY)


def test_a_queued_gpu_kernels_websocket_and_status_open_at_once(hub, full_cluster):
    import websocket

    kernel_id, job = start_kernel(hub)
    assert wait_state(hub, job["id"], "queued", "running")["state"] == "queued"
    try:
        r = hub.request("GET", f"/user/{ANN}/api/kernels/{kernel_id}", user=ANN, timeout=20)
        assert r.status_code == 200, r.text
        url = hub.url.replace("http", "ws", 1) + f"/user/{ANN}/api/kernels/{kernel_id}/channels"
        try:  # JupyterLab gives up long before jupyter_server's 60 s kernel_info_timeout
            ws = websocket.create_connection(url, header=[f"Authorization: token {hub.token(ANN)}"], timeout=20)
        except Exception as exc:
            raise AssertionError(f"the queued kernel's websocket did not open: {exc!r}") from None
        ws.close()
        assert wait_state(hub, job["id"], "queued", "running")["state"] == "queued"  # still waiting, and open
    finally:
        hub.request("DELETE", f"/user/{ANN}/api/kernels/{kernel_id}", user=ANN)
    assert wait_state(hub, job["id"], *FINAL)["state"] == "cancelled"


def test_when_her_server_stops_her_gpu_kernels_jobs_end_with_a_reason(hub, full_cluster):
    own_blocker = full_cluster[0]
    hub.service("DELETE", f"jobs/{own_blocker}", IVY)  # her course's GPU frees: her first kernel runs
    wait_state(hub, own_blocker, *FINAL)
    _, running = start_kernel(hub)
    wait_state(hub, running["id"], "running")
    _, queued = start_kernel(hub)  # no GPU left: this one waits
    assert wait_state(hub, queued["id"], "queued", "running")["state"] == "queued"

    r = hub.api("DELETE", f"users/{ANN}/server", timeout=60)  # she logs out / the culler stops her server
    assert r.status_code in (202, 204), r.text
    try:
        for job in (queued, running):
            ended = wait_state(hub, job["id"], *FINAL, timeout=30)
            assert ended["state"] == "cancelled", ended
            assert "Jupyter server stopped" in ended["reason"], ended["reason"]
        history = hub.service("GET", f"jobs/{queued['id']}", IVY).json()["history"]
        assert "running" not in [h["state"] for h in history]  # the queued kernel never got a GPU
    finally:
        hub.start_servers(ANN)


def test_a_queued_gpu_kernel_of_a_server_that_died_never_starts(hub, full_cluster):
    """Her server is SIGKILLed (out of memory, its node lost) while her GPU kernel waits: nobody stops
    it, and nobody can reach the kernel any more. Once its heartbeat is older than the lease, the
    service ends the job, in words, before it ever gets a GPU (it used to start later for nobody)."""
    import json
    import os
    import pwd
    import signal

    import psutil

    account = pwd.getpwnam(ANN)
    kernels = pathlib.Path(account.pw_dir, ".local/share/jupyter/kernels")
    spec = json.loads((kernels / "hive-gpu-1" / "kernel.json").read_text())
    spec["metadata"]["kernel_provisioner"]["config"]["heartbeat_lease_s"] = 4  # the test's short lease
    (kernels / "hive-gpu-lease").mkdir(exist_ok=True)
    (kernels / "hive-gpu-lease" / "kernel.json").write_text(json.dumps(spec))
    for path in (kernels / "hive-gpu-lease", kernels / "hive-gpu-lease" / "kernel.json"):
        os.chown(path, account.pw_uid, account.pw_gid)

    _, queued = start_kernel(hub, "hive-gpu-lease")
    assert wait_state(hub, queued["id"], "queued", "running")["state"] == "queued"
    # her server among this Hub's own processes (another Hub on the machine may run a server of the same account)
    (server,) = [p for p in psutil.Process(hub.proc.pid).children(recursive=True)
                 if p.username() == ANN and "jupyterhub.singleuser" in " ".join(p.cmdline())]
    server.send_signal(signal.SIGKILL)
    try:
        ended = wait_state(hub, queued["id"], *FINAL, timeout=60)
        assert ended["state"] == "cancelled", ended
        assert "no heartbeat" in ended["reason"] and "nobody can reach the kernel" in ended["reason"], ended["reason"]
        history = hub.service("GET", f"jobs/{queued['id']}", IVY).json()["history"]
        assert "running" not in [h["state"] for h in history]  # it never held a GPU
    finally:
        hub.api("DELETE", f"users/{ANN}/server", timeout=60)
        hub.start_servers(ANN)


def execute(hub, kernel_id: str, code: str, timeout: float = 120, kernel: str | None = None) -> str:
    """Run ``code`` over the kernel's websocket through the proxy (as JupyterLab does); all it printed."""
    import json
    import uuid

    import websocket

    # a session of its own, as JupyterLab's: without one, every connection shares the session "" and
    # jupyter_server hands it the channels (and messages) buffered from the previous, closed connection
    session = uuid.uuid4().hex
    url = hub.url.replace("http", "ws", 1) + f"/user/{ANN}/api/kernels/{kernel_id}/channels?session_id={session}"
    ws = websocket.create_connection(url, header=[f"Authorization: token {hub.token(ANN)}"], timeout=timeout)

    def send(msg_type: str, content: dict) -> str:
        msg_id = uuid.uuid4().hex
        ws.send(json.dumps({"header": {"msg_id": msg_id, "username": ANN, "session": session, "msg_type": msg_type,
                                       "version": "5.3"},
                            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [], "content": content}))
        return msg_id

    try:
        # as a frontend does after a kernel (re)start: ask for kernel info until its answer shows on IOPub,
        # so this connection hears what the kernel now running publishes (a kernel that just took over
        # the ports publishes before a reconnecting subscriber has joined: ZeroMQ's slow joiner)
        ws.settimeout(1)
        deadline = time.monotonic() + timeout
        ready = False
        while not ready:  # ``kernel``: and the kernel that answers is that one (a dying one may still answer)
            assert time.monotonic() < deadline, "the kernel never answered on IOPub"
            asked = send("kernel_info_request", {})
            try:
                heard_iopub, implementation = False, None
                while not ready:  # until a second passes without a message
                    m = json.loads(ws.recv())
                    if m.get("parent_header", {}).get("msg_id") != asked:
                        continue
                    heard_iopub = heard_iopub or m.get("channel") == "iopub"
                    if m["header"]["msg_type"] == "kernel_info_reply":
                        implementation = m["content"].get("implementation")
                    ready = heard_iopub and implementation is not None and kernel in (None, implementation)
            except websocket.WebSocketTimeoutException:
                pass
        ws.settimeout(timeout)
        msg_id = send("execute_request", {"code": code, "silent": False, "store_history": False,
                                          "user_expressions": {}, "allow_stdin": False, "stop_on_error": True})
        # the output is complete at IOPub's "idle" for the request, not at the shell's reply: the two channels
        # are not ordered with each other, and the reply may come before the last output
        out, deadline, replied, idle = [], time.monotonic() + timeout, False, False
        while not (replied and idle):
            assert time.monotonic() < deadline, f"no reply to {code!r}: {''.join(out)}"
            msg = json.loads(ws.recv())
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = msg["header"]["msg_type"]
            print("received:", msg.get("channel"), kind, json.dumps(msg.get("content"))[:300])  # shown on failure
            if kind == "stream":
                out.append(msg["content"]["text"])
            elif kind == "error":
                out.append("\n".join(msg["content"]["traceback"]))
            elif kind == "execute_reply":
                replied = True
            elif kind == "status" and msg["content"]["execution_state"] == "idle":
                idle = True
        return "".join(out)
    finally:
        ws.close()


def test_a_gpu_kernel_the_instructor_cancels_stays_cancelled_and_says_who_and_why(hub):
    kernel_id, job = start_kernel(hub)
    try:
        wait_state(hub, job["id"], "running")
        assert "first" in execute(hub, kernel_id, "print('first')")
        r = hub.service("DELETE", f"jobs/{job['id']}", IVY, params={"reason": "deadline week: GPUs for the exam"})
        assert r.status_code in (200, 202), r.text
        wait_state(hub, job["id"], "cancelled")
        out = execute(hub, kernel_id, "print('second')", kernel="hive-lab-ended")  # what answers in its place
        assert "second" not in out, out
        assert f"cancelled by {IVY} (deadline week: GPUs for the exam)" in out and "Restart" in out, out
        active = [j for j in kernel_jobs(hub).values() if j["state"] not in FINAL]
        assert active == [], active  # no GPU asked for behind the instructor's back
        # her own restart asks again
        r = hub.request("POST", f"/user/{ANN}/api/kernels/{kernel_id}/restart", user=ANN, timeout=120)
        assert r.status_code == 200, r.text
        out = execute(hub, kernel_id, "print('again')")
        assert "again" in out and f"ended: cancelled by {IVY}" in out, out
    finally:
        hub.request("DELETE", f"/user/{ANN}/api/kernels/{kernel_id}", user=ANN)
