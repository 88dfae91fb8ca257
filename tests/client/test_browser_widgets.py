"""The notebook side in a real Chromium: a JupyterLab notebook runs `%hive_status` and `%%submit`, and
the ipywidgets/bokeh views really render (widget manager + jupyter_bokeh front ends)."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from playwright_loop import jp_asyncio_loop, jp_server_cleanup  # noqa: F401 (fixtures: Playwright's loop)
from waiting import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

CELLS = [
    "%load_ext hive_lab\n%hive_status",
    "%%submit --wait --name from-browser\nprint('hello from the browser job')",
]


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium through Playwright, stopped at the end of this module (Playwright's loop
    must not outlive it: the other client tests use pytest-jupyter's loop fixtures)."""
    import os
    import shutil

    from fixtures.browser import CHROMIUM, launch_chromium

    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        pytest.skip(f"{CHROMIUM} not found: install Debian's chromium (scripts/system-deps.sh does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = launch_chromium(playwright)
        yield chromium
        chromium.close()


def painted(canvas) -> dict:
    """(node, GPU) -> the colour the heatmap painted it (``canvas.hiveCells()``, heatmap.ts)."""
    return {(c["node"], c["index"]): c["color"] for c in canvas.evaluate("c => c.hiveCells()")}


def run_all(page):
    """Run > Run All Cells once the kernel is connected and idle (as a person would)."""
    page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first.wait_for(timeout=60_000)
    expect(page.locator(".jp-StatusBar-Widget", has_text="Idle").first).to_be_visible(timeout=60_000)
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()


def write_notebook(path):
    nb = {
        "cells": [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
                   "source": src} for i, src in enumerate(CELLS)],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4, "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb))


def test_dashboard_and_submit_render_in_jupyterlab(lab_server, browser):
    write_notebook(lab_server.root_dir / "widgets.ipynb")
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text))
    page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
    try:
        page.goto(f"{lab_server.url}lab/tree/widgets.ipynb?token={lab_server.token}")
        page.locator(".jp-Notebook .jp-Cell").first.wait_for()
        page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first.wait_for(timeout=60_000)
        run_all(page)
        first_out = page.locator(".jp-Notebook .jp-Cell").nth(0).locator(".jp-OutputArea")
        # the dashboard, drawn by the extension (it ranks before the widget): header, VCs, heatmap, jobs
        view = first_out.locator(".jp-HiveView[data-view='status']")
        expect(view).to_contain_text("GPUs free", timeout=60_000)
        expect(view).to_contain_text("Virtual clusters")
        expect(view.locator("tr[data-vc='default']")).to_contain_text("4 GPUs")
        first_out.locator("canvas.jp-HiveHeatmap-canvas").wait_for(timeout=30_000)
        # the submitted cell's live status line ends with the exit code and the log tail
        second_out = page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".jp-OutputArea")
        expect(second_out).to_contain_text("from-browser: succeeded (exit code 0)", timeout=60_000)
        expect(second_out).to_contain_text("hello from the browser job")
        # the result is an ordinary display (issue 15: no widget, so it survives a reload)
        expect(second_out.locator(".jp-OutputArea-output", has_text="from-browser: succeeded")).to_have_count(1)
        expect(second_out).not_to_contain_text("Error displaying widget")
        # the heatmap and queue picked the job up from the event stream
        expect(first_out).to_contain_text("from-browser", timeout=30_000)
        from fixtures.browser import RESULTS

        RESULTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(RESULTS / "notebook-widgets.png"), full_page=True)
        # the heatmap follows the event stream: a running 2-GPU job colours two cells, and its row says where
        canvas = first_out.locator("canvas.jp-HiveHeatmap-canvas")
        expect(canvas).to_have_attribute("data-cells", "4", timeout=30_000)
        view.locator(".jp-HiveHeatmap-mode").select_option("state")  # colour by state: free vs used
        wait_until(lambda: len(set(painted(canvas).values())) == 1, "every GPU painted free")
        free = painted(canvas)
        r = lab_server.request("POST", "jobs", json={"command": "sleep 60", "tasks": [{"name": "main", "count": 1, "gpus": 2}]})
        assert r.status_code == 201, r.text
        job_id = r.json()["id"]
        job = lab_server.wait_for_job(job_id, "running")
        placed = {(p["node"], g) for p in job["placement"] for g in p["gpus"]}
        wait_until(lambda: {k for k, c in painted(canvas).items() if c != next(iter(free.values()))} == placed,
                   "the heatmap to colour the running job's GPUs")
        expect(view.locator(f"tr[data-job-id='{job_id}']")).to_contain_text("on ")
        lab_server.request("DELETE", f"jobs/{job_id}")
        wait_until(lambda: painted(canvas) == free, "the heatmap to show the GPUs freed")
        expect(view.locator(f"tr[data-job-id='{job_id}']")).to_contain_text("cancelled")
        # every widget got a view (a missing BokehJS shows up as exactly this)
        assert not [m for m in console if "Could not create a view" in m], console
    finally:
        context.close()
        for s in lab_server.request("GET", "/api/sessions").json():
            lab_server.request("DELETE", f"/api/sessions/{s['id']}")


def wait_kernel_idle(server, timeout=60.0) -> None:
    """Until the page's notebook session has a kernel that is idle (ready to run cells)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sessions = server.request("GET", "/api/sessions").json()
        if sessions and all(s["kernel"]["execution_state"] == "idle" for s in sessions):
            return
        time.sleep(0.3)
    raise AssertionError("no idle kernel for the notebook")


def test_submit_and_dashboard_render_in_notebook_7(lab_server, browser):
    pytest.importorskip("notebook", minversion="7", reason="Notebook 7 is not installed (test extra)")
    write_notebook(lab_server.root_dir / "nb7.ipynb")
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text))
    try:
        page.goto(f"{lab_server.url}notebooks/nb7.ipynb?token={lab_server.token}")
        page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=60_000)
        wait_kernel_idle(lab_server)
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        first_out = page.locator(".jp-Notebook .jp-Cell").nth(0).locator(".jp-OutputArea")
        expect(first_out.locator(".jp-HiveView[data-view='status']")).to_contain_text("GPUs free", timeout=60_000)
        first_out.locator("canvas.jp-HiveHeatmap-canvas").wait_for(timeout=30_000)
        second_out = page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".jp-OutputArea")
        expect(second_out).to_contain_text("from-browser: succeeded (exit code 0)", timeout=60_000)
        expect(second_out).to_contain_text("hello from the browser job")
        from fixtures.browser import RESULTS

        RESULTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(RESULTS / "notebook7-widgets.png"), full_page=True)
        assert not [m for m in console if "Could not create a view" in m], console
    finally:
        context.close()
        for s in lab_server.request("GET", "/api/sessions").json():
            lab_server.request("DELETE", f"/api/sessions/{s['id']}")


def test_hive_jobs_stays_live_after_the_kernel_restarts_and_the_notebook_reopens(lab_server, browser):
    """Issue 30: after a kernel restart and a reload, a widget output says "Error displaying widget: model
    not found" (the new kernel has no such model). The extension draws `%hive_jobs` itself, from the
    server: the reopened output lists the jobs and follows new ones, whatever became of the kernel."""
    path = lab_server.root_dir / "jobs.ipynb"
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "id": "c0", "metadata": {}, "outputs": [],
                     "source": "%load_ext hive_lab\n%hive_jobs"}],
          "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
          "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb))
    first = lab_server.request("POST", "jobs", json={"name": "before-restart", "command": "true",
                                                      "tasks": [{"gpus": 1}]}).json()
    lab_server.wait_for_job(first["id"], "succeeded")
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        # ?reset: a workspace of its own (the module's server remembers the notebooks other tests opened)
        page.goto(f"{lab_server.url}lab/tree/jobs.ipynb?reset&token={lab_server.token}")
        page.locator(".jp-Notebook .jp-Cell").first.wait_for()
        run_all(page)
        out = page.locator(".jp-Notebook .jp-Cell").nth(0).locator(".jp-OutputArea")
        view = out.locator(".jp-HiveView[data-view='jobs']")
        expect(view.locator(f"tr[data-job-id='{first['id']}']")).to_contain_text("succeeded", timeout=60_000)
        expect(view).to_contain_text("of my jobs")
        # saved (the output holds the widget, the view request and a stamped snapshot), then the kernel restarts
        page.locator(".jp-Notebook").first.click()
        page.keyboard.press("Control+s")
        wait_until(lambda: "application/vnd.hive-lab.view+json" in path.read_text(), "the notebook saved")
        saved = json.loads(path.read_text())["cells"][0]["outputs"]
        data = next(o["data"] for o in saved if "application/vnd.hive-lab.view+json" in o.get("data", {}))
        assert data["application/vnd.hive-lab.view+json"]["view"] == "jobs"
        snapshot = "".join(data["text/html"])  # nbformat keeps text as a list of lines
        assert "application/vnd.jupyter.widget-view+json" in data and "as of" in snapshot and first["id"] in snapshot
        (session,) = lab_server.request("GET", "/api/sessions").json()
        restarted = lab_server.request("POST", f"/api/kernels/{session['kernel']['id']}/restart")
        assert restarted.status_code == 200, restarted.text
        page.reload()
        page.locator(".jp-Notebook .jp-Cell").first.wait_for()
        out = page.locator(".jp-Notebook .jp-Cell").nth(0).locator(".jp-OutputArea")
        view = out.locator(".jp-HiveView[data-view='jobs']")
        expect(view.locator(f"tr[data-job-id='{first['id']}']")).to_contain_text("succeeded", timeout=60_000)
        expect(out).not_to_contain_text("Error displaying widget")
        # still live: a job submitted now shows up, and its state follows, with no cell run again
        second = lab_server.request("POST", "jobs", json={"name": "after-restart", "command": "sleep 30",
                                                           "tasks": [{"gpus": 1}]}).json()
        row = view.locator(f"tr[data-job-id='{second['id']}']")
        expect(row).to_contain_text("running", timeout=30_000)
        expect(row.locator(".jp-HiveView-where")).to_contain_text("on node-")
        lab_server.request("DELETE", f"jobs/{second['id']}")
        expect(row).to_contain_text("cancelled", timeout=30_000)
        from fixtures.browser import RESULTS

        RESULTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(RESULTS / "hive-jobs-after-restart.png"), full_page=True)
    finally:
        context.close()
        for s in lab_server.request("GET", "/api/sessions").json():
            lab_server.request("DELETE", f"/api/sessions/{s['id']}")
