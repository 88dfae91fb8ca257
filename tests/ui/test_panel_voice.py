"""The panel's finish (issue 9) in a real Chromium against a real ``jupyter lab`` with hive-lab: running and
waiting work above what has ended (arrays too), job names wrapped at word boundaries with the full name on
hover, the log viewer as a main-area tab, and a toast that keeps its actions visible."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from waiting import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

ACTIVE = ("submitted", "queued", "scheduled", "running")


@pytest.fixture(autouse=True)
def no_active_jobs_after(lab_server):
    yield
    jobs = lab_server.request("GET", "jobs?state=" + ",".join(ACTIVE) + "&limit=500").json()["jobs"]
    for job in jobs:
        lab_server.request("DELETE", f"jobs/{job['id']}")
    for job in jobs:
        lab_server.wait_for_job(job["id"], "cancelled", "succeeded", "failed", timeout=30)


def submit(srv, name, command="sleep 120", gpus=0):
    r = srv.request("POST", "jobs", json={"name": name, "command": command, "tasks": [{"gpus": gpus}]})
    assert r.status_code == 201, r.text
    return r.json()


ROWS = "el => Array.from(el.querySelectorAll(':scope > li')).map(li => li.dataset.jobId || li.dataset.arrayId || '')"


def test_running_and_waiting_work_comes_before_what_has_ended(lab_page):
    srv = lab_page.server
    running = submit(srv, "still-going")
    srv.wait_for_job(running["id"], "running")
    r = srv.request("POST", "arrays", json={"name": "done-sweep", "array": "0-1", "tasks": [{"gpus": 0}],
                                            "command": "true"})
    assert r.status_code == 201, r.text
    array = r.json()
    wait_until(lambda: srv.request("GET", f"arrays/{array['id']}").json()["state"] == "ended", "the array to end",
               timeout=60)
    ended = submit(srv, "finished", command="true")
    srv.wait_for_job(ended["id"], "succeeded")
    lab_page.open_panel()
    rows = lab_page.page.locator("#hive-lab-panel .jp-HivePanel-jobList")
    expect(rows.locator(f"[data-array-id='{array['id']}']")).to_be_attached(timeout=20_000)
    expect(rows.locator(f"[data-job-id='{ended['id']}']")).to_be_attached(timeout=20_000)
    order = rows.evaluate(ROWS)
    # the newest (ended) job and the ended array sit below the older running job
    assert order.index(running["id"]) < order.index(array["id"]), order
    assert order.index(running["id"]) < order.index(ended["id"]), order


WORD_FIT = """el => {
  const cs = getComputedStyle(el);
  const ctx = document.createElement('canvas').getContext('2d');
  ctx.font = `${cs.fontStyle} ${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
  const longest = Math.max(...el.textContent.split(/\\s+/).map(w => ctx.measureText(w).width));
  const box = el.getBoundingClientRect();
  const line = parseFloat(cs.lineHeight) || parseFloat(cs.fontSize) * 1.2;
  return {width: box.width, longest, lines: Math.round(box.height / line), wrap: cs.overflowWrap};
}"""


def test_long_names_wrap_between_words_and_show_whole_on_hover(lab_page):
    srv = lab_page.server
    name = "kernel: quarterly results analysis with bootstrapped confidence intervals.ipynb"
    job = submit(srv, name)
    srv.wait_for_job(job["id"], "running")
    lab_page.open_panel()
    label = lab_page.page.locator(f"#hive-lab-panel .jp-HivePanel-job[data-job-id='{job['id']}'] .jp-HivePanel-jobName")
    expect(label).to_have_text(name, timeout=20_000)
    assert label.get_attribute("title").startswith(name)  # the full name on hover
    # measured on a laid-out row: the panel re-renders a row when its job's state arrives, and a row it has
    # just replaced is measured detached (no box, no style: width 0, lines NaN)
    got = wait_until(lambda: (fit := label.evaluate(WORD_FIT))["width"] > 0 and fit["lines"] == fit["lines"] and fit,
                     what="the job's name laid out in the panel")
    assert got["lines"] >= 2, got  # it is long enough to wrap in the sidebar ...
    # ... and wraps between words: its box is as wide as its longest word (narrower, a word was cut)
    assert got["width"] + 0.5 >= got["longest"], got


def test_the_log_viewer_opens_in_the_main_area(lab_page):
    srv = lab_page.server
    line = "a log line long enough to need the width of the main area: " + "words " * 12
    job = submit(srv, "logs-wide", command=f"echo '{line}'; sleep 120")
    srv.wait_for_job(job["id"], "running")
    lab_page.open_panel()
    item = lab_page.page.locator(f"#hive-lab-panel .jp-HivePanel-job[data-job-id='{job['id']}']")
    item.locator(".jp-HivePanel-logsButton").click()
    viewer = lab_page.page.locator("#jp-main-dock-panel #hive-lab-logs")
    expect(viewer.locator(".jp-HiveLogs-text")).to_contain_text("a log line long enough", timeout=20_000)
    expect(lab_page.page.locator("#hive-lab-panel .jp-HiveLogs")).to_have_count(0)  # not in the sidebar
    tab = lab_page.page.locator("#jp-main-dock-panel .lm-TabBar-tab", has_text="Log: logs-wide")
    expect(tab).to_be_visible()
    assert viewer.locator(".jp-HiveLogs-text").bounding_box()["width"] > 600
    tab.locator(".lm-TabBar-tabCloseIcon").click()  # closing the tab stops following; it opens again
    expect(viewer).to_have_count(0)
    item.locator(".jp-HivePanel-logsButton").click()
    expect(viewer.locator(".jp-HiveLogs-text")).to_contain_text("a log line long enough", timeout=20_000)


def test_a_long_notice_keeps_its_actions_visible(lab_page):
    """A toast shows 140 characters of its message: a longer one keeps its buttons (Show log) and puts the
    whole text behind Details, instead of losing its end."""
    srv, page = lab_page.server, lab_page.page
    lab_page.open_panel()
    name = "preprocess-" + "-".join(["shard"] * 16)  # a long name pushes the reason past the toast's 140
    job = submit(srv, name, command="sleep 2; echo all done; exit 3")
    item = page.locator(f"#hive-lab-panel .jp-HivePanel-job[data-job-id='{job['id']}']")
    expect(item).to_be_visible(timeout=15_000)  # the page saw it waiting or running
    toast = page.locator(".Toastify__toast", has_text=f"{name} ({job['id']}) failed")
    expect(toast).to_be_visible(timeout=30_000)
    expect(toast.locator("button", has_text="Show log")).to_be_visible()
    toast.locator("button", has_text="Details").click()
    expect(page.locator(".jp-Dialog")).to_contain_text("exited with code 3")
    page.locator(".jp-Dialog button", has_text="Ok").click()
    toast.locator("button", has_text="Show log").click()
    expect(page.locator("#hive-lab-logs .jp-HiveLogs-text")).to_contain_text("all done", timeout=15_000)
