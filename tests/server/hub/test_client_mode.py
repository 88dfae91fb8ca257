"""Client mode without a Hub: a real Jupyter server in client mode forwards hive_lab/api/ to another
real server running the scheduler, as its owner (the token it holds), and starts no scheduler itself.
(tests/hub runs the same under a real JupyterHub.)"""

from __future__ import annotations

import json

import websocket


def test_a_client_mode_server_forwards_as_its_owner_and_schedules_nothing(live_server_factory):
    service = live_server_factory(users={"ann": {"groups": ["students"]}}, vc_access={"@students": ["default"]})
    client = live_server_factory(
        users={"bob": {}},  # someone else who can log in to ann's server
        env={"HIVE_LAB_SERVICE_URL": service.url, "JUPYTERHUB_API_TOKEN": service.tokens["ann"],
             "JUPYTERHUB_USER": "ann"},
    )
    assert "hive-lab: client mode (no scheduler here)" in client.log()
    assert not client.db_path.exists() and not list(client.data_dir.rglob("*.sqlite"))

    me = client.request("GET", "me").json()  # the server's own token: its owner, ann, as the service sees her
    assert me == {"user": "ann", "admin": False, "vcs": ["default"], "groups": ["students"],
                  "limits": {"default": {}}, "shared": True}

    r = client.request("POST", "jobs", json={"name": "through", "command": "echo forwarded", "tasks": [{"gpus": 1}]})
    assert r.status_code == 201, r.text
    job = r.json()
    assert job["user"] == "ann"
    assert service.wait_for_job(job["id"], "succeeded")["user"] == "ann"
    assert "forwarded" in client.request("GET", f"jobs/{job['id']}/logs").json()["data"]
    # the service's own errors, unchanged (status, message, field)
    bad = client.request("POST", "jobs", json={"command": "x", "vc": "nope"})
    assert bad.status_code == 400 and bad.json()["field"] == "vc" and "does not exist" in bad.json()["error"]
    missing = client.request("GET", "jobs/j-999999")
    assert missing.status_code == 404 and "does not exist" in missing.json()["error"]

    # nobody but the owner speaks through her server
    refused = client.request("GET", "me", user="bob")
    assert refused.status_code == 403 and "bob may not" in refused.json()["error"]
    assert client.request("GET", "me", headers={"Authorization": ""}).status_code == 403

    ws = websocket.create_connection(client.ws_url("events"), header=[f"Authorization: token {client.token}"], timeout=30)
    try:
        hello = json.loads(ws.recv())
        assert hello == {"type": "hello", "user": "ann", "seq": hello["seq"]}
    finally:
        ws.close()

    service.stop()
    down = client.request("GET", "me")
    assert down.status_code == 502 and "cannot reach the hive-lab service" in down.json()["error"]
