"""The panel shows the caller's limits in each of their VCs ("your limits in default: 2 GPUs, 1 kernel"),
in a real Chromium against a real ``jupyter lab`` with hive-lab; a change an admin makes shows up."""

from __future__ import annotations

import getpass

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


@pytest.fixture
def no_limits_after(lab_server):
    yield
    lab_server.request("PUT", "vcs/default/limits", json={}).raise_for_status()


def test_the_panel_shows_my_limits_and_follows_changes(lab_page, no_limits_after):
    srv = lab_page.server
    me = getpass.getuser()  # the page is logged in with the server's own token: its owner
    srv.request("PUT", "vcs/default/limits",
                json={"default": {"max_gpus": 1}, "users": {me: {"max_gpus": 2, "max_kernels": 1}}}).raise_for_status()
    lab_page.open_panel()
    row = lab_page.page.locator("#hive-lab-panel .jp-HivePanel-vcRow[data-vc='default']")
    expect(row.locator(".jp-HivePanel-vcLimits")).to_have_text("your limits in default: 2 GPUs, 1 kernel",
                                                               timeout=15_000)
    lab_page.screenshot("panel-limits")
    # an admin changes them at run time: the "vcs" event makes the panel fetch them again
    srv.request("PUT", "vcs/default/limits", json={"users": {me: {"max_gpus": 3}}}).raise_for_status()
    expect(row.locator(".jp-HivePanel-vcLimits")).to_have_text("your limits in default: 3 GPUs", timeout=15_000)
    srv.request("PUT", "vcs/default/limits", json={}).raise_for_status()
    expect(row.locator(".jp-HivePanel-vcLimits")).to_have_count(0, timeout=15_000)
    expect(row).to_be_visible()
