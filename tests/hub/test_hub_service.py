"""One hive-lab scheduler under a REAL JupyterHub: the Hub-managed service, Hub identity, client mode.

The Hub (tests/fixtures/jupyterhub.py, set up in conftest.py) runs the service exactly as ``hive-lab
hub-config`` prints it; the students' single-user servers run as their own Unix accounts from
/opt/hive-hub-venv, in client mode.

Who owns a job is asserted through the API here; that each job runs under its owner's Unix account
(the service runs as root, ``Isolation.run_as`` "auto") is test_hub_isolation.py's.
"""

from __future__ import annotations

import os
import pathlib
import pwd

import pytest
from hub_people import ANN, BOB, COURSES, IVY

pytestmark = pytest.mark.timeout(600)


def submit(hub, user, vc, name, via=None):
    """Submit a 1-GPU job as ``user``: to the service, or through ``via``'s single-user server."""
    body = {"name": name, "command": "sleep 600", "vc": vc, "tasks": [{"gpus": 1}]}
    if via is None:
        return hub.service("POST", "jobs", user, json=body)
    return hub.request("POST", f"/user/{via}/hive_lab/api/jobs", user=user, json=body)


def wait_state(hub, job_id, *states, timeout=60):
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = hub.service("GET", f"jobs/{job_id}", IVY).json()
        if job["state"] in states:
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} stayed {job['state']} (wanted {states})")


def test_callers_are_hub_users_with_their_groups_and_scopes(hub):
    me = {u: hub.service("GET", "me", u).json() for u in (ANN, BOB, IVY)}
    assert me[ANN] == {"user": ANN, "admin": False, "vcs": ["cv-101"], "groups": ["cv-101"], "limits": {"cv-101": {}},
                       "shared": True}  # a Hub service serves many people
    assert me[BOB] == {"user": BOB, "admin": False, "vcs": ["nlp-201"], "groups": ["nlp-201"], "limits": {"nlp-201": {}},
                       "shared": True}
    # the instructor is an admin through custom:hive-lab:admin (role granted to the group)
    assert me[IVY]["user"] == IVY and me[IVY]["admin"] is True
    assert sorted(me[IVY]["vcs"]) == sorted(COURSES)
    # no token, or a token that is not the Hub's: nobody
    assert hub.request("GET", "/services/hive-lab/hive_lab/api/me").status_code in (302, 401, 403)
    assert hub.request("GET", "/services/hive-lab/hive_lab/api/me", token="not-a-token").status_code in (401, 403)


def test_students_see_their_own_jobs_a_full_course_queues_the_instructor_sees_all(hub):
    a1 = submit(hub, ANN, "cv-101", "ann-1")
    assert a1.status_code == 201, a1.text
    a1 = a1.json()
    b1 = submit(hub, BOB, "nlp-201", "bob-1").json()
    wait_state(hub, a1["id"], "running")
    wait_state(hub, b1["id"], "running")
    a2 = submit(hub, ANN, "cv-101", "ann-2").json()
    try:
        queued = wait_state(hub, a2["id"], "queued")
        assert "cv-101" in (queued.get("reason") or ""), queued
        assert a1["user"] == ANN and a2["user"] == ANN and b1["user"] == BOB

        mine = {u: hub.service("GET", "jobs", u, params={"user": "me"}).json()["jobs"] for u in (ANN, BOB)}
        assert {a1["id"], a2["id"]} <= {j["id"] for j in mine[ANN]} and b1["id"] not in {j["id"] for j in mine[ANN]}
        assert {j["user"] for j in mine[ANN]} == {ANN}  # (her kernels' jobs too, from test_hub_kernels)
        bobs = {j["id"] for j in mine[BOB]}  # (his ended jobs from other modules too)
        assert b1["id"] in bobs and not {a1["id"], a2["id"]} & bobs and {j["user"] for j in mine[BOB]} == {BOB}
        # another student's job: visible without its spec, dirs, logs; not cancellable
        other = hub.service("GET", f"jobs/{b1['id']}", ANN).json()
        assert "spec" not in other and "working_dir" not in other
        assert hub.service("GET", f"jobs/{b1['id']}/logs", ANN).status_code == 403
        assert hub.service("DELETE", f"jobs/{b1['id']}", ANN).status_code == 403
        # a course the student is not in
        refused = submit(hub, ANN, "nlp-201", "ann-elsewhere")
        assert refused.status_code == 403 and "nlp-201" in refused.json()["error"]

        everyone = hub.service("GET", "jobs", IVY).json()["jobs"]
        assert {a1["id"], a2["id"], b1["id"]} <= {j["id"] for j in everyone}
        for job in everyone:
            if job["id"] in (a1["id"], b1["id"]):
                assert "spec" in job  # the instructor sees the private part of everyone's jobs
    finally:
        for job in (a2, a1, b1):
            hub.service("DELETE", f"jobs/{job['id']}", IVY)
    wait_state(hub, a1["id"], "cancelled")


def test_the_service_serves_no_terminals_kernels_or_files(hub):
    for user in (ANN, IVY):
        kernel = hub.request("POST", "/services/hive-lab/api/kernels", user=user, json={"name": "python3"})
        assert kernel.status_code == 403, kernel.text
        terminal = hub.request("POST", "/services/hive-lab/api/terminals", user=user)
        assert terminal.status_code in (403, 404), terminal.text  # terminals are not even loaded
        assert hub.request("GET", "/services/hive-lab/api/contents", user=user).status_code == 403
        assert hub.request("GET", "/services/hive-lab/api/sessions", user=user).status_code == 403
    assert hub.service("GET", "me", ANN).status_code == 200  # hive-lab's own API is served


def test_a_submit_through_a_students_server_is_recorded_under_that_student(hub):
    r = submit(hub, ANN, "cv-101", "via-server", via=ANN)
    assert r.status_code == 201, r.text
    job = r.json()
    try:
        assert job["user"] == ANN
        seen = hub.service("GET", f"jobs/{job['id']}", IVY).json()
        assert seen["user"] == ANN and seen["vc"] == "cv-101"
        # her server answers hive-lab's API from the service (the same cluster, her identity)
        me = hub.request("GET", f"/user/{ANN}/hive_lab/api/me", user=ANN).json()
        assert me["user"] == ANN and me["vcs"] == ["cv-101"]
        assert hub.request("GET", f"/user/{ANN}/hive_lab/api/jobs", user=ANN, params={"user": "me"}
                           ).json()["jobs"][0]["id"] == job["id"]
        # errors come back as the service's (what to fix), not as the forwarder's
        refused = submit(hub, ANN, "nlp-201", "via-server-elsewhere", via=ANN)
        assert refused.status_code == 403 and "your VCs: cv-101" in refused.json()["error"]
        # nobody else speaks as her through her server
        assert submit(hub, BOB, "nlp-201", "bob-as-ann", via=ANN).status_code == 403
    finally:
        hub.service("DELETE", f"jobs/{job['id']}", IVY)


def test_no_scheduler_runs_in_the_users_servers(hub):
    log = hub.log()
    for user in (ANN, BOB):
        assert f"hive-lab: client mode (no scheduler here); hive_lab/api/ forwards to the service at " \
               f"{hub.service_url} as {user}" in log
        home = pathlib.Path(pwd.getpwnam(user).pw_dir)
        assert not list(home.glob(".local/share/jupyter/hive_lab/*.sqlite")), "a store in a user's server"
    # exactly one scheduler started: the service's
    assert log.count("hive-lab: 2 GPUs") == 1, log[-4000:]
    assert os.path.exists(hub.tmp / "hive.sqlite")


def test_her_server_relays_the_live_events_and_a_followed_log(hub):
    """What the Lab panel and ``hive-lab logs -f`` use: the events websocket and a streamed log."""
    import json

    import websocket

    ws_url = hub.url.replace("http", "ws", 1) + f"/user/{ANN}/hive_lab/api/events"
    ws = websocket.create_connection(ws_url, header=[f"Authorization: token {hub.token(ANN)}"], timeout=60)
    try:
        hello = json.loads(ws.recv())  # the service's hello, as her (with the newest event's seq to resume from)
        assert hello["type"] == "hello" and hello["user"] == ANN and isinstance(hello.get("seq"), int), hello
        body = {"name": "echo", "command": "echo hello from the service", "vc": "cv-101", "tasks": [{"gpus": 0}]}
        job = hub.request("POST", f"/user/{ANN}/hive_lab/api/jobs", user=ANN, json=body).json()
        while True:  # the job's own events reach her through her server
            event = json.loads(ws.recv())
            if job["id"] in json.dumps(event):
                break
    finally:
        ws.close()
    followed = hub.request("GET", f"/user/{ANN}/hive_lab/api/jobs/{job['id']}/logs", user=ANN,
                           params={"follow": 1}, stream=True)
    assert followed.status_code == 200
    text = b"".join(followed.iter_content(None)).decode()
    assert "hello from the service" in text  # the stream ends when the job ends
    assert wait_state(hub, job["id"], "succeeded")
