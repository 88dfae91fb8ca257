"""A GPU kernel the service refuses: the student who opens the notebook reads the service's sentence in
JupyterLab (real Chromium, real ``jupyter lab`` with hive-lab), not a status code and an error dump."""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

import pytest
from playwright.sync_api import expect

from fixtures.browser import lab_args, write_lab_page_config
from fixtures.live_server import LiveServer
from hive_lab.cli.kernelspec import kernel_json

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

SENTENCE = "no GPU type 'A100' in this cluster"


@pytest.fixture(scope="module")
def refusing_lab(tmp_path_factory):
    """``jupyter lab`` with a kernelspec asking for a GPU type the simulated cluster does not have."""
    tmp = tmp_path_factory.mktemp("refused-lab")
    args = argparse.Namespace(gpus=1, gpu_type="A100", vc=None, image=None, idle_timeout=None, cpus=0,
                              memory_mb=0, display_name="Python 3 (1 A100 GPU)")
    (tmp / "specs" / "kernels" / "a100").mkdir(parents=True)
    (tmp / "specs" / "kernels" / "a100" / "kernel.json").write_text(json.dumps(kernel_json(args)))
    srv = LiveServer(
        tmp / "srv", lab=True,
        extra_args=lab_args(tmp),
        env={"JUPYTER_PATH": str(tmp / "specs"),
             "PATH": str(pathlib.Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")},
    )
    write_lab_page_config(srv.config_dir)
    srv.start(timeout=90)
    yield srv
    srv.close()


def test_opening_a_notebook_whose_gpu_kernel_is_refused_shows_the_services_sentence(refusing_lab, chromium):
    notebook = {"cells": [], "metadata": {"kernelspec": {"name": "a100", "display_name": "Python 3 (1 A100 GPU)",
                                                         "language": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    r = refusing_lab.request("PUT", "/api/contents/train.ipynb", json={"type": "notebook", "content": notebook})
    assert r.status_code in (200, 201), r.text
    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        page.goto(f"{refusing_lab.url}lab/tree/train.ipynb?token={refusing_lab.token}")
        dialog = page.locator(".jp-Dialog")
        expect(dialog).to_contain_text("hive-lab refused the kernel's GPU request", timeout=60_000)
        expect(dialog).to_contain_text(SENTENCE)
        expect(dialog).not_to_contain_text("Unhandled error")
        RESULTS = pathlib.Path(__file__).resolve().parents[2] / "test-results" / "ui"
        RESULTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(RESULTS / "kernel-refused.png"))
    finally:
        context.close()
    assert refusing_lab.request("GET", "jobs").json()["total"] == 0  # nothing was queued for it
