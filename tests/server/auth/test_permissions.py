"""Who may do what, with real requests from several users against a real server process.

ann: VC a (by name); bob: VC b (through group students); carol: admin (by config); dave: no VC;
the server's own token: the user running the server (admin by default)."""

import getpass
import json

import pytest
import websocket

from fixtures.live_server import LiveServer

USERS = {"ann": {}, "bob": {"groups": ["students"]}, "carol": {}, "dave": {}}


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    server = LiveServer(
        tmp_path_factory.mktemp("perms"),
        cluster_config={"nodes": 1, "gpus_per_node": 4, "gpu_type": "T4", "vcs": {"a": 2, "b": 2}},
        users=USERS, vc_access={"ann": ["a"], "@students": ["b"]}, admin_users=["carol"],
    ).start()
    yield server
    server.close()


@pytest.fixture(scope="module")
def anns_job(srv):
    r = srv.request("POST", "jobs", user="ann", json={"vc": "a", "command": "echo secret-output; sleep 30",
                                                      "env": {"TOKEN": "s3cret"}, "tasks": [{"gpus": 1}]})
    assert r.status_code == 201, r.text
    job = srv.wait_for_job(r.json()["id"], "running", user="ann")
    return job


def test_identities(srv):
    me = {u: srv.request("GET", "me", user=u).json() for u in USERS}
    assert me["ann"] == {"user": "ann", "admin": False, "vcs": ["a"], "groups": [], "limits": {"a": {}}, "shared": True}
    assert me["bob"] == {"user": "bob", "admin": False, "vcs": ["b"], "groups": ["students"], "limits": {"b": {}},
                         "shared": True}
    assert me["carol"]["admin"] is True and me["carol"]["vcs"] == ["a", "b"]
    assert me["dave"]["vcs"] == [] and me["dave"]["admin"] is False
    owner = srv.request("GET", "me").json()
    assert owner["user"] == getpass.getuser() and owner["admin"] is True


def test_unauthenticated_requests_are_refused(srv):
    import requests

    # 401 for an unknown caller (issue 11: jupyter_server's 403 was not what docs/rest-api.md promised)
    for method, path in [("GET", "jobs"), ("POST", "jobs"), ("GET", "cluster"), ("GET", "metrics"), ("GET", "me"), ("GET", "usage"),
                         ("DELETE", "jobs/j-000001")]:
        r = requests.request(method, srv.api_url + path, json={"command": "true"}, timeout=10)
        assert r.status_code == 401, (method, path)
        r = requests.request(method, srv.api_url + path, json={"command": "true"}, timeout=10,
                             headers={"Authorization": "token not-a-token"})
        assert r.status_code == 401 and "authenticate first" in r.json()["error"], (method, path)


@pytest.mark.parametrize(
    "user, vc, status",
    [("ann", "a", 201), ("ann", "b", 403), ("bob", "b", 201), ("bob", "a", 403), ("dave", "a", 403),
     ("carol", "a", 201), ("carol", "b", 201), (None, "b", 201)],
)
def test_submit_only_to_own_vcs(srv, user, vc, status):
    before = srv.request("GET", "jobs", user="carol").json()["total"]
    r = srv.request("POST", "jobs", user=user, json={"vc": vc, "command": "true", "tasks": [{"gpus": 0}]})
    assert r.status_code == status, r.text
    after = srv.request("GET", "jobs", user="carol").json()["total"]
    if status == 403:
        err = r.json()
        assert f"VC {vc}" in err["error"] and err["field"] == "vc"
        assert after == before  # nothing stored
    else:
        assert r.json()["user"] == (user or getpass.getuser())


def test_default_vc_is_the_callers_first(srv):
    r = srv.request("POST", "jobs", user="bob", json={"command": "true", "tasks": [{"gpus": 0}]})
    assert r.status_code == 201 and r.json()["vc"] == "b"
    r = srv.request("POST", "jobs", user="dave", json={"command": "true", "tasks": [{"gpus": 0}]})
    assert r.status_code == 403 and "dave may not submit to any VC" in r.json()["error"]


def test_others_see_jobs_without_private_parts(srv, anns_job):
    jid = anns_job["id"]
    mine = srv.request("GET", f"jobs/{jid}", user="ann").json()
    assert mine["spec"]["env"] == {"TOKEN": "s3cret"} and "working_dir" in mine and "output_dir" in mine
    for viewer in ("bob", "dave"):
        theirs = srv.request("GET", f"jobs/{jid}", user=viewer).json()
        assert theirs["id"] == jid and theirs["state"] == "running" and theirs["history"]
        assert "spec" not in theirs and "working_dir" not in theirs and "output_dir" not in theirs
        assert "s3cret" not in json.dumps(theirs)
        listed = srv.request("GET", "jobs", user=viewer, params={"user": "ann"}).json()["jobs"]
        assert listed and all("spec" not in j for j in listed) and "s3cret" not in json.dumps(listed)
    admin = srv.request("GET", f"jobs/{jid}", user="carol").json()
    assert admin["spec"]["env"] == {"TOKEN": "s3cret"}


@pytest.mark.parametrize("what", ["logs", "outputs", "outputs/x.txt"])
def test_only_owner_and_admins_read_logs_and_outputs(srv, anns_job, what):
    jid = anns_job["id"]
    for user in ("bob", "dave"):
        r = srv.request("GET", f"jobs/{jid}/{what}", user=user)
        assert r.status_code == 403 and jid in r.json()["error"], (user, r.text)
        assert "secret-output" not in r.text
    for user in ("ann", "carol"):
        r = srv.request("GET", f"jobs/{jid}/{what}", user=user)
        assert r.status_code == (404 if what == "outputs/x.txt" else 200), (user, r.text)


def test_vcs_mine_flags(srv):
    vcs = {v["name"]: v["mine"] for v in srv.request("GET", "vcs", user="ann").json()["vcs"]}
    assert vcs == {"a": True, "b": False}
    vcs = {v["name"]: v["mine"] for v in srv.request("GET", "vcs", user="carol").json()["vcs"]}
    assert vcs == {"a": True, "b": True}


def test_drains_are_admin_only(srv):
    r = srv.request("POST", "nodes/node-0/gpus/3/drain", user="ann")
    assert r.status_code == 403 and "only admins" in r.json()["error"]
    r = srv.request("POST", "nodes/node-0/gpus/3/drain", user="carol")
    assert r.status_code == 200 and r.json()["drained"] is True
    r = srv.request("POST", "nodes/node-0/gpus/3/undrain", user="carol")
    assert r.status_code == 200 and r.json()["drained"] is False


def test_events_websocket_hides_private_parts(srv, anns_job):
    ws = websocket.create_connection(srv.ws_url(), header=[f"Authorization: token {srv.tokens['bob']}"], timeout=10)
    try:
        hello = json.loads(ws.recv())
        assert hello == {"type": "hello", "user": "bob", "seq": hello["seq"]}
        srv.request("POST", "jobs", user="ann", json={"vc": "a", "command": "true", "env": {"K": "hidden"},
                                                      "tasks": [{"gpus": 0}]})
        msg = json.loads(ws.recv())
        while msg["type"] != "job":
            msg = json.loads(ws.recv())
        assert msg["job"]["user"] == "ann" and "spec" not in msg["job"] and "hidden" not in json.dumps(msg)
    finally:
        ws.close()
    with pytest.raises(websocket.WebSocketBadStatusException):
        websocket.create_connection(srv.ws_url(), header=["Authorization: token nope"], timeout=10)


def test_cancel_only_own_jobs(srv, anns_job):
    jid = anns_job["id"]
    for user in ("bob", "dave"):
        r = srv.request("DELETE", f"jobs/{jid}", user=user)
        assert r.status_code == 403 and jid in r.json()["error"] and "ann" in r.json()["error"]
    assert srv.request("GET", f"jobs/{jid}", user="ann").json()["state"] == "running"
    r = srv.request("DELETE", f"jobs/{jid}", user="carol")  # admins may
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    assert "cancelled by carol" in r.json()["reason"]
    r = srv.request("DELETE", f"jobs/{jid}", user="ann")
    assert r.status_code == 409


def test_browser_login_with_a_personal_token(srv):
    import requests

    session = requests.Session()
    session.get(srv.url + "login", timeout=10)
    xsrf = session.cookies.get("_xsrf")
    r = session.post(srv.url + "login", data={"password": srv.tokens["bob"], "_xsrf": xsrf}, allow_redirects=False,
                     timeout=10)
    assert r.status_code == 302, r.text[:300]
    me = session.get(srv.api_url + "me", headers={"X-XSRFToken": xsrf}, timeout=10).json()
    assert me["user"] == "bob" and me["groups"] == ["students"]
    r = session.post(srv.api_url + "jobs", json={"command": "true", "tasks": [{"gpus": 0}]},
                     headers={"X-XSRFToken": xsrf}, timeout=10)
    assert r.status_code == 201 and r.json()["user"] == "bob" and r.json()["vc"] == "b"
    other = requests.Session()
    other.get(srv.url + "login", timeout=10)
    r = other.post(srv.url + "login", data={"password": "wrong", "_xsrf": other.cookies.get("_xsrf")},
                   allow_redirects=False, timeout=10)
    assert r.status_code != 302
    assert other.get(srv.api_url + "me", timeout=10).status_code == 401
    # a logged-in browser that forgets the XSRF token is known, just not allowed: 403
    r = session.post(srv.api_url + "jobs", json={"command": "true", "tasks": [{"gpus": 0}]}, timeout=10)
    assert r.status_code == 403, r.text[:300]
