"""A notebook open in JupyterLab whose GPU kernel is culled for idling or preempted: the page says so
in a notification with the reason, and its "Show notebook" button goes to that notebook (issue 15).

Real Chromium, real ``jupyter lab`` with hive-lab, a real hive GPU kernel started by JupyterLab for
the notebook (the ``hive`` provisioner), the real idle culler and a real preemption by a job of
higher priority.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

import pytest
from playwright.sync_api import expect

from fixtures.browser import lab_args, open_lab, write_lab_page_config
from hive_lab.cli.kernelspec import kernel_json

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

IDLE_LIMIT_S = 8.0
FINAL = ("cancelled", "succeeded", "failed")


@pytest.fixture(scope="module")
def kernel_lab(tmp_path_factory):
    """``jupyter lab`` with hive-lab (4 simulated GPUs) and a ``hive-gpu`` kernelspec (1 GPU) whose
    kernels are culled after ``IDLE_LIMIT_S`` s without execution."""
    from fixtures.browser import _labextension_installed
    from fixtures.live_server import LiveServer

    if not _labextension_installed():
        pytest.fail("the hive-lab labextension is not installed: run ./scripts/setup.sh (pip install -e .)")
    tmp = tmp_path_factory.mktemp("kernellab")
    specs = tmp / "specs"
    args = argparse.Namespace(gpus=1, gpu_type=None, vc=None, image=None, idle_timeout=None, cpus=0,
                              memory_mb=0, display_name="Python 3 (1 GPU)")
    (specs / "kernels" / "hive-gpu").mkdir(parents=True)
    (specs / "kernels" / "hive-gpu" / "kernel.json").write_text(json.dumps(kernel_json(args)))
    venv_bin = str(pathlib.Path(sys.executable).parent)
    jupyter_path = os.pathsep.join(p for p in (str(specs), os.environ.get("JUPYTER_PATH", "")) if p)
    srv = LiveServer(
        tmp,
        lab=True,
        config={"HiveProvisioner": {"idle_timeout_per_vc": {"default": IDLE_LIMIT_S}, "cull_interval_s": 0.3},
                "HiveLabApp": {"preemption_grace_s": 0.5}},
        extra_args=lab_args(tmp),
        env={"PATH": venv_bin + os.pathsep + os.environ.get("PATH", ""), "JUPYTER_PATH": jupyter_path},
    )
    write_lab_page_config(srv.config_dir)
    srv.start(timeout=90)
    yield srv
    srv.close()


@pytest.fixture
def page_of(kernel_lab, chromium):
    contexts = []

    def open_(path: str):
        context, lab = open_lab(chromium, kernel_lab, None, path=path)
        contexts.append(context)
        return lab

    yield open_
    for context in contexts:
        context.close()
    for job in kernel_lab.request("GET", "jobs?state=submitted,queued,scheduled,running&limit=500").json()["jobs"]:
        kernel_lab.request("DELETE", f"jobs/{job['id']}")
        kernel_lab.wait_for_job(job["id"], *FINAL, timeout=30)


def notebook_with_gpu_kernel(srv, name: str) -> None:
    notebook = {
        "cells": [{"cell_type": "code", "execution_count": None, "id": "c1", "metadata": {}, "outputs": [],
                   "source": "print('hi')"}],
        "metadata": {"kernelspec": {"display_name": "Python 3 (1 GPU)", "language": "python", "name": "hive-gpu"}},
        "nbformat": 4, "nbformat_minor": 5,
    }
    r = srv.request("PUT", f"/api/contents/{name}", json={"type": "notebook", "format": "json", "content": notebook})
    assert r.status_code in (200, 201), r.text


def open_notebook(page_of, srv, name: str):
    """A page opened at the notebook (``?reset``: a fresh workspace, no notebook of an earlier test reopened
    with its kernel); JupyterLab starts its hive GPU kernel: returns the page and that kernel's job."""
    lab = page_of(name)
    lab.page.locator(".jp-NotebookPanel:visible .jp-Cell").first.wait_for(state="visible", timeout=60_000)
    found = None
    for _ in range(300):
        jobs = [j for j in srv.request("GET", "jobs?limit=500").json()["jobs"]
                if j["kind"] == "kernel" and j["name"] == f"kernel: {name}" and j["state"] not in FINAL]
        if jobs:
            found = jobs
            break
        lab.page.wait_for_timeout(200)
    assert found, f"JupyterLab started no GPU kernel for {name}"
    return lab, srv.wait_for_job(found[0]["id"], "running")


def open_launcher(page, attempts: int = 5) -> None:
    """Opens a Launcher tab with the main area's "New Launcher" button (again if the click landed while
    JupyterLab was still restoring its layout and nothing opened)."""
    launcher = page.locator(".jp-Launcher").first
    for attempt in range(attempts):
        page.get_by_role("button", name="New Launcher", exact=True).first.click()
        try:
            launcher.wait_for(state="visible", timeout=5_000)
            return
        except Exception:  # noqa: BLE001 - not opened yet: again
            if attempt == attempts - 1:
                raise


def wait_toast_in_view(page, text: str) -> None:
    """Until the notification with ``text`` has slid fully into the window (for the screenshot)."""
    page.wait_for_function(
        """text => [...document.querySelectorAll('.Toastify__toast')].some(t => t.textContent.includes(text)
                    && t.getBoundingClientRect().right <= window.innerWidth)""",
        arg=text,
    )


def test_an_idle_gpu_kernel_culled_is_announced_in_its_open_notebook(kernel_lab, page_of):
    srv = kernel_lab
    notebook_with_gpu_kernel(srv, "idle.ipynb")
    lab, job = open_notebook(page_of, srv, "idle.ipynb")
    page = lab.page
    # the notebook loses focus (another tab) while its kernel idles
    open_launcher(page)
    notice = page.get_by_text("The kernel of idle.ipynb was stopped:", exact=False).first
    expect(notice).to_be_visible(timeout=60_000)  # the culler's limit, then the event
    expect(notice).to_contain_text("idle kernel culled")
    ended = srv.request("GET", f"jobs/{job['id']}").json()
    assert ended["state"] == "cancelled" and "idle kernel culled" in ended["reason"]
    wait_toast_in_view(page, "The kernel of idle.ipynb was stopped")
    lab.screenshot("kernel-culled-notification")
    page.get_by_role("button", name="Show notebook").first.click()
    expect(page.locator(".jp-NotebookPanel:visible")).to_have_count(1)
    expect(page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current")).to_contain_text("idle.ipynb")


def test_a_preempted_gpu_kernel_is_announced_in_its_open_notebook(kernel_lab, page_of):
    srv = kernel_lab
    notebook_with_gpu_kernel(srv, "train.ipynb")
    lab, job = open_notebook(page_of, srv, "train.ipynb")
    page = lab.page
    # run a cell: the kernel is busy, not idle, when an urgent job takes every GPU
    expect(page.get_by_role("button", name="Python 3 (1 GPU) | Idle")).to_be_visible(timeout=60_000)
    page.locator(".jp-NotebookPanel:visible .jp-Cell .cm-content").first.click()
    page.keyboard.press("Shift+Enter")
    expect(page.locator(".jp-NotebookPanel:visible .jp-OutputArea-output").first).to_contain_text("hi", timeout=60_000)
    urgent = srv.request("POST", "jobs", json={"name": "urgent", "command": "sleep 60", "priority": 500,
                                               "tasks": [{"name": "main", "count": 1, "gpus": 4}]})
    assert urgent.status_code == 201, urgent.text
    stopped = srv.wait_for_job(job["id"], "failed", "cancelled", "queued", timeout=60)
    assert "preempted" in stopped["reason"], stopped
    notice = page.get_by_text("The kernel of train.ipynb was stopped:", exact=False).first
    expect(notice).to_be_visible(timeout=30_000)
    expect(notice).to_contain_text("preempted by")
    wait_toast_in_view(page, "The kernel of train.ipynb was stopped")
    lab.screenshot("kernel-preempted-notification")
