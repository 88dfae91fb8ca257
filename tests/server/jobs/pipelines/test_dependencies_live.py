"""Job dependencies (issue 27) through a REAL Jupyter server with hive-lab (local launcher, real
processes, SQLite): held jobs say what they wait for and take no GPUs, never-met dependencies end the
waiting job with the reason, forward references (the only way to a cycle) and other users' jobs are
refused, and a held job survives a restart and starts once its dependency is met."""

import os

import pytest

USERS = {"ann": {}, "bob": {}, "carol": {}}


@pytest.fixture
def srv(live_server_factory):
    return live_server_factory(users=USERS, vc_access={"*": ["default"]}, admin_users=["carol"])


def gated(tmp_path, name):
    """A command that runs until the test writes its exit code into ``<tmp>/<name>`` (``release``)."""
    path = tmp_path / name
    return f"while [ ! -f {path} ]; do sleep 0.02; done; exit $(cat {path})", path


def release(gate, code: int) -> None:
    """The gated command exits with ``code``: the file appears whole (written beside it, then renamed), so the
    command never reads it empty and exits 0 (``write_text`` creates it empty first: a busy CI run caught that)."""
    tmp = gate.with_name(gate.name + ".tmp")
    tmp.write_text(str(code))
    os.replace(tmp, gate)


def submit(srv, user, body, status=201):
    r = srv.request("POST", "jobs", user=user, json={"tasks": [{"gpus": 1}], **body})
    assert r.status_code == status, r.text
    return r.json()


def test_a_pipeline_waits_then_runs_or_ends_with_the_reason(srv, tmp_path):
    train_cmd, train_gate = gated(tmp_path, "train")
    train = submit(srv, "ann", {"name": "train", "command": train_cmd})["id"]
    srv.wait_for_job(train, "running", user="ann")
    evaluate = submit(srv, "ann", {"name": "eval", "command": "true", "after": [train]})
    assert evaluate["state"] == "queued" and evaluate["reason"] == f"waiting for {train} to succeed"
    on_failure = submit(srv, "ann", {"command": "true", "depends_on": [{"job": train, "when": "failed"}]})["id"]
    cleanup = submit(srv, "ann", {"command": "true", "depends_on": [{"job": train, "when": "ended"}]})["id"]
    chained = submit(srv, "ann", {"command": "true", "after": [on_failure]})["id"]
    # a job submitted after them, on the same free GPUs, starts: the held ones are not in the core's queue
    later = submit(srv, "ann", {"command": "sleep 0.01"})["id"]
    srv.wait_for_job(later, "running", "succeeded", user="ann")
    for job_id in (evaluate["id"], on_failure, cleanup):
        job = srv.request("GET", f"jobs/{job_id}", user="ann").json()
        assert job["state"] == "queued" and job["reason"].startswith(f"waiting for {train} to "), job
        assert job["placement"] == [] and job["spec"]["depends_on"][0]["job"] == train

    release(train_gate, 0)
    srv.wait_for_job(train, "succeeded", user="ann")
    srv.wait_for_job(evaluate["id"], "succeeded", user="ann")
    srv.wait_for_job(cleanup, "succeeded", user="ann")
    never = srv.wait_for_job(on_failure, "cancelled", user="ann")
    assert never["reason"] == f"dependency never met: {train} succeeded, so it will never fail"
    assert srv.wait_for_job(chained, "cancelled", user="ann")["reason"] == \
        f"dependency never met: {on_failure} cancelled, so it will never succeed"

    # already decided at submit: ends at once, with the reason
    late = submit(srv, "ann", {"command": "true", "depends_on": [{"job": train, "when": "failed"}]})
    assert late["state"] == "cancelled" and "will never fail" in late["reason"]
    assert submit(srv, "ann", {"command": "true", "after": train})["state"] in ("scheduled", "running", "succeeded")


def test_forward_references_other_users_and_bad_forms_are_refused(srv, tmp_path):
    mine = submit(srv, "ann", {"command": "true"})["id"]
    seq = int(mine.split("-")[1])
    for ref in (f"j-{seq + 1:06d}", f"j-{seq + 2:06d}", "j-999999"):  # its own future id, a later one: no cycle can form
        r = srv.request("POST", "jobs", user="ann", json={"command": "true", "after": [ref]})
        assert r.status_code == 400 and "does not exist" in r.json()["error"], r.text
        assert r.json()["field"] == "depends_on[0].job"
    r = srv.request("POST", "jobs", user="bob", json={"command": "true", "after": [mine]})
    assert r.status_code == 403 and "belongs to another user" in r.json()["error"]
    assert submit(srv, "carol", {"command": "true", "after": [mine]})["id"]  # an admin may
    for body, field in (({"after": 5}, "after"), ({"depends_on": [{"job": mine, "when": "maybe"}]}, "depends_on[0].when"),
                        ({"depends_on": [{"job": mine, "extra": 1}]}, "depends_on[0].extra")):
        r = srv.request("POST", "jobs", user="ann", json={"command": "true", **body})
        assert r.status_code == 400 and r.json()["field"] == field, r.text
    jobs = srv.request("GET", "jobs", user="ann").json()["jobs"]
    assert [j["id"] for j in jobs if j["user"] == "ann"] == [mine]  # nothing refused was stored


def test_a_held_job_survives_a_restart_and_starts_when_its_dependency_is_met(srv, tmp_path):
    cmd, gate = gated(tmp_path, "first")
    first = submit(srv, "ann", {"command": cmd})["id"]
    srv.wait_for_job(first, "running", user="ann")
    second = submit(srv, "ann", {"command": "true", "after": [first]})["id"]
    srv.restart()  # the first job's task runs on through the restart; the second is recovered held
    job = srv.wait_for_job(second, "queued", user="ann")
    assert job["reason"] == f"waiting for {first} to succeed"
    release(gate, 3)
    srv.wait_for_job(first, "failed", user="ann")
    assert srv.wait_for_job(second, "cancelled", user="ann")["reason"] == \
        f"dependency never met: {first} failed, so it will never succeed"


def test_a_job_can_wait_for_a_whole_array(srv, tmp_path):
    """An array counts as ended when all its elements did, succeeded when they all did (issue 27)."""
    cmd, gate = gated(tmp_path, "elements")
    r = srv.request("POST", "arrays", user="ann", json={"command": cmd, "tasks": [{"gpus": 1}], "array": "0-2"})
    assert r.status_code == 201, r.text
    array = r.json()["id"]
    summary = submit(srv, "ann", {"name": "summary", "command": "true", "after": [array]})
    assert summary["state"] == "queued" and summary["reason"] == f"waiting for {array} to succeed"
    on_failure = submit(srv, "ann", {"command": "true", "depends_on": [{"job": array, "when": "failed"}]})["id"]
    r = srv.request("POST", "jobs", user="bob", json={"command": "true", "after": [array]})
    assert r.status_code == 403 and "belongs to another user" in r.json()["error"]
    release(gate, 0)
    srv.wait_for_job(summary["id"], "succeeded", user="ann", timeout=60)
    never = srv.wait_for_job(on_failure, "cancelled", user="ann")
    assert never["reason"] == f"dependency never met: {array} succeeded, so it will never fail"

    failing = srv.request("POST", "arrays", user="ann",
                          json={"command": 'exit $(( HIVE_ARRAY_INDEX == 1 ))', "tasks": [{"gpus": 1}],
                                "array": "0-2"}).json()["id"]
    after_failing = submit(srv, "ann", {"command": "true", "after": [failing]})["id"]
    assert srv.wait_for_job(after_failing, "cancelled", user="ann", timeout=60)["reason"] == \
        f"dependency never met: {failing} failed, so it will never succeed"
