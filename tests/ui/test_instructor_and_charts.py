"""The instructor's view (issue 14) and the GPU charts (issue 15) in a real Chromium against a real
``jupyter lab`` with hive-lab on a 4-GPU workstation seen through the fake NVML backend (no GPU here):
the sampler's utilisation and memory readings are scripted with ``add_fault``.

carol is an admin (the instructor), ann and bob are students in VC ``default``.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import sys

import pytest
from playwright.sync_api import expect

from fixtures.browser import lab_args, open_lab, write_lab_page_config
from fixtures.fake_nvml import add_fault, topology
from hive_lab_server.hardware.fake_nvml import write_description

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

ACTIVE = ("submitted", "queued", "scheduled", "running")


@pytest.fixture(scope="module")
def hw_lab(tmp_path_factory):
    """``jupyter lab`` with hive-lab on the fake NVML's "workstation-4" (node ``ws``, GPUs 0-3)."""
    from fixtures.browser import _labextension_installed
    from fixtures.live_server import LiveServer

    if not _labextension_installed():
        pytest.fail("the hive-lab labextension is not installed: run ./scripts/setup.sh (pip install -e .)")
    tmp = tmp_path_factory.mktemp("hwlab")
    hardware = tmp / "hardware.yaml"
    write_description(hardware, topology("workstation-4"))
    extra_args = lab_args(tmp)
    # the charts read the GPUs every second (the setting; 5 s by default)
    plugin = tmp / "user-settings" / "hive-lab" / "plugin.jupyterlab-settings"
    plugin.parent.mkdir(parents=True)
    plugin.write_text(json.dumps({"chartInterval": 1}))
    venv_bin = str(pathlib.Path(sys.executable).parent)
    srv = LiveServer(
        tmp,
        lab=True,
        cluster_config=None,  # the cluster is what (fake) NVML sees
        users={"ann": {}, "bob": {}, "carol": {}},
        vc_access={"ann": ["default"], "bob": ["default"], "carol": ["default"]},
        admin_users=["carol"],
        config={"HiveLabApp": {"nvml_backend": f"fake:{hardware}", "gpu_sample_interval_s": 0.2,
                               "stop_grace_s": 0.5}},
        extra_args=extra_args,
        env={"PATH": venv_bin + os.pathsep + os.environ.get("PATH", "")},
    )
    write_lab_page_config(srv.config_dir)
    srv.start(timeout=90)
    srv.hardware = hardware
    yield srv
    srv.close()


@pytest.fixture(autouse=True)
def no_active_jobs_after(hw_lab):
    yield
    jobs = hw_lab.request("GET", "jobs?state=" + ",".join(ACTIVE) + "&limit=500").json()["jobs"]
    for job in jobs:
        hw_lab.request("DELETE", f"jobs/{job['id']}")
    for job in jobs:
        hw_lab.wait_for_job(job["id"], "cancelled", "succeeded", "failed", timeout=30)


@pytest.fixture
def lab_as(hw_lab, chromium):
    contexts = []

    def open_as(user):
        context, lab = open_lab(chromium, hw_lab, user)
        contexts.append(context)
        return lab

    yield open_as
    for context in contexts:
        context.close()


def submit(server, user, *, gpus=1, name=None):
    body = {"command": "sleep 300", "tasks": [{"name": "main", "count": 1, "gpus": gpus}]}
    if name:
        body["name"] = name
    r = server.request("POST", "jobs", user=user, json=body)
    assert r.status_code == 201, r.text
    return server.wait_for_job(r.json()["id"], "running")


def job_item(lab, job_id):
    return lab.page.locator(f"#hive-lab-panel .jp-HivePanel-job[data-job-id='{job_id}']")


def gpus_of(job) -> list[int]:
    return [g for p in job["placement"] for g in p["gpus"]]


def test_an_admin_filters_by_user_and_cancels_a_students_job(hw_lab, lab_as):
    anns = submit(hw_lab, "ann", name="anns-training")
    bobs = submit(hw_lab, "bob", gpus=2, name="bobs-notebook")
    # ann's GPU computes; bob's two GPUs sit idle (the fake NVML reads 0 % unless told otherwise)
    add_fault(hw_lab.hardware, {"at": 0, "gpu": gpus_of(anns)[0], "utilization": 93, "memory_used_mb": 30000})

    lab = lab_as("carol")
    lab.open_panel()
    panel = lab.page.locator("#hive-lab-panel")
    expect(panel.locator(".jp-HivePanel-counts")).to_contain_text("· carol (admin)", timeout=15_000)
    panel.locator(".jp-HivePanel-tab[data-tab='all']").click()
    filters = panel.locator(".jp-HivePanel-filters")
    expect(filters).to_be_visible()
    expect(job_item(lab, bobs["id"])).to_have_attribute("data-state", "running", timeout=15_000)
    expect(job_item(lab, anns["id"])).to_have_attribute("data-state", "running")

    # who holds GPUs idle: bob's two, not ann's busy one
    idle = panel.locator(".jp-HivePanel-idleGpu")
    expect(idle).to_have_count(2, timeout=20_000)
    for i in range(2):
        expect(idle.nth(i)).to_have_attribute("data-user", "bob")
        expect(idle.nth(i)).to_have_attribute("data-job", bobs["id"])
    expect(panel.locator(f".jp-HivePanel-idleGpu[data-job='{anns['id']}']")).to_have_count(0)

    # usage per student: the table when the server keeps accounts, else says there is none
    usage = hw_lab.request("GET", "usage?since=7d&by=user", user="carol")
    if usage.status_code == 404:
        expect(panel.locator(".jp-HivePanel-usageNone")).to_have_text("usage not available")
    else:
        assert usage.status_code == 200, usage.text
        for row in usage.json()["rows"]:
            expect(panel.locator(f".jp-HivePanel-usageRow[data-user='{row['user']}']")).to_have_count(1)

    # filter by user: only ann's jobs are listed (the server filters: GET jobs?user=ann)
    filters.locator(".jp-HivePanel-filterUser").select_option("ann")
    expect(job_item(lab, bobs["id"])).to_have_count(0, timeout=15_000)
    expect(job_item(lab, anns["id"])).to_have_count(1)
    expect(panel.locator(".jp-HivePanel-job .jp-HivePanel-user")).to_have_text(
        ["ann"] * panel.locator(".jp-HivePanel-job").count())
    # ... and the idle list follows the filter: ann holds nothing idle
    expect(idle).to_have_count(0)
    filters.locator(".jp-HivePanel-filterVc").select_option("default")
    expect(job_item(lab, anns["id"])).to_have_count(1, timeout=15_000)
    lab.screenshot("instructor-filtered")

    # cancel a student's job as the admin
    item = job_item(lab, anns["id"])
    item.locator(".jp-HivePanel-cancel").click()
    dialog = lab.page.locator(".jp-Dialog")
    expect(dialog).to_contain_text(anns["id"])
    expect(dialog).to_contain_text("of ann")
    dialog.locator("button", has_text="Cancel job").click()
    expect(item).to_have_attribute("data-state", "cancelled", timeout=20_000)
    done = hw_lab.request("GET", f"jobs/{anns['id']}").json()
    assert done["state"] == "cancelled"
    assert "carol" in (done["reason"] or ""), done["reason"]
    assert hw_lab.request("GET", f"jobs/{bobs['id']}").json()["state"] == "running"

    filters.locator(".jp-HivePanel-filterUser").select_option("")
    expect(job_item(lab, bobs["id"])).to_have_count(1, timeout=15_000)
    lab.screenshot("instructor-view")


def test_a_student_sees_no_filters_no_instructor_view_and_no_cancel_on_others(hw_lab, lab_as):
    anns = submit(hw_lab, "ann", name="anns")
    bobs = submit(hw_lab, "bob", name="bobs")
    lab = lab_as("ann")
    lab.open_panel()
    panel = lab.page.locator("#hive-lab-panel")
    expect(panel.locator(".jp-HivePanel-counts")).to_contain_text("· ann", timeout=15_000)
    expect(job_item(lab, anns["id"]).locator(".jp-HivePanel-cancel")).to_have_count(1)
    panel.locator(".jp-HivePanel-tab[data-tab='all']").click()
    expect(job_item(lab, bobs["id"]).locator(".jp-HivePanel-user")).to_have_text("bob", timeout=15_000)
    expect(job_item(lab, bobs["id"]).locator(".jp-HivePanel-cancel")).to_have_count(0)
    expect(job_item(lab, anns["id"]).locator(".jp-HivePanel-cancel")).to_have_count(1)
    expect(panel.locator(".jp-HivePanel-filters")).to_be_hidden()
    expect(panel.locator(".jp-HivePanel-instructor")).to_be_hidden()
    # and the server agrees: a student may not cancel another's job
    r = hw_lab.request("DELETE", f"jobs/{bobs['id']}", user="ann")
    assert r.status_code == 403, r.text
    lab.screenshot("student-all-jobs")


def test_the_heatmap_charts_my_gpus_live_labels_nodes_and_fits_a_small_machine(hw_lab, lab_as):
    anns = submit(hw_lab, "ann", gpus=2, name="anns-pair")
    bobs = submit(hw_lab, "bob", gpus=1, name="bobs-one")
    g0, g1 = gpus_of(anns)
    add_fault(hw_lab.hardware, {"at": 0, "gpu": g0, "utilization": 40, "memory_used_mb": 2048})
    add_fault(hw_lab.hardware, {"at": 0, "gpu": g1, "utilization": 75, "memory_used_mb": 8192})

    lab = lab_as("ann")
    lab.command("hive-lab:open-heatmap")
    page = lab.page
    cards = page.locator(".jp-HiveCharts-card")
    expect(cards).to_have_count(2, timeout=20_000)  # ann's two GPUs, not bob's
    first = page.locator(f".jp-HiveCharts-card[data-gpu='ws#{g0}']")
    second = page.locator(f".jp-HiveCharts-card[data-gpu='ws#{g1}']")
    expect(first).to_have_attribute("data-job", anns["id"])
    expect(first).to_have_attribute("data-utilization", "40", timeout=20_000)
    expect(second).to_have_attribute("data-utilization", "75", timeout=20_000)
    expect(first.locator(".jp-HiveCharts-mem")).to_have_text("memory 2.0 / 48 GiB")
    bob_gpu = gpus_of(bobs)[0]
    expect(page.locator(f".jp-HiveCharts-card[data-gpu='ws#{bob_gpu}']")).to_have_count(0)

    # live: a new reading arrives and extends the series
    points = int(first.get_attribute("data-points"))
    add_fault(hw_lab.hardware, {"at": 0, "gpu": g0, "utilization": 90, "memory_used_mb": 4096})
    expect(first).to_have_attribute("data-utilization", "90", timeout=20_000)
    page.wait_for_function(
        "([sel, n]) => Number(document.querySelector(sel).dataset.points) > n",
        arg=[f".jp-HiveCharts-card[data-gpu='ws#{g0}']", points],
    )
    expect(first.locator(".jp-HiveCharts-util")).to_have_text("utilisation 90%")

    # node labels on the heatmap, and no big empty pane above the charts on a 4-GPU machine
    nodes = page.evaluate("() => document.querySelector('canvas.jp-HiveHeatmap-canvas').hiveNodes()")
    assert [(n["label"], n["labelled"]) for n in nodes] == [("ws", True)]
    canvas = page.locator("canvas.jp-HiveHeatmap-canvas").bounding_box()
    charts = page.locator(".jp-HiveCharts").bounding_box()
    assert canvas["height"] < 200, canvas
    assert 0 <= charts["y"] - (canvas["y"] + canvas["height"]) < 40, (canvas, charts)
    lab.screenshot("heatmap-gpu-charts")
