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


def green_pixels(locator) -> int:
    """Pixels of the "used" colour (#2ca02c) in a screenshot of the element."""
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(locator.screenshot())).convert("RGB")
    return sum(1 for r, g, b in image.getdata() if abs(r - 44) < 12 and abs(g - 160) < 12 and abs(b - 44) < 12)


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
        # the dashboard: header text, VC grid, and the bokeh heatmap drawn on a canvas
        expect(first_out).to_contain_text("GPUs free", timeout=60_000)
        expect(first_out).to_contain_text("Virtual clusters")
        first_out.locator("canvas").first.wait_for(timeout=30_000)
        assert first_out.locator(".widget-gridbox").count() >= 2
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
        # the heatmap canvas follows the event stream: a running 2-GPU job turns two cells green
        canvas = first_out.locator("canvas").first
        assert green_pixels(canvas) == 0
        r = lab_server.request("POST", "jobs", json={"command": "sleep 60", "tasks": [{"name": "main", "count": 1, "gpus": 2}]})
        assert r.status_code == 201, r.text
        job_id = r.json()["id"]
        lab_server.wait_for_job(job_id, "running")
        wait_until(lambda: green_pixels(canvas) > 200, "the heatmap to show the running job")
        lab_server.request("DELETE", f"jobs/{job_id}")
        wait_until(lambda: green_pixels(canvas) == 0, "the heatmap to show the GPUs freed")
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
        expect(first_out).to_contain_text("GPUs free", timeout=60_000)
        first_out.locator("canvas").first.wait_for(timeout=30_000)
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
