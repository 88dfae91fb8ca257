"""Job arrays and sweeps against a real Jupyter server with hive-lab (local launcher, simulated GPUs).

Each element's command writes a marker per index; the throttle is checked by the elements themselves (each
counts the elements alive beside it), not by sampling the server."""

import json
import pathlib

import pytest

from fixtures.live_server import LiveServer
from waiting import wait_until

CLUSTER = {"nodes": 1, "gpus_per_node": 4, "gpu_type": "T4", "vcs": {"a": 2, "b": 2}}
USERS = {"ann": {}, "bob": {}, "carol": {}}

# start: a marker line for this index; enter the "alive" dir and note how many are alive; wait for go; leave
ELEMENT = (
    'd={d}; i=$HIVE_ARRAY_INDEX; echo "$HIVE_JOB_ID" >> $d/ran-$i; '
    'mkdir $d/alive/$i; ls $d/alive | wc -l >> $d/seen; '
    'while [ ! -e $d/go ]; do sleep 0.05; done; rmdir $d/alive/$i'
)


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    server = LiveServer(tmp_path_factory.mktemp("arrays"), cluster_config=CLUSTER, users=USERS,
                        vc_access={"ann": ["a"], "bob": ["b"]}, admin_users=["carol"]).start()
    yield server
    server.close()


def element_dir(tmp: pathlib.Path) -> pathlib.Path:
    (tmp / "alive").mkdir(parents=True)
    tmp.chmod(0o777)
    (tmp / "alive").chmod(0o777)
    return tmp


def get_array(srv, array_id, user=None, **params):
    r = srv.request("GET", f"arrays/{array_id}", user=user, params=params)
    assert r.status_code == 200, r.text
    return r.json()


def wait_counts(srv, array_id, what, pred, user=None, timeout=60):
    return wait_until(lambda: (lambda a: a if pred(a["counts"]) else None)(get_array(srv, array_id, user)),
                      lambda: f"{what}: {get_array(srv, array_id, user)['counts']}", timeout=timeout)


def test_throttle_holds_and_every_index_runs_once_across_a_restart(tmp_path):
    d = element_dir(tmp_path / "els")
    srv = LiveServer(tmp_path / "srv", cluster_config=CLUSTER).start()
    try:
        r = srv.request("POST", "jobs", json={"name": "sweep", "array": "0-9%3", "command": ELEMENT.format(d=d),
                                              "tasks": [{"gpus": 1}]})
        assert r.status_code == 201, r.text
        arr = r.json()
        assert arr["id"].startswith("a-") and arr["count"] == 10 and arr["throttle"] == 3
        assert r.headers["Location"].endswith(f"/hive_lab/api/arrays/{arr['id']}")
        wait_counts(srv, arr["id"], "3 running", lambda c: c["running"] == 3)
        # the 3 alive are all there is: the rest wait in the service, not in the core
        a = get_array(srv, arr["id"])
        assert a["counts"]["pending"] == 7 and a["state"] == "running"
        srv.kill()
        srv.restart()
        a = get_array(srv, arr["id"])  # recovered: the 3 still run, and count against the throttle
        assert a["counts"]["running"] == 3 and a["counts"]["pending"] == 7, a["counts"]
        (d / "go").touch()
        wait_counts(srv, arr["id"], "all succeeded", lambda c: c["succeeded"] == 10, timeout=120)
        for i in range(10):
            lines = (d / f"ran-{i}").read_text().split()
            assert len(lines) == 1, f"index {i} ran {len(lines)} times: {lines}"
        seen = [int(x) for x in (d / "seen").read_text().split()]
        assert len(seen) == 10 and max(seen) <= 3, seen
        a = get_array(srv, arr["id"], limit=100)
        assert a["state"] == "ended"
        assert [e["index"] for e in a["elements"]] == list(range(10))
        ids = {e["job_id"] for e in a["elements"]}
        assert len(ids) == 10 and all(e["state"] == "succeeded" for e in a["elements"])
        job = srv.request("GET", f"jobs/{a['elements'][4]['job_id']}").json()
        assert job["array_id"] == arr["id"] and job["array_index"] == 4 and job["name"] == "sweep[4]"
    finally:
        srv.close()


def test_a_sweep_gives_each_element_its_parameters(srv, tmp_path):
    d = tmp_path / "sweep"
    d.mkdir()
    d.chmod(0o777)
    cmd = (f'echo "$HIVE_ARRAY_INDEX $HIVE_ARRAY_COUNT $HIVE_PARAM_LR $HIVE_PARAM_BS '
           f'$(cat $HIVE_PARAMS_FILE)" > {d}/out-$HIVE_ARRAY_INDEX')
    r = srv.request("POST", "arrays", user="ann",
                    json={"vc": "a", "command": cmd, "sweep": {"lr": [0.1, 0.01], "bs": [32, 64]}, "array": "%2"})
    assert r.status_code == 201, r.text
    arr = r.json()
    assert arr["count"] == 4 and arr["throttle"] == 2 and arr["sweep"] == {"bs": [32, 64], "lr": [0.1, 0.01]}
    wait_counts(srv, arr["id"], "all succeeded", lambda c: c["succeeded"] == 4, user="ann")
    want = [(32, 0.1), (32, 0.01), (64, 0.1), (64, 0.01)]  # names sorted, the last varying fastest
    for i, (bs, lr) in enumerate(want):
        idx, count, lr_env, bs_env, params = (d / f"out-{i}").read_text().split(" ", 4)
        assert (int(idx), int(count), float(lr_env), int(bs_env)) == (i, 4, lr, bs)
        assert json.loads(params) == {"bs": bs, "lr": lr}
    els = get_array(srv, arr["id"], user="ann")["elements"]
    assert [e["params"] for e in els] == [{"bs": bs, "lr": lr} for bs, lr in want]


@pytest.mark.parametrize("body, field, words", [
    ({"array": ""}, "array", "at least one index"),
    ({"array": "%8"}, "array", "only goes with a sweep"),
    ({"array": "0-9%0"}, "array", "throttle"),
    ({"array": "0-9%x"}, "array", "throttle"),
    ({"array": "9-0"}, "array", "write it 0-9"),
    ({"array": "0-10000"}, "array", "at most 10000"),
    ({"array": "1,a"}, "array", "'a' is not an index"),
    ({"array": 5}, "array", "give a string"),
    ({"sweep": {}}, "sweep", "lr"),
    ({"sweep": {"lr": []}}, "sweep.lr", "non-empty list"),
    ({"sweep": {"lr": [1, 1]}}, "sweep.lr", "given twice"),
    ({"sweep": {"a-b": [1]}}, "sweep", "HIVE_PARAM_"),
    ({"sweep": {"lr": [{"x": 1}]}}, "sweep.lr", "strings, numbers"),
    ({"sweep": {"a": list(range(101)), "b": list(range(100))}}, "sweep", "more than 10000"),
    ({"sweep": {"lr": [1, 2]}, "array": "0-1%2"}, "array", "give only a throttle"),
    ({"sweep": {"lr": [1]}, "files": {"hive-params.json": "x"}}, "files", "name your file otherwise"),
])
def test_bad_arrays_are_refused_saying_what_to_fix(srv, body, field, words):
    before = srv.request("GET", "arrays", user="ann").json()["total"]
    r = srv.request("POST", "jobs", user="ann", json={"vc": "a", "command": "true", **body})
    assert r.status_code == 400, r.text
    assert r.json()["field"] == field and words in r.json()["error"], r.json()
    assert srv.request("GET", "arrays", user="ann").json()["total"] == before  # nothing half-applied


def test_post_arrays_needs_array_or_sweep(srv):
    r = srv.request("POST", "arrays", user="ann", json={"vc": "a", "command": "true"})
    assert r.status_code == 400 and "give array" in r.json()["error"]


def test_cancel_some_then_all_pause_resume_and_change_the_throttle(srv, tmp_path):
    d = element_dir(tmp_path / "ctl")
    r = srv.request("POST", "arrays", user="ann", json={"vc": "a", "array": "0-19%2", "command": ELEMENT.format(d=d),
                                                         "tasks": [{"gpus": 0}]})  # the throttle is the bound
    arr = r.json()["id"]
    wait_counts(srv, arr, "2 running", lambda c: c["running"] == 2, user="ann")
    # some: a running one (0) and pending ones (10-12)
    r = srv.request("POST", f"arrays/{arr}/cancel", user="ann", json={"indices": "0,10-12"})
    assert r.status_code == 200, r.text
    wait_counts(srv, arr, "4 cancelled", lambda c: c["cancelled"] == 4 and c["running"] == 2, user="ann")
    els = {e["index"]: e for e in get_array(srv, arr, user="ann", limit=20)["elements"]}
    assert els[0]["state"] == "cancelled" and els[0]["job_id"]
    assert els[11]["state"] == "cancelled" and els[11]["job_id"] is None
    r = srv.request("POST", f"arrays/{arr}/cancel", user="ann", json={"indices": "30"})
    assert r.status_code == 400 and r.json()["field"] == "indices" and "no element 30" in r.json()["error"]
    # the throttle: up to 3 now; bad values refused
    r = srv.request("PATCH", f"arrays/{arr}", user="ann", json={"throttle": 0})
    assert r.status_code == 400 and r.json()["field"] == "throttle"
    r = srv.request("PATCH", f"arrays/{arr}", user="ann", json={"throttle": 3})
    assert r.status_code == 200 and r.json()["throttle"] == 3
    wait_counts(srv, arr, "3 running", lambda c: c["running"] == 3, user="ann")
    # pause: nothing more is released and the elements not ended are paused; resume: they go on
    r = srv.request("POST", f"arrays/{arr}/pause", user="ann")
    assert r.status_code == 200 and r.json()["held"] is True
    wait_counts(srv, arr, "3 paused", lambda c: c["paused"] == 3 and c["running"] == 0, user="ann")
    assert get_array(srv, arr, user="ann")["state"] == "held"
    r = srv.request("POST", f"arrays/{arr}/resume", user="ann")
    assert r.status_code == 200 and r.json()["held"] is False
    wait_counts(srv, arr, "3 running again", lambda c: c["running"] == 3, user="ann")
    # all: nothing pending is ever released, the running ones stop
    r = srv.request("DELETE", f"arrays/{arr}", user="ann")
    assert r.status_code == 200, r.text
    a = wait_counts(srv, arr, "all cancelled", lambda c: c["cancelled"] == 20, user="ann")
    assert a["state"] == "ended" and a["counts"]["pending"] == 0


def test_only_the_owner_and_admins_see_or_touch_an_array(srv):
    arr = srv.request("POST", "arrays", user="ann", json={"vc": "a", "array": "0-3%1", "command": "true"}).json()["id"]
    assert srv.request("GET", f"arrays/{arr}", user="bob").status_code == 403
    assert srv.request("DELETE", f"arrays/{arr}", user="bob").status_code == 403
    assert srv.request("PATCH", f"arrays/{arr}", user="bob", json={"throttle": 2}).status_code == 403
    assert srv.request("POST", f"arrays/{arr}/pause", user="bob").status_code == 403
    assert srv.request("GET", "arrays", user="bob", params={"user": "ann"}).status_code == 403
    assert arr not in [a["id"] for a in srv.request("GET", "arrays", user="bob").json()["arrays"]]
    assert srv.request("GET", f"arrays/{arr}", user="carol").status_code == 200
    assert arr in [a["id"] for a in srv.request("GET", "arrays", user="carol", params={"user": "*"}).json()["arrays"]]
    assert srv.request("GET", "arrays/a-999999", user="ann").status_code == 404
    wait_counts(srv, arr, "all succeeded", lambda c: c["succeeded"] == 4, user="ann")


def test_elements_are_jobs_of_their_owner_under_the_owners_limits(tmp_path):
    """max_queued_jobs holds the rest of the array back (the array says why) until a slot frees;
    max_running_jobs bounds the elements as it bounds any of the owner's jobs."""
    d = element_dir(tmp_path / "lim")
    srv = LiveServer(tmp_path / "srv", cluster_config=CLUSTER, users={"ann": {}}, vc_access={"ann": ["a"]},
                     config={"HiveLabApp": {"user_limits": {"a": {"default": {"max_queued_jobs": 2,
                                                                                "max_running_jobs": 1}}}}}).start()
    try:
        r = srv.request("POST", "arrays", user="ann", json={"vc": "a", "array": "0-4", "tasks": [{"gpus": 0}],
                                                            "command": ELEMENT.format(d=d)})
        assert r.status_code == 201, r.text
        arr = r.json()["id"]
        a = wait_counts(srv, arr, "1 running, 2 queued, 2 pending",
                        lambda c: c["running"] == 1 and c["queued"] == 2 and c["pending"] == 2, user="ann")
        assert "queued" in a["reason"], a  # why the rest is not released
        (d / "go").touch()
        wait_counts(srv, arr, "all succeeded", lambda c: c["succeeded"] == 5, user="ann", timeout=120)
        assert max(int(x) for x in (d / "seen").read_text().split()) == 1
        assert all(len((d / f"ran-{i}").read_text().split()) == 1 for i in range(5))
    finally:
        srv.close()


def test_without_a_throttle_the_core_gets_at_most_the_window(srv, tmp_path):
    """100 elements, 1 GPU each, on 4 GPUs: the ones that run, then at most 32 waiting in the core; the
    rest stay pending in the service."""
    r = srv.request("POST", "arrays", user="ann", json={"vc": "a", "array": "0-99", "command": "sleep 600"})
    arr = r.json()["id"]
    try:
        a = wait_counts(srv, arr, "32 queued", lambda c: c["queued"] == 32, user="ann")
        c = a["counts"]
        assert c["pending"] == 100 - 32 - c["running"] - c["scheduled"] - c["submitted"], c
        assert c["pending"] >= 60
    finally:
        srv.request("DELETE", f"arrays/{arr}", user="ann")
    wait_counts(srv, arr, "all cancelled", lambda c: c["cancelled"] == 100, user="ann")
