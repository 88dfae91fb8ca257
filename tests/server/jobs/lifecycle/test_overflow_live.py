"""``c.HiveLabApp.overflow = True`` on a real Jupyter server (issue 12): a guaranteed job its VC cannot
place now runs opportunistically in another VC's idle GPUs, is preempted without using a retry when that
VC needs them back, runs again when its own VC's GPUs free up, and survives a SIGKILL restart."""

from __future__ import annotations


from fixtures.live_server import LiveServer
from waiting import wait_until

CLUSTER = {"nodes": 2, "gpus_per_node": 2, "gpu_type": "T4", "vcs": {"a": 2, "b": 2}}
USERS = {"users": {"ann": {}, "bob": {}}, "vc_access": {"ann": ["a"], "bob": ["b"]}}


def server(path, overflow):
    return LiveServer(path, cluster_config=CLUSTER, **USERS,
                      config={"HiveLabApp": {"overflow": overflow, "preemption_grace_s": 1}})


def submit(srv, user, vc, gpus=2, command="sleep 600"):
    r = srv.request("POST", "jobs", user=user,
                    json={"vc": vc, "command": command, "max_retries": 0, "tasks": [{"gpus": gpus}]})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def get(srv, user, job_id):
    return srv.request("GET", f"jobs/{job_id}", user=user).json()


def nodes(job):
    return {p["node"] for p in job["placement"]}


def no_shadow_anywhere(srv, user):
    for path in ("jobs", "cluster"):
        r = srv.request("GET", path, user=user)
        assert r.status_code == 200, r.text
        assert "@overflow" not in r.text, (path, r.text)


def test_overflow_runs_in_idle_gpus_yields_them_back_and_runs_again(tmp_path):
    srv = server(tmp_path / "srv", True).start()
    try:
        own = submit(srv, "ann", "a")
        own_job = srv.wait_for_job(own, "running", user="ann")
        assert own_job["opportunistic"] is False
        over = submit(srv, "ann", "a")
        job = srv.wait_for_job(over, "running", user="ann")
        assert job["opportunistic"] is True and job["id"] == over
        assert nodes(job).isdisjoint(nodes(own_job))  # b's idle GPUs
        assert any("(overflow)" in h["reason"] and "outside VC a" in h["reason"] for h in job["history"]), job
        no_shadow_anywhere(srv, "ann")

        # b wants its GPUs back: the overflowed job is preempted and queued again, no retry used
        mine = submit(srv, "bob", "b")
        srv.wait_for_job(mine, "running", user="bob")
        job = srv.wait_for_job(over, "queued", user="ann")
        assert job["retries"] == 0, job
        assert any("no retry used" in h["reason"] for h in job["history"]), job["history"]
        no_shadow_anywhere(srv, "ann")

        # a's own GPUs free up: it runs there, as guaranteed work
        srv.request("DELETE", f"jobs/{own}", user="ann")
        job = srv.wait_for_job(over, "running", user="ann", timeout=30)
        assert job["opportunistic"] is False and job["retries"] == 0, job
        assert get(srv, "bob", mine)["state"] == "running"  # nobody's guaranteed work was preempted
        for j, u in ((over, "ann"), (mine, "bob")):
            srv.request("DELETE", f"jobs/{j}", user=u)
    finally:
        srv.close()


def test_overflow_off_keeps_a_guaranteed_job_in_its_vc(tmp_path):
    srv = server(tmp_path / "srv", False).start()
    try:
        own = submit(srv, "ann", "a")
        srv.wait_for_job(own, "running", user="ann")
        waits = submit(srv, "ann", "a")
        # a job submitted after it that fits b's idle GPUs starts: so the scheduler has decided about it
        other = submit(srv, "bob", "b")
        srv.wait_for_job(other, "running", user="bob")
        assert get(srv, "ann", waits)["state"] == "queued"
    finally:
        srv.close()


def test_overflowed_job_survives_sigkill_restart(tmp_path):
    srv = server(tmp_path / "srv", True).start()
    try:
        own = submit(srv, "ann", "a")
        srv.wait_for_job(own, "running", user="ann")
        over = submit(srv, "ann", "a")
        before = srv.wait_for_job(over, "running", user="ann")
        assert before["opportunistic"] is True
        waiting = submit(srv, "ann", "a")  # no idle GPUs left: it waits (and its shadow with it)
        wait_until(lambda: get(srv, "ann", waiting)["state"] == "queued")

        srv.kill()
        srv.start()
        after = srv.wait_for_job(over, "running", user="ann")
        assert after["opportunistic"] is True and after["placement"] == before["placement"], after
        no_shadow_anywhere(srv, "ann")

        # still preemptible, without using a retry
        mine = submit(srv, "bob", "b")
        srv.wait_for_job(mine, "running", user="bob")
        job = srv.wait_for_job(over, "queued", user="ann")
        assert job["retries"] == 0, job
        # the waiting job got its shadow back: when a's GPUs free, one of a's jobs runs there and
        # nothing runs twice
        srv.request("DELETE", f"jobs/{own}", user="ann")
        wait_until(lambda: "running" in (get(srv, "ann", over)["state"], get(srv, "ann", waiting)["state"]))
        for j, u in ((over, "ann"), (waiting, "ann"), (mine, "bob"), (own, "ann")):
            srv.request("DELETE", f"jobs/{j}", user=u)
    finally:
        srv.close()
