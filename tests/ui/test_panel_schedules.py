"""The panel lists schedules with their cron, time zone and next run (real Chromium, real lab)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


def test_panel_lists_schedules_with_their_next_run(lab_page):
    srv = lab_page.server
    r = srv.request("POST", "schedules", json={"name": "nightly-grade", "cron": "0 0 * * *",
                                               "timezone": "Europe/Berlin", "job": {"command": "true"}})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    paused = srv.request("POST", "schedules", json={"name": "held", "cron": "@hourly", "paused": True,
                                                    "job": {"command": "true"}}).json()["id"]
    try:
        lab_page.open_panel()
        row = lab_page.page.locator(f"#hive-lab-panel .jp-HivePanel-schedule[data-schedule-id='{sid}']")
        expect(row.locator(".jp-HivePanel-scheduleTitle")).to_have_text(
            "nightly-grade · every day at 00:00 (Europe/Berlin)", timeout=15_000)
        expect(row.locator(".jp-HivePanel-scheduleNext")).to_have_text(  # in its own zone, not 23:00 UTC (issue 40)
            re.compile(r"^next \d{4}-\d\d-\d\d 00:00 Europe/Berlin$"))
        expect(row.locator(".jp-HivePanel-scheduleLast")).to_have_text("no run yet")
        held = lab_page.page.locator(f"#hive-lab-panel .jp-HivePanel-schedule[data-schedule-id='{paused}']")
        expect(held.locator(".jp-HivePanel-scheduleNext")).to_have_text("paused")
    finally:
        for schedule_id in (sid, paused):
            srv.request("DELETE", f"schedules/{schedule_id}")
