"""A real Jupyter server on fake NVML hardware: discovery, live GPU data, a scripted GPU fault during a
running job (retried elsewhere, the bad GPU never given out until marked healthy, metrics show it),
drains through the CLI, and the Grafana dashboard's metrics all present."""

import json
import pathlib
import re
import subprocess
import sys

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from fixtures.fake_nvml import add_fault
from hive_lab_server.hardware.fake_nvml import write_description
from waiting import wait_until

DASHBOARD = pathlib.Path(__file__).parents[2] / "monitoring" / "grafana-dashboard.json"


def gpus(srv):
    return {g["index"]: g for g in srv.request("GET", "cluster").json()["gpus"]}


def metrics(srv):
    text = srv.request("GET", "metrics").text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def submit(srv, user="ann", **extra):
    body = {"command": "sleep 60", "vc": "default", "tasks": [{"gpus": 1}], **extra}
    r = srv.request("POST", "jobs", user=user, json=body)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def gpu_of(job):
    return job["placement"][0]["gpus"][0]


# The same machine as the fake description, with VC ``default`` guaranteed two NVLink-pair cells.
PAIRS = {"nodes": ["ws"], "gpus_per_node": 4, "gpu_type": "A6000", "levels": ["pair"],
         "vcs": {"default": {"cells": {"pair": 2}}}}


@pytest.fixture
def hw_server(live_server_factory, fake_hardware):
    def make(cluster_config=PAIRS):
        path = fake_hardware("workstation-4")
        srv = live_server_factory(
            cluster_config=cluster_config,
            users={"ann": {}},
            vc_access={"ann": ["default"]},
            config={"HiveLabApp": {"nvml_backend": f"fake:{path}", "gpu_sample_interval_s": 0.2, "stop_grace_s": 0.5}},
        )
        return srv, path

    return make


def test_discovered_machine_with_live_data(hw_server):
    srv, hw = hw_server(cluster_config=None)  # no config: the cluster is what NVML sees
    cluster = srv.request("GET", "cluster").json()
    assert cluster["gpus_total"] == 4
    assert [(g["node"], g["index"], g["type"]) for g in cluster["gpus"]] == [("ws", i, "A6000") for i in range(4)]
    assert len({g["uuid"] for g in cluster["gpus"]}) == 4 and all(g["uuid"].startswith("GPU-") for g in cluster["gpus"])
    assert [g["path"][-1] for g in cluster["gpus"]] == ["ws/0", "ws/0", "ws/1", "ws/1"]  # NVLink pairs
    add_fault(hw, {"at": 0, "gpu": 3, "utilization": 42, "memory_used_mb": 1234, "temperature": 77})
    wait_until(lambda: gpus(srv)[3]["utilization"] == 42, what="live utilisation")
    g3 = gpus(srv)[3]
    assert (g3["memory_used_mb"], g3["temperature_c"], g3["bad"]) == (1234, 77, False)
    key = (("gpu", "3"), ("node", "ws"))
    assert metrics(srv)[("hive_lab_gpu_utilization_percent", key)] == 42
    assert "cluster config vs NVML" not in srv.log()


def test_fault_during_running_job(hw_server):
    srv, hw = hw_server()
    assert "cluster config vs NVML" not in srv.log()  # the config matches the described machine
    job_id = submit(srv, max_retries=1)
    job = srv.wait_for_job(job_id, "running", user="ann")
    bad = gpu_of(job)
    assert job["placement"][0]["gpu_uuids"] == [gpus(srv)[bad]["uuid"]]

    add_fault(hw, {"at": 0, "gpu": bad, "xid": 79})  # the GPU falls off the bus
    retried = wait_until(lambda: (lambda j: j if j["state"] == "running" and j["retries"] == 1 else None)(
        srv.request("GET", f"jobs/{job_id}", user="ann").json()), what="the job to be retried")
    assert gpu_of(retried) != bad
    reasons = " ".join(h.get("reason") or "" for h in retried["history"])
    assert f"GPU {bad} on ws failed: XID 79" in reasons and "retry 1/1" in reasons

    state = gpus(srv)[bad]
    assert state["bad"] is True and "XID 79" in state["bad_reason"] and state["utilization"] is None

    # the bad GPU is never given out, however many jobs wait
    others = [submit(srv) for _ in range(3)]
    # two of them take the two good free GPUs; the third is considered and left waiting (its reason set),
    # not given the bad one
    views = wait_until(lambda: (lambda v: v if [j["state"] for j in v] == ["running", "running", "queued"]
                                and v[-1].get("reason") else None)(
        [srv.request("GET", f"jobs/{j}", user="ann").json() for j in others]), what="two running, one waiting")
    assert bad not in {gpu_of(j) for j in views + [retried] if j["state"] == "running"}
    assert views[-1]["state"] == "queued"

    m = metrics(srv)
    key = (("gpu", str(bad)), ("node", "ws"))
    assert m[("hive_lab_gpu_healthy", key)] == 0
    assert m[("hive_lab_gpu_up", key)] == 0
    assert m[("hive_lab_gpu_xid_errors_total", key + (("xid", "79"),))] == 1
    assert m[("hive_lab_gpu_health_events_total", ())] == 1

    # only admins may mark it healthy; after a reset it is given out again
    assert srv.request("POST", f"nodes/ws/gpus/{bad}/healthy", user="ann").status_code == 403
    add_fault(hw, {"at": 0, "gpu": bad, "recover": True})
    r = srv.request("POST", f"nodes/ws/gpus/{bad}/healthy")
    assert r.status_code == 200 and r.json()["gpus"] == [bad]
    running = [srv.wait_for_job(j, "running", user="ann") for j in others]
    assert sorted(gpu_of(j) for j in running + [retried]) == [0, 1, 2, 3]
    assert metrics(srv)[("hive_lab_gpu_healthy", key)] == 1
    assert gpus(srv)[bad]["bad"] is False
    assert srv.request("POST", "nodes/nowhere/gpus/0/healthy").status_code == 404


def test_drain_through_cli_and_dashboard_metrics(hw_server):
    srv, _ = hw_server()
    job_id = submit(srv)
    g = gpu_of(srv.wait_for_job(job_id, "running", user="ann"))
    cli = [sys.executable, "-m", "hive_lab.cli", "admin"]
    auth = ["--url", srv.url, "--token", srv.token]
    out = subprocess.run(cli + ["drain", "ws", "--gpu", str(g)] + auth, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"GPU {g} of ws: drained (running jobs finish; nothing new starts there)"
    state = gpus(srv)[g]
    assert state["drained"] is True and state["bad"] is False
    assert srv.request("GET", f"jobs/{job_id}", user="ann").json()["state"] == "running"  # finishes its job
    new = [srv.wait_for_job(submit(srv), "running", user="ann") for _ in range(3)]
    assert g not in {gpu_of(j) for j in new}
    wait_until(lambda: metrics(srv).get(("hive_lab_gpu_drained", (("gpu", str(g)), ("node", "ws")))) == 1,
               what="drained metric")

    listing = subprocess.run(cli + ["gpus", "--json"] + auth, capture_output=True, text=True)
    assert listing.returncode == 0, listing.stderr
    assert [x["drained"] for x in json.loads(listing.stdout)["gpus"]] == [i == g for i in range(4)]
    denied = subprocess.run(cli + ["drain", "ws"] + ["--url", srv.url, "--token", srv.tokens["ann"]],
                            capture_output=True, text=True)
    assert denied.returncode == 1 and "only admins" in denied.stderr
    out = subprocess.run(cli + ["undrain", "ws", "--gpu", str(g)] + auth, capture_output=True, text=True)
    assert out.returncode == 0 and gpus(srv)[g]["drained"] is False
    out = subprocess.run(cli + ["healthy", "ws", "--gpu", str(g)] + auth, capture_output=True, text=True)
    assert (out.returncode, out.stdout.strip()) == (0, f"GPU {g} of ws: marked healthy"), out.stderr
    out = subprocess.run(cli + ["healthy", "nowhere"] + auth, capture_output=True, text=True)
    assert out.returncode == 1 and "no node 'nowhere'" in out.stderr

    # every metric the Grafana dashboard queries is served (a family with no series yet counts:
    # no XID has happened, this GPU model remaps rows instead of retiring pages)
    names = set()
    for family in text_string_to_metric_families(srv.request("GET", "metrics").text):
        names |= {family.name, family.name + "_total"} | {s.name for s in family.samples}
    wanted = set()
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel.get("targets", []):
            wanted |= set(re.findall(r"\b(hive_lab_[a-z_]+)", target["expr"]))
    assert wanted and wanted <= names, sorted(wanted - names)


def test_bad_gpu_stays_bad_across_restart(hw_server):
    srv, hw = hw_server()
    add_fault(hw, {"at": 0, "gpu": 1, "xid": 48})  # a double-bit ECC error: the GPU still answers
    wait_until(lambda: gpus(srv)[1]["bad"], what="GPU 1 marked bad")
    assert gpus(srv)[1]["utilization"] == 0  # readable, yet bad
    desc = yaml.safe_load(hw.read_text())
    desc["faults"] = []  # the event does not come again after the restart
    write_description(hw, desc)
    srv.restart()
    assert gpus(srv)[1]["bad"] is True and "XID 48" in gpus(srv)[1]["bad_reason"]
    job = srv.wait_for_job(submit(srv), "running", user="ann")
    assert gpu_of(job) != 1
    assert srv.request("POST", "nodes/ws/gpus/1/healthy").status_code == 200
    srv.restart()
    assert gpus(srv)[1]["bad"] is False


def test_mixed_models_machine(live_server_factory, fake_hardware):
    """Two GPU models on one machine: two chains; jobs asking for a type get that type's GPUs and UUIDs."""
    path = fake_hardware("mixed")  # A100s at indices 0 and 2, V100s at 1 and 3
    srv = live_server_factory(cluster_config=None, users={"ann": {}}, vc_access={"ann": ["default"]},
                              config={"HiveLabApp": {"nvml_backend": f"fake:{path}", "gpu_sample_interval_s": 0}})
    assert {g["index"]: g["type"] for g in srv.request("GET", "cluster").json()["gpus"]} == {
        0: "A100", 1: "V100", 2: "A100", 3: "V100"}
    jobs = [srv.wait_for_job(submit(srv, tasks=[{"gpus": 1, "gpu_type": t}]), "running", user="ann")
            for t in ("V100", "V100", "A100")]
    assert [gpu_of(j) for j in jobs[:2]] in ([1, 3], [3, 1]) and gpu_of(jobs[2]) in (0, 2)
    uuids = {g["index"]: g["uuid"] for g in srv.request("GET", "cluster").json()["gpus"]}
    assert all(j["placement"][0]["gpu_uuids"] == [uuids[gpu_of(j)]] for j in jobs)
