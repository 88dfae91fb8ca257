"""A job array in the JupyterLab panel (real Chromium, real ``jupyter lab`` with hive-lab): one row with
its counts by state that opens into its elements; its elements are not rows of their own.

The page loads this checkout's build of the extension (``hive_lab/labextension``, built with ``jlpm build``
in labextension/) where there is one, ahead of the installed one."""

from __future__ import annotations

import os
import pathlib
import sys

import pytest
from playwright.sync_api import expect

from fixtures.browser import _labextension_installed, lab_args, open_in_lab, open_lab, write_lab_page_config
from fixtures.live_server import LiveServer

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

BUILD = pathlib.Path(__file__).resolve().parents[2] / "hive_lab" / "labextension"


@pytest.fixture(scope="module")
def array_lab(tmp_path_factory):
    if not _labextension_installed():
        pytest.fail("the hive-lab labextension is not installed: run ./scripts/setup.sh (pip install -e .)")
    tmp = tmp_path_factory.mktemp("lab-arrays")
    env = {"PATH": str(pathlib.Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    if (BUILD / "package.json").exists():  # this checkout's build first (federated extensions: first found wins)
        ext = tmp / "jupyter-path" / "labextensions"
        ext.mkdir(parents=True)
        (ext / "hive-lab").symlink_to(BUILD)
        env["JUPYTER_PATH"] = str(tmp / "jupyter-path")
    srv = LiveServer(tmp, lab=True, env=env, extra_args=lab_args(tmp))
    write_lab_page_config(srv.config_dir)
    srv.start(timeout=90)
    yield srv
    srv.close()


def test_an_array_is_one_row_that_opens_into_its_elements(array_lab, chromium, tmp_path):
    go = tmp_path / "go"
    tmp_path.chmod(0o777)
    r = array_lab.request("POST", "arrays", json={
        "name": "sweep", "sweep": {"lr": [0.1, 0.01, 0.001]}, "array": "%1", "tasks": [{"gpus": 0}],
        "command": f"while [ ! -e {go} ]; do sleep 0.05; done"})
    assert r.status_code == 201, r.text
    array = r.json()
    context, lab = open_lab(chromium, array_lab, None)
    try:
        lab.open_panel()
        row = lab.page.locator(f"#hive-lab-panel .jp-HivePanel-array[data-array-id='{array['id']}']")
        expect(row.locator(".jp-HivePanel-arrayCounts")).to_have_text("1 running, 2 pending", timeout=20_000)
        expect(row.locator(".jp-HivePanel-jobName")).to_have_text("sweep [3]")
        # the running element is not a row of its own
        expect(lab.page.locator("#hive-lab-panel .jp-HivePanel-job")).to_have_count(0)
        row.locator(".jp-HivePanel-jobTop").click()
        elements = row.locator(".jp-HivePanel-arrayElement")
        expect(elements).to_have_count(3)
        expect(elements.nth(0)).to_have_attribute("data-state", "running")
        expect(elements.nth(1)).to_have_attribute("data-state", "pending")
        expect(elements.nth(2).locator(".jp-HivePanel-arrayParams")).to_have_text("lr=0.001")
        go.touch()  # the open row follows the elements as they run and end
        expect(row.locator(".jp-HivePanel-arrayCounts")).to_have_text("3 succeeded", timeout=60_000)
        expect(elements.nth(2)).to_have_attribute("data-state", "succeeded", timeout=20_000)
        assert not [c for c in lab.console if c.startswith("pageerror")], lab.console
    finally:
        context.close()


# The README's sweep (20 runs, at most 4 at once) as a person runs it in a notebook
SWEEP_CELL = (
    "%%submit --sweep lr=0.1,0.03,0.01,0.003,0.001 --sweep bs=16,32,64,128 --array %4 --name readme-sweep\n"
    "import json, os; lr, bs = float(os.environ['HIVE_PARAM_LR']), int(os.environ['HIVE_PARAM_BS'])\n"
    "loss = (lr - 0.05) ** 2 + 1 / bs  # your training here\n"
    "json.dump({'loss': loss}, open(os.environ['HIVE_OUTPUT_DIR'] + '/metrics.json', 'w'))\n"
)


def _notebook(cells: list[str]) -> str:
    import json

    return json.dumps({
        "cells": [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
                   "source": src} for i, src in enumerate(cells)],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4, "nbformat_minor": 5})


def test_an_array_cell_is_live_and_keeps_its_table_and_charts_after_save_reload_and_restart(array_lab, chromium):
    import json

    from fixtures.browser import RESULTS
    from waiting import wait_until

    path = array_lab.root_dir / "sweep.ipynb"
    path.write_text(_notebook(["%load_ext hive_lab", SWEEP_CELL]))
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text))
    page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
    url = f"{array_lab.url}lab/tree/sweep.ipynb?token={array_lab.token}"
    try:
        page.goto(url)
        page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first.wait_for(timeout=60_000)
        expect(page.locator(".jp-StatusBar-Widget", has_text="Idle").first).to_be_visible(timeout=60_000)
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        out = page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".jp-OutputArea")

        def shows_the_end(out) -> None:
            view = out.locator(".jp-HiveView[data-view='array']")
            expect(view.locator(".hive-array-status")).to_contain_text("ended: 20 succeeded", timeout=120_000)
            expect(view.locator("table.hive-array-results tbody tr")).to_have_count(20)
            expect(view.locator("table.hive-array-results th").nth(5)).to_have_text("loss")
            expect(view.locator(".jp-HiveView-charts canvas").first).to_be_visible(timeout=30_000)  # BokehJS drew it
            expect(out).not_to_contain_text("Error displaying widget")
            expect(out).not_to_contain_text("Traceback")

        # the cell ended at once; its display follows the elements to the end with no kernel action
        shows_the_end(out)
        expect(out.locator(".jp-OutputArea-output")).to_have_count(1)
        # one notice for the sweep, none per element
        expect(page.locator(".Toastify__toast", has_text="readme-sweep (a-")).to_contain_text(
            "ended: 20 succeeded", timeout=30_000)
        expect(page.locator(".Toastify__toast", has_text="readme-sweep[")).to_have_count(0)
        table = out.locator("table.hive-array-results")
        expect(table.locator("tbody tr").first.locator("td").nth(5)).to_have_text("0.008213")  # the best first
        table.locator("th", has_text="duration").click()  # sortable: by run time, then reversed
        table.locator("th", has_text="lr").click()
        expect(table.locator("tbody tr").first.locator("td").nth(2)).to_have_text("0.001")
        table.locator("th", has_text="lr").click()
        expect(table.locator("tbody tr").first.locator("td").nth(2)).to_have_text("0.1")
        page.screenshot(path=str(RESULTS / "array-cell.png"), full_page=True)
        page.keyboard.press("Control+s")
        wait_until(lambda: "20 succeeded" in path.read_text(), "the notebook saved with the final state")

        page.reload()  # reopened: the saved table and charts, the line from the server
        shows_the_end(page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".jp-OutputArea"))
        for s in array_lab.request("GET", "/api/sessions").json():  # the kernel restarted: still there
            assert array_lab.request("POST", f"/api/kernels/{s['kernel']['id']}/restart").status_code == 200
        page.reload()
        shows_the_end(page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".jp-OutputArea"))

        # a notebook from elsewhere (not signed here): the table, but the charts' Bokeh code is not run
        nb = json.loads(path.read_text())
        nb["cells"].append({"cell_type": "markdown", "id": "other", "metadata": {}, "source": "from a colleague"})
        nb["metadata"].pop("signature", None)
        (array_lab.root_dir / "theirs.ipynb").write_text(json.dumps(nb))
        open_in_lab(page, "theirs.ipynb")  # beside the first, in the same page
        theirs = page.locator(".jp-NotebookPanel", has=page.locator(".jp-MarkdownCell", has_text="from a colleague"))
        view = theirs.locator(".jp-HiveView[data-view='array']")
        expect(view.locator(".hive-array-status")).to_contain_text("20 succeeded", timeout=60_000)
        expect(view.locator("table.hive-array-results tbody tr")).to_have_count(20)
        expect(view.locator(".jp-HiveView-untrusted")).to_contain_text("not trusted")
        expect(view.locator(".jp-HiveView-charts canvas")).to_have_count(0)
        assert not [m for m in console if m.startswith("pageerror")], console
    finally:
        print("CONSOLE", "\n".join(console[-80:]))
        context.close()
        for s in array_lab.request("GET", "/api/sessions").json():
            array_lab.request("DELETE", f"/api/sessions/{s['id']}")
