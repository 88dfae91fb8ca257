"""The JupyterLab extension in a real Chromium against a real ``jupyter lab`` with hive-lab.

Jobs go in through the REST API; the tests read what a person sees: the "GPU cluster" panel, the
status bar, the heatmap canvas pixels. One ``jupyter lab`` serves the whole module (4 simulated
GPUs, local launcher); every test leaves no active job behind.
"""

from __future__ import annotations

import json
import pathlib
import re

import pytest
from playwright.sync_api import expect

from waiting import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

ACTIVE = ("submitted", "queued", "scheduled", "running")


def submit(server, user=None, *, gpus=1, command="sleep 120", name=None):
    body = {"command": command, "tasks": [{"name": "main", "count": 1, "gpus": gpus}]}
    if name:
        body["name"] = name
    r = server.request("POST", "jobs", user=user, json=body)
    assert r.status_code == 201, r.text
    return r.json()


@pytest.fixture(autouse=True)
def no_active_jobs_after(lab_server):
    yield
    jobs = lab_server.request("GET", "jobs?state=" + ",".join(ACTIVE) + "&limit=500").json()["jobs"]
    for job in jobs:
        lab_server.request("DELETE", f"jobs/{job['id']}")
    for job in jobs:
        lab_server.wait_for_job(job["id"], "cancelled", "succeeded", "failed", timeout=30)


def put_lab_settings(server, raw: dict) -> None:
    """Stores hive-lab's JupyterLab settings on the server (read by pages opened afterwards)."""
    r = server.request("PUT", "/lab/api/settings/hive-lab:plugin", json={"raw": json.dumps(raw)})
    assert r.status_code == 204, r.text


@pytest.fixture
def events_only(lab_server):
    """No periodic refetch (an hour): whatever changes on the page came through the event stream."""
    put_lab_settings(lab_server, {"refreshInterval": 3600})
    yield
    put_lab_settings(lab_server, {})


def job_item(lab, job_id):
    return lab.page.locator(f"#hive-lab-panel .jp-HivePanel-job[data-job-id='{job_id}']")


def test_panel_lists_my_jobs_and_all_jobs_with_their_states(lab_page):
    srv = lab_page.server
    running = submit(srv, gpus=4, name="train-big")
    srv.wait_for_job(running["id"], "running")
    queued = submit(srv, gpus=2, name="waits")
    srv.wait_for_job(queued["id"], "queued")
    other = submit(srv, "bob", gpus=1, name="bobs-job")
    srv.wait_for_job(other["id"], "queued")

    lab_page.open_panel()
    panel = lab_page.page.locator("#hive-lab-panel")
    expect(job_item(lab_page, running["id"])).to_have_attribute("data-state", "running", timeout=15_000)
    expect(job_item(lab_page, queued["id"])).to_have_attribute("data-state", "queued")
    # Someone else's job is not under "My jobs".
    expect(job_item(lab_page, other["id"])).to_have_count(0)
    # The wait reason the server gives is shown under the queued job.
    reason = srv.request("GET", f"jobs/{queued['id']}").json()["reason"]
    assert reason
    expect(job_item(lab_page, queued["id"]).locator(".jp-HivePanel-reason")).to_have_text(reason)
    item = job_item(lab_page, running["id"])
    expect(item.locator(".jp-HivePanel-jobName")).to_have_text("train-big")
    expect(item.locator(".jp-HivePanel-gpus")).to_have_attribute("data-gpus", "4")
    expect(item.locator(".jp-HivePanel-vc")).to_have_text("default")
    # an age in the CLI's words (hive_lab.format.duration), labelled as the CLI's column is: one voice
    expect(item.locator(".jp-HivePanel-age")).to_have_text(
        re.compile(r"^age (\d+(\.\d)? s|\d+ min \d\d s|\d+ h \d\d min|\d+ d \d+ h)$"))
    # VC usage: guaranteed / used / queue as the REST API reports them.
    vc = srv.request("GET", "vcs").json()["vcs"][0]
    row = panel.locator(f".jp-HivePanel-vcRow[data-vc='{vc['name']}']")
    expect(row.locator(".jp-HivePanel-vcUsage")).to_have_attribute("data-used", str(vc["used_gpus"]))
    expect(row.locator(".jp-HivePanel-vcUsage")).to_have_attribute("data-guaranteed", str(vc["guaranteed_gpus"]))
    expect(row.locator(".jp-HivePanel-vcQueue")).to_have_attribute("data-queue", str(vc["queue_length"]))
    assert vc["queue_length"] >= 1
    lab_page.screenshot("panel-my-jobs")

    panel.locator(".jp-HivePanel-tab[data-tab='all']").click()
    other_item = job_item(lab_page, other["id"])
    expect(other_item).to_have_attribute("data-state", "queued")
    expect(other_item.locator(".jp-HivePanel-user")).to_have_text("bob")
    # The server's owner is an admin: a cancel button on anyone's active job (issue 14, the instructor's
    # view); students see none on others' jobs (test_a_token_map_user_sees_herself_and_cancels_only_her_jobs).
    expect(other_item.locator(".jp-HivePanel-cancel")).to_have_count(1)
    expect(job_item(lab_page, queued["id"]).locator(".jp-HivePanel-cancel")).to_have_count(1)
    lab_page.screenshot("panel-all-jobs")


def test_cancel_from_the_panel_cancels_the_job_and_updates_the_state(lab_page):
    srv = lab_page.server
    job = submit(srv, gpus=1, name="to-cancel")
    srv.wait_for_job(job["id"], "running")
    lab_page.open_panel()
    item = job_item(lab_page, job["id"])
    expect(item).to_have_attribute("data-state", "running", timeout=15_000)
    item.locator(".jp-HivePanel-cancel").click()
    dialog = lab_page.page.locator(".jp-Dialog")
    expect(dialog).to_contain_text(job["id"])
    lab_page.screenshot("cancel-dialog")
    dialog.locator("button", has_text="Cancel job").click()
    expect(item).to_have_attribute("data-state", "cancelled", timeout=20_000)
    assert srv.request("GET", f"jobs/{job['id']}").json()["state"] == "cancelled"
    expect(item.locator(".jp-HivePanel-cancel")).to_have_count(0)


def test_status_bar_shows_free_gpus_and_my_queued_jobs(events_only, lab_page):
    srv = lab_page.server
    status = lab_page.page.locator(".jp-HiveStatus")
    # Counts loaded and the event stream connected (the header says "offline, polling" otherwise).
    expect(lab_page.page.locator("#hive-lab-panel .jp-HivePanel-counts")).to_have_text(
        re.compile(r"^\d+ / \d+ GPUs free · \S+( \(admin\))?$"), timeout=15_000
    )
    expect(status.locator(".jp-HiveStatus-free")).to_have_text("GPUs 4/4 free", timeout=15_000)
    expect(status.locator(".jp-HiveStatus-queued")).to_have_attribute("data-queued", "0")
    a = submit(srv, gpus=3)
    srv.wait_for_job(a["id"], "running")
    b = submit(srv, gpus=2)
    c = submit(srv, gpus=2)
    srv.wait_for_job(b["id"], "queued")
    srv.wait_for_job(c["id"], "queued")
    bobs = submit(srv, "bob", gpus=1)  # takes the last GPU or queues: not counted as mine either way
    srv.wait_for_job(bobs["id"], "running", "queued")
    cluster = srv.request("GET", "cluster").json()
    expect(status.locator(".jp-HiveStatus-free")).to_have_text(
        f"GPUs {cluster['gpus_free']}/{cluster['gpus_total']} free", timeout=15_000
    )
    expect(status.locator(".jp-HiveStatus-queued")).to_have_attribute("data-queued", "2")
    lab_page.screenshot("status-bar", status)
    # Clicking the item opens the panel.
    if lab_page.page.locator("#hive-lab-panel").is_visible():
        lab_page.page.locator(".jp-SideBar [data-id='hive-lab-panel']").first.click()  # collapse
    expect(lab_page.page.locator("#hive-lab-panel")).to_be_hidden()
    status.click()
    expect(lab_page.page.locator("#hive-lab-panel")).to_be_visible()


def test_log_viewer_follows_a_running_job(lab_page):
    srv = lab_page.server
    job = submit(srv, gpus=1, name="chatty", command="for i in 1 2 3 4; do echo line-$i; sleep 1; done")
    srv.wait_for_job(job["id"], "running")
    lab_page.open_panel()
    item = job_item(lab_page, job["id"])
    item.locator(".jp-HivePanel-logsButton").click()
    logs = lab_page.page.locator("#hive-lab-logs .jp-HiveLogs")
    expect(logs).to_be_visible()
    expect(logs.locator(".jp-HiveLogs-text")).to_contain_text("line-1", timeout=15_000)
    # Lines written after the viewer opened arrive without a click.
    expect(logs.locator(".jp-HiveLogs-text")).to_contain_text("line-4", timeout=20_000)
    srv.wait_for_job(job["id"], "succeeded")
    expect(logs.locator(".jp-HiveLogs-status")).to_contain_text("ended", timeout=20_000)
    text = logs.locator(".jp-HiveLogs-text").inner_text()
    assert [l for l in text.splitlines() if l.startswith("line-")] == ["line-1", "line-2", "line-3", "line-4"]
    lab_page.screenshot("log-viewer")


def test_a_token_map_user_sees_herself_and_cancels_only_her_jobs(lab_server, chromium):
    """ann logs in with her own token: the panel is hers although the page also carries the server's token."""
    from fixtures.browser import open_lab

    mine = submit(lab_server, "ann", gpus=1, name="anns")
    theirs = submit(lab_server, "bob", gpus=1, name="bobs")
    context, lab = open_lab(chromium, lab_server, "ann")
    try:
        lab.open_panel()
        panel = lab.page.locator("#hive-lab-panel")
        expect(panel.locator(".jp-HivePanel-counts")).to_contain_text("· ann", timeout=15_000)
        expect(job_item(lab, mine["id"]).locator(".jp-HivePanel-cancel")).to_have_count(1)
        expect(job_item(lab, theirs["id"])).to_have_count(0)
        panel.locator(".jp-HivePanel-tab[data-tab='all']").click()
        expect(job_item(lab, theirs["id"]).locator(".jp-HivePanel-user")).to_have_text("bob")
        expect(job_item(lab, theirs["id"]).locator(".jp-HivePanel-cancel")).to_have_count(0)
        expect(job_item(lab, theirs["id"]).locator(".jp-HivePanel-logsButton")).to_have_count(0)
    finally:
        context.close()


def _cells(lab_page):
    return lab_page.page.evaluate("() => document.querySelector('canvas.jp-HiveHeatmap-canvas').hiveCells()")


def _pixel(lab_page, cell):
    """The canvas pixel at a cell's centre as '#rrggbb'."""
    return lab_page.page.evaluate(
        """([x, y]) => {
            const canvas = document.querySelector('canvas.jp-HiveHeatmap-canvas');
            const r = window.devicePixelRatio || 1;
            const d = canvas.getContext('2d').getImageData(Math.round(x * r), Math.round(y * r), 1, 1).data;
            return '#' + [d[0], d[1], d[2]].map(v => v.toString(16).padStart(2, '0')).join('');
        }""",
        [cell["x"] + 1, cell["y"] + 1],
    )


def test_heatmap_draws_one_cell_per_gpu_and_recolours_when_a_job_starts(events_only, lab_page):
    srv = lab_page.server
    lab_page.command("hive-lab:open-heatmap")
    canvas = lab_page.page.locator("canvas.jp-HiveHeatmap-canvas")
    expect(canvas).to_have_attribute("data-renders", re.compile(r"^\d+$"), timeout=15_000)
    lab_page.page.locator(".jp-HiveHeatmap-mode").select_option("state")
    cluster = srv.request("GET", "cluster").json()
    expect(canvas).to_have_attribute("data-cells", str(len(cluster["gpus"])))
    cells = _cells(lab_page)
    assert len(cells) == cluster["gpus_total"] == len(cluster["gpus"])
    assert {(c["node"], c["index"]) for c in cells} == {(g["node"], g["index"]) for g in cluster["gpus"]}
    # Cells do not overlap: each is its own rectangle.
    rects = {(c["x"], c["y"]) for c in cells}
    assert len(rects) == len(cells)
    free_color = cells[0]["color"]
    assert all(_pixel(lab_page, c) == free_color for c in cells)

    job = submit(srv, gpus=2, name="heat")
    job = srv.wait_for_job(job["id"], "running")
    placed = {(p["node"], g) for p in job["placement"] for g in p["gpus"]}
    assert len(placed) == 2

    def colours():
        return {(c["node"], c["index"]): _pixel(lab_page, c) for c in _cells(lab_page)}

    seen: dict = {}

    def every_placed_gpu_recoloured():
        # all of them: a repaint sampled half-way showed one placed GPU recoloured and the other still free
        seen.clear()
        seen.update(colours())
        return all(seen[k] != free_color for k in placed)

    wait_until(every_placed_gpu_recoloured, lambda: f"placed GPUs {placed} drawn in use: {seen}", timeout=30)
    used = {seen[k] for k in placed}
    assert len(used) == 1
    assert all(seen[k] == free_color for k in seen if k not in placed)
    # Hover shows the details of the GPU under the pointer.
    target = next(c for c in _cells(lab_page) if (c["node"], c["index"]) in placed)
    box = canvas.bounding_box()
    lab_page.page.mouse.move(box["x"] + target["x"] + 3, box["y"] + target["y"] + 3)
    tooltip = lab_page.page.locator(".jp-HiveHeatmap-tooltip")
    expect(tooltip).to_be_visible()
    expect(tooltip.locator("[data-key='job']")).to_contain_text(job["id"])
    expect(tooltip.locator("[data-key='GPU']")).to_contain_text(f"{target['node']} GPU {target['index']}")  # one GPU form (one voice)
    lab_page.screenshot("heatmap")


def test_submit_the_current_notebook_as_a_job(lab_server, chromium):
    srv = lab_server
    notebook = {
        "cells": [{"cell_type": "code", "execution_count": None, "id": "c0", "metadata": {"tags": ["parameters"]},
                   "outputs": [], "source": "factor = 1"},
                  {"cell_type": "code", "execution_count": None, "id": "c1", "metadata": {}, "outputs": [],
                   "source": "print('answer', 6 * factor)"}],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4, "nbformat_minor": 5,
    }
    r = srv.request("PUT", "/api/contents/submit-me.ipynb", json={"type": "notebook", "format": "json",
                                                                    "content": notebook})
    assert r.status_code in (200, 201), r.text
    from fixtures.browser import open_lab

    context, lab_page = open_lab(chromium, srv, None, path="submit-me.ipynb")  # one page load, at the notebook
    try:
        _submit_the_open_notebook(srv, lab_page)
    finally:
        context.close()


def _submit_the_open_notebook(srv, lab_page) -> None:
    lab_page.page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(state="visible", timeout=60_000)
    lab_page.command("hive-lab:submit-notebook")
    dialog = lab_page.page.locator(".jp-Dialog")
    expect(dialog).to_contain_text("submit-me.ipynb")
    dialog.locator(".jp-HiveSubmit input[type='number']").fill("1")
    dialog.locator(".jp-HiveSubmit-parameters").fill("factor=7")  # papermill's parameters (issue 27)
    lab_page.screenshot("submit-dialog")
    dialog.locator("button", has_text="Submit").click()
    expect(dialog).to_have_count(0)

    jobs = wait_until(lambda: [j for j in srv.request("GET", "jobs?limit=500").json()["jobs"] if j["name"] == "submit-me"],
                      "the submitted notebook's job", timeout=30)
    assert len(jobs) == 1, jobs
    job = srv.request("GET", f"jobs/{jobs[0]['id']}").json()
    assert job["gpus"] == 1 and job["vc"] == "default"
    assert job["spec"]["notebook"] == {"file": "submit-me.ipynb", "parameters": {"factor": 7}}
    assert "submit-me.ipynb" in job["spec"]["files"]
    lab_page.open_panel()
    expect(job_item(lab_page, job["id"])).to_be_attached()
    done = srv.wait_for_job(job["id"], "succeeded", "failed", timeout=120)
    assert done["state"] == "succeeded", srv.request("GET", f"jobs/{job['id']}/logs").json()["data"]
    # the executed notebook is an output of the job (issue 15), and a toast says the job is done
    outputs = srv.request("GET", f"jobs/{job['id']}/outputs").json()["files"]
    assert [f["path"] for f in outputs] == ["submit-me.executed.ipynb"]
    executed = srv.request("GET", f"jobs/{job['id']}/outputs/submit-me.executed.ipynb").json()
    assert "answer 42" in "".join(executed["cells"][-1]["outputs"][0]["text"])
    toast = lab_page.page.locator(".Toastify__toast", has_text=f"submit-me ({job['id']}) is done")
    expect(toast).to_be_visible(timeout=30_000)
    # issue 9: the toast's action is a button, not a sentence cut at 140 characters
    expect(toast.locator("button", has_text="Open")).to_be_visible()
    expect(toast.locator("button", has_text="Show log")).to_be_visible()
    # the job's details (its log view in the panel) list the outputs as download links
    job_item(lab_page, job["id"]).locator(".jp-HivePanel-logsButton").click()
    link = lab_page.page.locator("#hive-lab-logs a.jp-HiveLogs-output", has_text="submit-me.executed.ipynb")
    expect(link).to_be_visible(timeout=30_000)
    got = lab_page.page.request.get(link.get_attribute("href"))
    assert got.status == 200 and "answer 42" in got.text()
    # ... and the toast's Open opens the executed notebook in Lab: copied into the user's files, in a tab
    toast.locator("button", has_text="Open").click()
    copy = f"hive-outputs/{job['id']}/submit-me.executed.ipynb"
    expect(lab_page.page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab",
                                 has_text="submit-me.executed.ipynb")).to_be_visible(timeout=30_000)
    saved = srv.request("GET", f"/api/contents/{copy}").json()
    assert "answer 42" in "".join(saved["content"]["cells"][-1]["outputs"][0]["text"])


def test_settings_choose_the_heatmap_colours_and_the_dark_theme_restyles_the_panel(lab_server, chromium):
    from fixtures.browser import open_lab

    def put_settings(raw: dict) -> None:
        put_lab_settings(lab_server, raw)

    put_settings({"colorMode": "state", "refreshInterval": 5})
    context, lab = open_lab(chromium, lab_server, None)
    try:
        lab.command("hive-lab:open-heatmap")
        expect(lab.page.locator("canvas.jp-HiveHeatmap-canvas")).to_have_attribute("data-mode", "state", timeout=15_000)
        expect(lab.page.locator(".jp-HiveHeatmap-mode")).to_have_value("state")
        lab.open_panel()
        panel = lab.page.locator("#hive-lab-panel")
        light = panel.evaluate("n => getComputedStyle(n).backgroundColor")
        lab.page.keyboard.press("Escape")
        from fixtures.browser import run_from_palette

        run_from_palette(lab.page, "Use Theme: JupyterLab Dark")
        expect(lab.page.locator("body[data-jp-theme-light='false']")).to_have_count(1, timeout=20_000)
        lab.page.wait_for_function(
            "light => getComputedStyle(document.querySelector('#hive-lab-panel')).backgroundColor !== light",
            arg=light,
        )
        dark = panel.evaluate("n => getComputedStyle(n).backgroundColor")
        channels = [int(c) for c in re.findall(r"\d+", dark)[:3]]
        assert sum(channels) < 3 * 100, dark
        lab.screenshot("dark-theme")
        run_from_palette(lab.page, "Use Theme: JupyterLab Light")
        expect(lab.page.locator("body[data-jp-theme-light='true']")).to_have_count(1, timeout=20_000)
    finally:
        context.close()
        put_settings({})
