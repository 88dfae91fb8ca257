"""Replaying your own cluster from the user side (issue 28), against a REAL server (subprocess, local
launcher, real processes): ``hive-lab admin history`` -> ``hive-lab simulate --history`` (the live check,
a bigger VC, the capacity search) and ``hive_lab.replay`` with its charts, as an admin; refused to a student.

Times here are the server's wall clock, so the assertions are relations (the check holds, a bigger VC
waits less, the capacity answer), never figures; exact waits are in tests/server/usage/test_history_week.py.
"""

import json
import pathlib
import subprocess
import sys

import pytest

CLUSTER = {"nodes": 1, "gpus_per_node": 4, "gpu_type": "T4", "vcs": {"cv-101": 1, "lab": 3}}
USERS = {"ann": {"groups": ["cv-101"]}, "bob": {"groups": ["cv-101"]}, "carol": {"groups": ["staff"]}}


@pytest.fixture(scope="module")
def week(tmp_path_factory):
    """Three 1-GPU jobs of 5 s, of ann and bob in cv-101 (1 GPU), submitted at once: they run one after the
    other (and a VC of 3 GPUs would start all three at once; of 2, the third after ~5 s)."""
    from fixtures.live_server import LiveServer

    srv = LiveServer(tmp_path_factory.mktemp("replay-srv"), cluster_config=CLUSTER, users=USERS,
                     vc_access={"@cv-101": ["cv-101"]}, admin_users=["carol"],
                     config={"HiveLabApp": {"overflow": False}}).start()
    try:
        ids = []
        for user in ("ann", "bob", "ann"):
            r = srv.request("POST", "jobs", user=user, json={"vc": "cv-101", "command": "sleep 5",
                                                              "tasks": [{"gpus": 1}]})
            assert r.status_code == 201, r.text
            ids.append(r.json()["id"])
        for job_id in ids:
            srv.wait_for_job(job_id, "succeeded", user="carol", timeout=60)
        yield srv, ids
    finally:
        srv.close()


def hive_lab(*args):
    return subprocess.run([sys.executable, "-m", "hive_lab.cli", *args], capture_output=True, text=True, timeout=300)


def test_admin_history_then_simulate_history(week, tmp_path):
    srv, ids = week
    out = tmp_path / "week.csv"
    r = hive_lab("admin", "history", "--since", "7d", "--out", str(out), "--url", srv.url, "--token", srv.tokens["carol"])
    assert r.returncode == 0, r.stderr
    assert "--no-overflow" in r.stderr and "week.cluster.json" in r.stderr  # how to replay it
    lines = out.read_text().splitlines()
    assert lines[0].startswith("job_id,submit_time_s,duration_s,num_gpus,gpu_type,vc,user,status,priority")
    assert [line.split(",")[0] for line in lines[1:]] == ids
    assert "ann" not in out.read_text() and "user-001" in out.read_text()  # pseudonymised
    cluster = tmp_path / "week.cluster.json"
    assert json.loads(cluster.read_text())["virtualClusters"].keys() == {"cv-101", "lab"}

    r = hive_lab("simulate", "--history", str(out), "--cluster", str(cluster), "--no-overflow", "--vc-gpus", "cv-101=3",
                 "--capacity", "cv-101", "--within", "1s", "--target", "1.0", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["check"]["ok"] and doc["check"]["jobs"] == 3, doc["check"]
    live, bigger = doc["scenarios"]
    assert bigger["by_vc"]["cv-101"]["guaranteed_gpus"] == 3
    assert bigger["by_vc"]["cv-101"]["avg_wait_s"] < live["by_vc"]["cv-101"]["avg_wait_s"]
    assert doc["capacity"]["gpus"] == 3  # all three at once: three GPUs
    text = hive_lab("simulate", "--history", str(out), "--cluster", str(cluster), "--no-overflow", "--vc-gpus", "cv-101=3")
    assert text.returncode == 0 and "matches what was observed" in text.stdout and "cv-101 at 3 GPUs" in text.stdout


def test_students_may_not_export_the_history(week, tmp_path):
    srv, _ = week
    r = hive_lab("admin", "history", "--out", str(tmp_path / "w.csv"), "--url", srv.url, "--token", srv.tokens["ann"])
    assert r.returncode == 1 and "only admins" in r.stderr
    assert not (tmp_path / "w.csv").exists()


@pytest.mark.parametrize("args, says", [
    (["--vc-gpus", "cv-101"], "VC=GPUS"), (["--vc-gpus", "cv-999=2"], "unknown VC 'cv-999'"),
    (["--capacity", "cv-101", "--within", "soon"], "--within"),
])
def test_bad_replay_options_say_what_to_write(week, tmp_path, args, says):
    srv, _ = week
    out = tmp_path / "w.csv"
    assert hive_lab("admin", "history", "--out", str(out), "--url", srv.url, "--token", srv.tokens["carol"]).returncode == 0
    r = hive_lab("simulate", "--history", str(out), "--cluster", str(tmp_path / "w.cluster.json"), *args)
    assert r.returncode == 2 and says in r.stderr, r.stderr


def test_replay_in_a_notebook(week):
    import hive_lab
    from hive_lab.client import Client

    srv, ids = week
    r = hive_lab.replay(since="7d", changes={"vcs": {"cv-101": 3}}, policies=["hived", "fair_share"],
                        client=Client(srv.url, srv.tokens["carol"]))
    assert r.check.ok, r.check.sentence()
    bigger = "with cv-101 at 3 GPUs (was 1) and 1 more node to hold it"  # lab keeps its 3 of the 4
    assert [s.label for s in r.scenarios] == ["live", bigger, f"{bigger}, fair share in each VC"]
    assert r.effects[0].startswith(f"{bigger}: 90 % of cv-101's jobs start ")
    assert r.capacity("cv-101", within="1s", target=1.0).gpus == 3
    charts = r.charts()
    assert {c.name for c in charts.select({"type": __import__("bokeh").models.Plot})} >= {
        "queueing", "users", "gpus", "anomaly", "busiest"}
    view = r.widget()
    assert "matches what was observed" in view.text.value and len(view.widget.children) == 2
    with pytest.raises(hive_lab.HiveLabError, match="only admins"):
        hive_lab.replay(client=Client(srv.url, srv.tokens["bob"]))
