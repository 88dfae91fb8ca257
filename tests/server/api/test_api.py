"""The REST API against a real in-process Jupyter server with authentication required (jp_fetch)."""

import json
import pathlib

import pytest
import yaml

from hive_lab_server.api.openapi import openapi_document

SPEC = openapi_document()


ENDPOINTS = [
    ("GET", "jobs"), ("POST", "jobs"), ("GET", "jobs/j-000001"), ("DELETE", "jobs/j-000001"),
    ("GET", "jobs/j-000001/logs"), ("GET", "jobs/j-000001/outputs"), ("GET", "jobs/j-000001/outputs/a.txt"),
    ("GET", "cluster"), ("GET", "vcs"), ("GET", "me"), ("GET", "metrics"), ("GET", "spec.yaml"), ("GET", "history"),
    ("POST", "nodes/node-0/drain"), ("POST", "nodes/node-0/gpus/0/undrain"), ("POST", "nodes/node-0/healthy"),
    ("GET", "nope"), ("PUT", "nope"),
]


@pytest.mark.parametrize("authorization", ["token wrong", ""])  # "": no token (jp_fetch adds one otherwise)
def test_every_endpoint_answers_401_without_a_valid_token(jp_fetch, jp_ws_fetch, hive, run, authorization):
    """401 (not jupyter_server's 403) with a message and WWW-Authenticate, as docs/rest-api.md says."""
    headers = {"Authorization": authorization}
    for method, path in ENDPOINTS:
        body = json.dumps({"command": "true"}) if method in ("POST", "PUT") else None
        r = run(jp_fetch("hive_lab", "api", *path.split("/"), method=method, body=body, headers=headers,
                         raise_error=False, allow_nonstandard_methods=True))
        assert r.code == 401, (method, path, r.code, r.body[:200])
        assert "authenticate first" in json.loads(r.body)["error"], (method, path)
        assert r.headers["WWW-Authenticate"].startswith("token"), (method, path)
    with pytest.raises(Exception) as info:
        run(jp_ws_fetch("hive_lab", "api", "events", headers=headers))
    assert getattr(info.value, "code", None) == 401, info.value


def test_me_is_the_server_owner_and_admin(api):
    import getpass

    code, me = api("GET", "me")
    assert code == 200
    assert me == {"user": getpass.getuser(), "admin": True, "vcs": ["default"], "groups": [], "limits": {"default": {}},
                  "shared": False}


def test_submit_run_and_history(api, wait_state, hive):
    code, job = api("POST", "jobs", {"name": "hello", "command": "echo hello-from-$HIVE_JOB_ID",
                                           "tasks": [{"gpus": 2}]})
    assert code == 201, job
    assert job["state"] in ("scheduled", "running") and job["gpus"] == 2
    assert len(job["placement"]) == 1 and len(job["placement"][0]["gpus"]) == 2
    done = wait_state(job["id"], "succeeded", "failed")
    assert done["state"] == "succeeded" and done["exit_code"] == 0
    assert [h["state"] for h in done["history"]] == ["submitted", "scheduled", "running", "succeeded"]
    assert all(h["at"].endswith("Z") and h["reason"] for h in done["history"])
    code, logs = api("GET", f"jobs/{job['id']}/logs")
    assert code == 200 and logs["data"] == f"hello-from-{job['id']}\n" and logs["eof"] is True
    assert logs["tasks"] == ["main-0"] and logs["next_offset"] == len(logs["data"])
    code, more = api("GET", f"jobs/{job['id']}/logs?offset={logs['next_offset']}")
    assert more["data"] == ""


def test_queue_when_full_and_cancel(api, wait_state):
    code, big = api("POST", "jobs", {"command": "sleep 30", "tasks": [{"gpus": 4}]})
    assert code == 201
    wait_state(big["id"], "running")
    code, waiting = api("POST", "jobs", {"command": "true", "tasks": [{"gpus": 1}]})
    assert code == 201 and waiting["state"] == "queued" and waiting["reason"]
    code, listed = api("GET", "jobs?state=queued")
    assert [j["id"] for j in listed["jobs"]] == [waiting["id"]] and listed["total"] == 1
    code, cancelled = api("DELETE", f"jobs/{waiting['id']}")
    assert code == 200 and cancelled["state"] == "cancelled"
    code, err = api("DELETE", f"jobs/{waiting['id']}")
    assert code == 409 and waiting["id"] in err["error"]
    code, stopped = api("DELETE", f"jobs/{big['id']}")
    assert code == 200 and stopped["state"] == "cancelled", stopped
    assert stopped["exit_code"] in (143, 137, None)


def test_list_filters_and_pagination(api):
    ids = []
    for i in range(5):
        code, job = api("POST", "jobs", {"name": f"j{i}", "command": "true", "tasks": [{"gpus": 0}]})
        ids.append(job["id"])
    code, page = api("GET", "jobs?limit=2&offset=1&user=me&vc=default")
    assert code == 200 and page["total"] == 5 and page["limit"] == 2 and page["offset"] == 1
    assert [j["id"] for j in page["jobs"]] == [ids[3], ids[2]]  # newest first
    code, none = api("GET", "jobs?user=nobody")
    assert none["total"] == 0 and none["jobs"] == []


def _walk(api, page_query, submit_between):
    """Every job a client sees paging GET jobs two at a time, submitting two jobs after each page."""
    seen, cursor, pages = [], {}, 0
    while pages < 20:
        query = "&".join(f"{k}={v}" for k, v in {"limit": 2, "user": "me", **cursor}.items())
        code, page = api("GET", f"jobs?{query}")
        assert code == 200, page
        seen += [j["id"] for j in page["jobs"]]
        pages += 1
        cursor = page_query(page, len(seen))
        if cursor is None:
            return seen
        submit_between()
    return seen  # (never ended by itself)


def test_paging_by_cursor_sees_each_job_once_while_jobs_arrive(api):
    def submit(n=2):
        return [api("POST", "jobs", {"command": "true", "tasks": [{"gpus": 0}]})[1]["id"] for _ in range(n)]

    before = submit(7)[::-1]  # newest first, as GET jobs lists them
    seen = _walk(api, lambda page, _: None if page["next"] is None else {"after": page["next"]}, submit)
    assert seen == before  # each job there when the walk began, once, in order; the new ones are newer
    # the old way, offset=<count seen>, repeats jobs as new ones push the pages down (and may never end)
    code, mine = api("GET", "jobs?user=me&limit=1")
    old = _walk(api, lambda page, n: None if n >= page["total"] else {"offset": n}, submit)
    assert len(old) > len(set(old)), "offset paging no longer shifts: the cursor test above proves nothing"


@pytest.mark.parametrize("query, words", [
    ("after=5&offset=2", "not both"), ("after=0", "must be 1.."), ("after=", "is empty"), ("after=x", "an integer"),
])
def test_a_bad_cursor_is_a_400(api, query, words):
    code, err = api("GET", f"jobs?{query}")
    assert code == 400 and err["field"] == "after" and words in err["error"], err
    code, err = api("GET", f"arrays?{query}")
    assert code == 400 and err["field"] == "after", err


@pytest.mark.parametrize(
    "body, status, field, words",
    [
        ("{not json", 400, None, "not valid JSON"),
        ({"command": "x", "tasks": [{"gpus": -1}]}, 400, "tasks[0].gpus", "whole number of GPUs (0, 1, 2, ...) or a share of one GPU"),
        ({"command": "x", "vc": "nope"}, 400, "vc", "does not exist"),
        ({"command": "x", "tasks": [{"gpus": 64}]}, 400, None, ""),  # more GPUs than the cluster: the core says why
        ({"command": "x", "tasks": [{"gpus": 1, "gpu_type": "H100"}]}, 400, None, ""),
        ([1, 2], 400, None, "JSON object"),
    ],
)
def test_bad_submissions_are_400_and_change_nothing(api, body, status, field, words):
    code, err = api("POST", "jobs", body)
    assert code == status, err
    assert set(err) == {"error", "field"} and err["error"]
    if field:
        assert err["field"] == field
    assert words in err["error"]
    code, listed = api("GET", "jobs")
    assert listed["total"] == 0


@pytest.mark.parametrize(
    "path, field",
    [("jobs?limit=0", "limit"), ("jobs?limit=x", "limit"), ("jobs?offset=-1", "offset"), ("jobs?state=done", "state")],
)
def test_bad_query_parameters(api, path, field):
    code, err = api("GET", path)
    assert code == 400 and err["field"] == field and field in err["error"]


def test_not_found_and_body_limit(api, hive):
    for method, path in [("GET", "jobs/j-999999"), ("DELETE", "jobs/j-999999"), ("GET", "jobs/j-999999/logs"),
                         ("GET", "no/such/thing")]:
        code, err = api(method, path)
        assert code == 404 and err["error"], (method, path)
    hive.max_body_bytes = 1000
    code, err = api("POST", "jobs", {"command": "x", "files": {"a.txt": "y" * 2000}})
    assert code == 413 and "1000 bytes" in err["error"]


def test_cluster_vcs_metrics_spec(api, wait_state):
    code, job = api("POST", "jobs", {"command": "sleep 30", "tasks": [{"gpus": 1}]})
    wait_state(job["id"], "running")
    code, cluster = api("GET", "cluster")
    assert code == 200 and cluster["gpus_total"] == 4 and cluster["gpus_free"] == 3
    assert len(cluster["gpus"]) == 4
    used = [g for g in cluster["gpus"] if g["job"] == job["id"]]
    assert len(used) == 1 and used[0]["state"] == "used" and used[0]["path"][0]
    assert [n["name"] for n in cluster["nodes"]] == ["node-0"]
    code, vcs = api("GET", "vcs")
    (vc,) = vcs["vcs"]
    assert vc["name"] == "default" and vc["guaranteed_gpus"] == 4 and vc["used_gpus"] == 1 and vc["mine"] is True
    code, text = api("GET", "metrics")
    assert code == 200
    assert 'hive_lab_vc_gpus_used{vc="default"} 1.0' in text
    assert 'hive_lab_jobs{state="running"} 1.0' in text
    assert "hive_lab_scheduling_latency_seconds_count 1.0" in text
    assert 'hive_lab_queue_length{vc="default"} 0.0' in text
    code, spec = api("GET", "spec.yaml")
    assert code == 200 and yaml.safe_load(spec) == SPEC
    api("DELETE", f"jobs/{job['id']}")


def test_events_websocket(jp_ws_fetch, api, run):
    ws = run(jp_ws_fetch("hive_lab", "api", "events"))
    hello = json.loads(run(ws.read_message()))
    assert hello["type"] == "hello" and hello["user"]
    code, job = api("POST", "jobs", {"command": "true", "tasks": [{"gpus": 1}]})
    seen = []
    while "succeeded" not in seen:
        msg = json.loads(run(ws.read_message()))
        if msg["type"] == "job" and msg["job"]["id"] == job["id"]:
            assert "spec" not in msg["job"] and "history" not in msg["job"]
            seen.append(msg["job"]["state"])
        elif msg["type"] == "cluster":
            assert msg["gpus_total"] == 4
    assert seen[0] in ("scheduled", "submitted") and "running" in seen
    ws.close()


def test_drain_is_admin_only_and_blocks_new_work(api, wait_state):
    code, r = api("POST", "nodes/node-0/gpus/0/drain")
    assert code == 200 and r == {"node": "node-0", "gpu": 0, "drained": True}
    code, cluster = api("GET", "cluster")
    assert [g["drained"] for g in cluster["gpus"]] == [True, False, False, False]
    code, job = api("POST", "jobs", {"command": "sleep 30", "tasks": [{"gpus": 4}]})
    assert code == 201 and job["state"] == "queued"
    code, _ = api("POST", "nodes/node-0/gpus/0/undrain")
    wait_state(job["id"], "running")
    code, err = api("POST", "nodes/nowhere/drain")
    assert code == 404 and "nowhere" in err["error"]
    code, err = api("POST", "nodes/node-0/gpus/9/drain")
    assert code == 404
    api("DELETE", f"jobs/{job['id']}")
