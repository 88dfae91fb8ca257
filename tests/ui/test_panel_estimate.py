"""The panel shows a queued job's estimated start and what it rests on (a real Chromium against a real
``jupyter lab``; the estimate comes from the server's ``estimated_start``)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


def submit(server, body):
    r = server.request("POST", "jobs", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def test_queued_job_shows_its_estimated_start(lab_page):
    srv = lab_page.server
    running = submit(srv, {"name": "holder", "command": "sleep 300", "time_limit_s": 7200,
                           "tasks": [{"name": "main", "gpus": 4}]})
    srv.wait_for_job(running["id"], "running")
    queued = submit(srv, {"name": "waits", "command": "true", "tasks": [{"name": "main", "gpus": 1}]})
    srv.wait_for_job(queued["id"], "queued")
    try:
        lab_page.open_panel()
        item = lab_page.page.locator(f"#hive-lab-panel .jp-HivePanel-job[data-job-id='{queued['id']}']")
        expect(item).to_have_attribute("data-state", "queued", timeout=15_000)
        estimate = item.locator(".jp-HivePanel-estimate")
        # the cell's and the CLI's words (hive_lab.format.estimate_text), the clock time on hover
        expect(estimate).to_have_text(re.compile(r"^Starts in ~1 h 5\d min \("))
        expect(estimate).to_have_attribute("title", re.compile(r"^about "))
        expect(estimate).to_contain_text(f"(when {running['id']} ends (its time limit of 2h))")
        # the running job has none
        running_item = lab_page.page.locator(f"#hive-lab-panel .jp-HivePanel-job[data-job-id='{running['id']}']")
        expect(running_item.locator(".jp-HivePanel-estimate")).to_have_count(0)
        lab_page.screenshot("panel-estimated-start")
    finally:
        for job in (queued, running):
            srv.request("DELETE", f"jobs/{job['id']}")
        srv.wait_for_job(running["id"], "cancelled", timeout=30)
