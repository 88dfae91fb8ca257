"""The panel shows a job's run time limit, and the time left while it runs (real Chromium, real lab)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


def test_panel_shows_the_limit_and_the_time_left(lab_page):
    srv = lab_page.server
    ids = []
    try:
        for gpus, limit in ((4, 3600), (2, 7200)):
            r = srv.request("POST", "jobs", json={"command": "sleep 120", "time_limit_s": limit,
                                                  "tasks": [{"name": "main", "count": 1, "gpus": gpus}]})
            assert r.status_code == 201, r.text
            ids.append(r.json()["id"])
        srv.wait_for_job(ids[0], "running")
        srv.wait_for_job(ids[1], "queued")
        lab_page.open_panel()
        item = lab_page.page.locator(f"#hive-lab-panel .jp-HivePanel-job[data-job-id='{ids[0]}']")
        expect(item).to_have_attribute("data-state", "running", timeout=15_000)
        # the CLI's and the cell's words (hive_lab.format.time_limit_text), counted down in the panel
        expect(item.locator(".jp-HivePanel-limit")).to_have_text(re.compile(r"^(59 min \d\d s|1 h 00 min) left of 1h$"))
        queued = lab_page.page.locator(f"#hive-lab-panel .jp-HivePanel-job[data-job-id='{ids[1]}']")
        expect(queued.locator(".jp-HivePanel-limit")).to_have_text("limit 2h")
    finally:
        for job_id in ids:
            srv.request("DELETE", f"jobs/{job_id}")
        for job_id in ids:
            srv.wait_for_job(job_id, "cancelled", "succeeded", "failed", timeout=30)
