"""A notebook's GPU kernel that waits, starts or is stopped: JupyterLab says so in a notification
(real Chromium, real ``jupyter lab`` with hive-lab; the kernel jobs go in through the REST API)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


def submit(server, **body):
    r = server.request("POST", "jobs", json={"tasks": [{"name": "main", "count": 1, "gpus": body.pop("gpus")}],
                                             **body})
    assert r.status_code == 201, r.text
    return r.json()


def test_a_waiting_kernel_says_why_then_that_it_started(lab_server, lab_page):
    blocker = submit(lab_server, name="blocker", command="sleep 120", gpus=4)
    lab_server.wait_for_job(blocker["id"], "running")
    kernel = submit(lab_server, name="kernel: analysis.ipynb", kind="kernel", command="sleep 120", gpus=1)
    assert lab_server.wait_for_job(kernel["id"], "queued")["reason"]
    page = lab_page.page
    waiting = page.get_by_text(f"The kernel of analysis.ipynb waits for GPUs (job {kernel['id']})")
    expect(waiting.first).to_be_visible(timeout=30_000)
    lab_server.request("DELETE", f"jobs/{blocker['id']}")
    expect(page.get_by_text("The kernel of analysis.ipynb got its GPUs").first).to_be_visible(timeout=30_000)
    expect(waiting).to_have_count(0)
    lab_server.request("DELETE", f"jobs/{kernel['id']}")
    lab_server.wait_for_job(kernel["id"], "cancelled", "succeeded", "failed")


def test_a_culled_kernel_is_announced(lab_server, lab_page):
    kernel = submit(lab_server, name="kernel: idle.ipynb", kind="kernel", command="sleep 120", gpus=1)
    lab_server.wait_for_job(kernel["id"], "running")
    page = lab_page.page
    lab_page.open_panel()  # the page knows the kernel runs (it lists it) before it is culled
    expect(page.locator(f"#hive-lab-panel .jp-HivePanel-job[data-job-id='{kernel['id']}']").first).to_be_visible()
    reason = "idle kernel culled: no execution for 1 h while holding 1 GPU"
    lab_server.request("DELETE", f"jobs/{kernel['id']}", params={"reason": reason})
    notice = page.get_by_text("The kernel of idle.ipynb was stopped:", exact=False).first
    expect(notice).to_be_visible(timeout=30_000)
    expect(notice).to_contain_text("idle kernel culled")
