"""HiveD's pinned cells from a job (``pinned_cell``; OpenPAI v2's ``pinnedCellId``): the job runs inside the
cell an admin pinned to its VC, against a real server; a cell the VC does not hold is a 400 that lists
the ones it does."""

from __future__ import annotations

import pytest

from fixtures.live_server import LiveServer

CLUSTER = {
    "physicalCluster": {
        "cellTypes": {"T4-NODE": {"childCellType": "T4", "childCellNumber": 2, "isNodeLevel": True}},
        "physicalCells": [{"cellType": "T4-NODE", "cellAddress": "node-a", "pinnedCellId": "lab-reserved"},
                          {"cellType": "T4-NODE", "cellAddress": "node-b"},
                          {"cellType": "T4-NODE", "cellAddress": "node-c"}],
    },
    "virtualClusters": {"lab": {"virtualCells": [{"cellType": "T4-NODE", "cellNumber": 1}],
                                "pinnedCells": [{"pinnedCellId": "lab-reserved"}]},
                        "other": {"virtualCells": [{"cellType": "T4-NODE", "cellNumber": 1}]}},
}


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    server = LiveServer(tmp_path_factory.mktemp("pinned"), cluster_config=CLUSTER, users={"ann": {}},
                        vc_access={"ann": ["lab", "other"]}).start()
    yield server
    server.close()


def test_a_job_runs_in_the_pinned_cell_it_names(srv):
    r = srv.request("POST", "jobs", user="ann", json={"vc": "lab", "pinned_cell": "lab-reserved", "command": "true",
                                                      "tasks": [{"gpus": 2}]})
    assert r.status_code == 201, r.text
    done = srv.wait_for_job(r.json()["id"], "succeeded", "failed", user="ann")
    assert done["state"] == "succeeded" and [p["node"] for p in done["placement"]] == ["node-a"]
    assert done["spec"]["pinned_cell"] == "lab-reserved"


@pytest.mark.parametrize("vc, cell", [("lab", "nope"), ("other", "lab-reserved")])
def test_a_pinned_cell_the_vc_does_not_hold_is_refused(srv, vc, cell):
    r = srv.request("POST", "jobs", user="ann", json={"vc": vc, "pinned_cell": cell, "command": "true",
                                                      "tasks": [{"gpus": 1}]})
    assert r.status_code == 400, r.text
    assert r.json()["field"] == "pinned_cell" and f"VC {vc} has no pinned cell {cell!r}" in r.json()["error"]


PAI = """protocolVersion: 2
name: pinned-pai
type: job
prerequisites:
  - {name: img, type: dockerimage, uri: "python:3.11"}
taskRoles:
  worker:
    instances: 1
    dockerImage: img
    resourcePerInstance: {cpu: 1, memoryMB: 512, gpu: 2}
    commands: ["true"]
  ps:
    instances: 1
    dockerImage: img
    resourcePerInstance: {cpu: 1, memoryMB: 512, gpu: 0}
    commands: ["true"]
defaults: {virtualCluster: lab}
extras:
  hivedScheduler:
    taskRoles:
      worker: {pinnedCellId: lab-reserved}
"""


def test_openpai_v2_pinned_cell_id_becomes_the_jobs_pinned_cell():
    import yaml

    from hive_lab_server.api.formats import from_document
    from hive_lab_server.wire.spec import SpecError

    spec = from_document(yaml.safe_load(PAI))
    assert spec.pinned_cell == "lab-reserved" and spec.vc == "lab"
    assert not any("pinnedCellId" in note for note in spec.source.not_applied)
    two = yaml.safe_load(PAI)
    two["extras"]["hivedScheduler"]["taskRoles"]["ps"] = {"pinnedCellId": "elsewhere"}
    with pytest.raises(SpecError, match="one pinned cell"):
        from_document(two)
