"""Per-user limits in a VC against a real server with several users (issue 14, Limits).

cv-101 (4 GPUs): ann and bob (group students) are students, carol is an admin, dave may not use it.
The config allows every student 1 GPU and priority 10 at most."""

import pytest

from fixtures.live_server import LiveServer

USERS = {"ann": {"groups": ["students"]}, "bob": {"groups": ["students"]}, "carol": {}, "dave": {}}
CONFIG_LIMITS = {"cv-101": {"default": {"max_gpus": 1, "max_priority": 10}}}
SLEEP = {"vc": "cv-101", "command": "sleep 120", "tasks": [{"gpus": 1}]}


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    server = LiveServer(
        tmp_path_factory.mktemp("limits"),
        cluster_config={"nodes": 1, "gpus_per_node": 4, "gpu_type": "T4", "vcs": {"cv-101": 3, "other": 1}},
        users=USERS, vc_access={"@students": ["cv-101"]}, admin_users=["carol"],
        config={"HiveLabApp": {"user_limits": CONFIG_LIMITS, "stop_grace_s": 1}},
    ).start()
    yield server
    server.close()


def submit(srv, user, **over):
    return srv.request("POST", "jobs", user=user, json={**SLEEP, **over})


def limits(srv, user="carol"):
    return srv.request("GET", "vcs/cv-101/limits", user=user)


def test_limits_from_the_config_are_shown_to_users(srv):
    r = limits(srv, "ann")
    assert r.status_code == 200, r.text
    assert r.json() == {"vc": "cv-101", "default": {"max_gpus": 1, "max_priority": 10}, "groups": {}, "users": {},
                        "source": "config"}
    me = srv.request("GET", "me", user="ann").json()
    assert me["limits"] == {"cv-101": {"max_gpus": 1, "max_priority": 10}}
    assert limits(srv, "dave").status_code == 403  # may not use the VC
    r = srv.request("GET", "vcs/nope/limits", user="carol")
    assert r.status_code == 404 and "does not exist" in r.json()["error"]


def test_at_the_limit_a_student_waits_with_the_reason_while_another_starts_then_a_put_starts_it(srv):
    a1 = submit(srv, "ann").json()["id"]
    srv.wait_for_job(a1, "running", user="ann")
    r = submit(srv, "ann")
    assert r.status_code == 201, r.text
    a2 = r.json()["id"]
    job = srv.wait_for_job(a2, "queued", user="ann")
    assert job["reason"] == "you hold 1 of your 1 GPU in cv-101; the next starts when one of yours ends"
    b1 = submit(srv, "bob").json()["id"]  # submitted after ann's waiting job: starts
    srv.wait_for_job(b1, "running", user="bob")
    assert srv.request("GET", f"jobs/{a2}", user="ann").json()["state"] == "queued"

    # a student may not raise their own limit
    r = srv.request("PUT", "vcs/cv-101/limits", user="ann", json={"users": {"ann": {"max_gpus": 4}}})
    assert r.status_code == 403 and "only admins" in r.json()["error"]
    assert srv.request("GET", f"jobs/{a2}", user="ann").json()["state"] == "queued"

    body = {"default": {"max_gpus": 1, "max_priority": 10, "max_queued_jobs": 1}, "users": {"ann": {"max_gpus": 2}}}
    r = srv.request("PUT", "vcs/cv-101/limits", user="carol", json=body)
    assert r.status_code == 200, r.text
    assert r.json() == {"vc": "cv-101", **body, "groups": {}, "source": "store"}
    srv.wait_for_job(a2, "running", user="ann")  # applied at once
    assert srv.request("GET", "me", user="ann").json()["limits"]["cv-101"] == {
        "max_gpus": 2, "max_priority": 10, "max_queued_jobs": 1}
    for jid in (a1, a2, b1):
        srv.request("DELETE", f"jobs/{jid}", user="carol")


@pytest.mark.parametrize("body, field", [
    ({"default": {"max_gpu": 1}}, "default.max_gpu"),
    ({"users": {"ann": {"max_gpus": -1}}}, "users.ann.max_gpus"),
    ({"groups": {"students": {"max_kernels": "one"}}}, "groups.students.max_kernels"),
    ({"default": {"max_gpus": 1}, "everyone": {}}, "everyone"),
    ([{"max_gpus": 1}], None),
])
def test_bad_bodies_are_400_naming_the_key_and_change_nothing(srv, body, field):
    before = limits(srv).json()
    r = srv.request("PUT", "vcs/cv-101/limits", user="carol", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["field"] == field
    if field:
        assert field in r.json()["error"]
    assert limits(srv).json() == before
    r = srv.request("PUT", "vcs/cv-101/limits", user="carol", data=b"{not json")
    assert r.status_code == 400


def test_what_the_limits_never_allow_is_refused_at_submit(srv):
    r = submit(srv, "bob", priority=50)
    assert r.status_code == 403, r.text
    assert r.json()["field"] == "priority" and "ask for priority 10 or less" in r.json()["error"]
    r = submit(srv, "bob", tasks=[{"gpus": 1, "count": 2}])
    assert r.status_code == 403 and r.json()["field"] == "tasks" and "at most 1 GPU in VC cv-101" in r.json()["error"], r.text
    assert submit(srv, "bob", priority="opportunistic", tasks=[{"gpus": 1}], command="true").status_code == 201  # opportunistic


def test_max_queued_jobs_is_429(srv):
    srv.request("PUT", "vcs/cv-101/limits", user="carol",
                json={"default": {"max_gpus": 1, "max_queued_jobs": 1}}).raise_for_status()
    first = submit(srv, "bob").json()["id"]
    srv.wait_for_job(first, "running", user="bob")
    second = submit(srv, "bob")
    assert second.status_code == 201
    srv.wait_for_job(second.json()["id"], "queued", user="bob")
    r = submit(srv, "bob")
    assert r.status_code == 429, r.text
    assert "you have 1 of your 1 queued job in VC cv-101" in r.json()["error"]
    for jid in (first, second.json()["id"]):
        srv.request("DELETE", f"jobs/{jid}", user="carol")


def test_stored_limits_survive_a_restart_and_still_gate_by_group(srv):
    # the limit comes from ann's group only: after the restart her queued job must still be gated by it
    body = {"default": {}, "groups": {"students": {"max_gpus": 1, "max_running_jobs": 1}}, "users": {}}
    srv.request("PUT", "vcs/cv-101/limits", user="carol", json=body).raise_for_status()
    a1 = submit(srv, "ann").json()["id"]
    srv.wait_for_job(a1, "running", user="ann")
    a2 = submit(srv, "ann").json()["id"]
    srv.wait_for_job(a2, "queued", user="ann")
    srv.kill()
    srv.restart()
    got = limits(srv, "ann").json()
    assert got == {"vc": "cv-101", **body, "source": "store"}
    assert srv.request("GET", "me", user="ann").json()["limits"] == {"cv-101": {"max_gpus": 1, "max_running_jobs": 1}}
    job = srv.request("GET", f"jobs/{a2}", user="ann").json()
    assert job["state"] == "queued" and job["reason"].startswith("you hold 1 of your 1 GPU in cv-101")
    srv.request("DELETE", f"jobs/{a1}", user="carol")
    srv.wait_for_job(a2, "running", user="ann")
    srv.request("DELETE", f"jobs/{a2}", user="carol")
