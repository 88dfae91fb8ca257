"""``hive_lab.replay`` in a notebook in a real Chromium against a real ``jupyter lab`` with hive-lab (issue 28):
the cell's output shows the live check, the change's effect and the bokeh charts.

Three 1-GPU jobs of ann and bob ran one after the other in cv-101 (1 GPU); carol (admin) replays the
week with cv-101 at 3 GPUs from a notebook cell.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys

import pytest
from playwright.sync_api import expect

from fixtures.browser import RESULTS, lab_args, open_lab, run_from_palette, write_lab_page_config

pytestmark = [pytest.mark.browser, pytest.mark.timeout(400)]

CLUSTER = {"nodes": 1, "gpus_per_node": 4, "gpu_type": "T4", "vcs": {"cv-101": 1, "lab": 3}}


@pytest.fixture(scope="module")
def replay_lab(tmp_path_factory):
    from fixtures.browser import _labextension_installed
    from fixtures.live_server import LiveServer

    if not _labextension_installed():
        pytest.fail("the hive-lab labextension is not installed: run ./scripts/setup.sh (pip install -e .)")
    tmp = tmp_path_factory.mktemp("replaylab")
    venv_bin = str(pathlib.Path(sys.executable).parent)
    srv = LiveServer(tmp, lab=True, cluster_config=CLUSTER,
                     users={"ann": {"groups": ["cv-101"]}, "bob": {"groups": ["cv-101"]}, "carol": {}},
                     vc_access={"@cv-101": ["cv-101"]}, admin_users=["carol"],
                     config={"HiveLabApp": {"overflow": False}},
                     extra_args=lab_args(tmp), env={"PATH": venv_bin + os.pathsep + os.environ.get("PATH", "")})
    write_lab_page_config(srv.config_dir)
    srv.start(timeout=90)
    try:
        ids = [srv.request("POST", "jobs", user=u, json={"vc": "cv-101", "command": "sleep 2",
                                                          "tasks": [{"gpus": 1}]}).json()["id"]
               for u in ("ann", "bob", "ann")]
        for job_id in ids:
            srv.wait_for_job(job_id, "succeeded", timeout=60)
        yield srv
    finally:
        srv.close()


def _notebook(path: pathlib.Path, url: str, token: str) -> None:
    source = ("import hive_lab\n"
              "from hive_lab.client import Client\n"
              f"r = hive_lab.replay(since='7d', changes={{'vcs': {{'cv-101': 3}}}}, client=Client({url!r}, {token!r}))\n"
              "r")
    path.write_text(json.dumps({
        "cells": [{"cell_type": "code", "execution_count": None, "id": "replay", "metadata": {}, "outputs": [],
                   "source": source}],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4, "nbformat_minor": 5}))


def test_the_replay_widget_shows_sentences_and_charts(replay_lab, chromium):
    _notebook(replay_lab.root_dir / "replay.ipynb", replay_lab.url, replay_lab.tokens["carol"])
    context, lab = open_lab(chromium, replay_lab, None, path="replay.ipynb")  # one page load, at the notebook
    try:
        page = lab.page
        page.locator(".jp-Notebook .jp-Cell").first.wait_for(state="visible", timeout=60_000)
        # JupyterLab may ask which kernel to start (the notebook names one): take it, whenever it asks
        select = page.locator(".jp-Dialog").get_by_role("button", name="Select")
        view = page.locator(".hive-lab-replay-view")
        ran = False
        for _ in range(240):
            if select.is_visible():
                select.click()
            elif view.is_visible():
                break
            elif not ran and "Idle" in page.locator(".jp-StatusBar-Widget").all_inner_texts().__str__():
                page.locator(".jp-Notebook .jp-Cell").first.click()
                run_from_palette(page, "Run All Cells")
                ran = True
            page.wait_for_timeout(500)
        if not view.is_visible():
            lab.screenshot("replay-widget-failed")
            raise AssertionError(f"no replay view: {page.locator('.jp-OutputArea').all_inner_texts()} {lab.console[-10:]}")
        expect(view.locator(".hive-lab-replay")).to_contain_text("matches what was observed", timeout=30_000)
        expect(view.locator(".hive-lab-replay")).to_contain_text(
            "with cv-101 at 3 GPUs (was 1) and 1 more node to hold it: 90 % of cv-101's jobs start")
        canvases = view.locator("canvas")
        expect(canvases.nth(4)).to_be_attached(timeout=60_000)  # five charts drawn
        assert lab.console == [] or not any("pageerror" in line for line in lab.console), lab.console
        RESULTS.mkdir(parents=True, exist_ok=True)
        view.screenshot(path=str(RESULTS / "replay-widget.png"))
    finally:
        context.close()
