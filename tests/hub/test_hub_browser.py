"""Two students and their instructor in real Chromium browsers (Playwright, Debian's chromium) on the real
Hub: each logs in (DummyAuthenticator), opens JupyterLab in their own single-user server (client mode:
the panel talks to the one hive-lab service through it) and reads the GPU cluster panel.

- each student sees only their own jobs under "My jobs"; ann's second job queues (her course's VC,
  one GPU, is full) and its wait reason is shown;
- the instructor sees both students' jobs under "All jobs".
Screenshots: test-results/ui/hub-*.png.
"""

from __future__ import annotations

import time

import pytest
from hub_people import ANN, BOB, IVY
from playwright.sync_api import expect

from fixtures.browser import RESULTS
from playwright_loop import jp_asyncio_loop, jp_server_cleanup  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]




def submit(hub, user, vc, name):
    body = {"name": name, "command": "sleep 600", "vc": vc, "tasks": [{"gpus": 1}]}
    r = hub.request("POST", f"/user/{user}/hive_lab/api/jobs", user=user, json=body)
    assert r.status_code == 201, r.text
    return r.json()


def wait_state(hub, job_id, *states, timeout=60):
    deadline = time.monotonic() + timeout
    while (job := hub.service("GET", f"jobs/{job_id}", IVY).json())["state"] not in states:
        assert time.monotonic() < deadline, f"job {job_id} stayed {job['state']} (wanted {states})"
        time.sleep(0.1)
    return job


def open_lab(chromium, hub, user):
    """A fresh browser: the Hub's login page, then JupyterLab in ``user``'s server, layout restored."""
    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    # the login page, asked to go on to her Lab: one JupyterLab load (not her server's default page, then Lab)
    page.goto(f"{hub.url}/hub/login?next=/user/{user}/lab")
    page.locator("#username_input").fill(user)
    page.locator("#password_input").fill(hub.password)
    page.locator("#login_submit").click()
    page.wait_for_url(f"**/user/{user}/lab**", timeout=120_000)  # the Hub sends her to her running server
    page.locator("#hive-lab-panel").wait_for(state="attached", timeout=120_000)
    page.locator("#jupyterlab-splash").wait_for(state="detached", timeout=120_000)
    if not page.locator("#hive-lab-panel").is_visible():
        page.locator(".jp-SideBar [data-id='hive-lab-panel']").first.click()
    page.locator("#hive-lab-panel").wait_for(state="visible")
    return context, page


def job_item(page, job_id):
    return page.locator(f"#hive-lab-panel .jp-HivePanel-job[data-job-id='{job_id}']")


def shot(page, name):
    RESULTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(RESULTS / f"hub-{name}.png"))


def test_students_see_their_own_jobs_and_the_instructor_sees_all(hub, chromium):
    hub.start_servers(IVY)
    a1 = submit(hub, ANN, "cv-101", "ann-train")
    b1 = submit(hub, BOB, "nlp-201", "bob-train")
    wait_state(hub, a1["id"], "running")
    wait_state(hub, b1["id"], "running")
    a2 = submit(hub, ANN, "cv-101", "ann-waits")
    contexts = []
    try:
        reason = wait_state(hub, a2["id"], "queued")["reason"]
        assert reason and "cv-101" in reason

        context, ann = open_lab(chromium, hub, ANN)
        contexts.append(context)
        expect(ann.locator("#hive-lab-panel .jp-HivePanel-counts")).to_contain_text(f"· {ANN}")
        expect(job_item(ann, a1["id"])).to_have_attribute("data-state", "running")
        expect(job_item(ann, a2["id"])).to_have_attribute("data-state", "queued")
        expect(job_item(ann, a2["id"]).locator(".jp-HivePanel-reason")).to_have_text(reason)
        expect(job_item(ann, b1["id"])).to_have_count(0)  # bob's job is not hers
        shot(ann, "ann-my-jobs")

        context, bob = open_lab(chromium, hub, BOB)
        contexts.append(context)
        expect(bob.locator("#hive-lab-panel .jp-HivePanel-counts")).to_contain_text(f"· {BOB}")
        expect(job_item(bob, b1["id"])).to_have_attribute("data-state", "running")
        expect(job_item(bob, a1["id"])).to_have_count(0)
        expect(job_item(bob, a2["id"])).to_have_count(0)
        shot(bob, "bob-my-jobs")

        context, ivy = open_lab(chromium, hub, IVY)
        contexts.append(context)
        expect(ivy.locator("#hive-lab-panel .jp-HivePanel-counts")).to_contain_text(f"· {IVY} (admin)")
        ivy.locator("#hive-lab-panel .jp-HivePanel-tab[data-tab='all']").click()
        for job, user, state in ((a1, ANN, "running"), (a2, ANN, "queued"), (b1, BOB, "running")):
            expect(job_item(ivy, job["id"])).to_have_attribute("data-state", state)
            expect(job_item(ivy, job["id"]).locator(".jp-HivePanel-user")).to_have_text(user)
        expect(job_item(ivy, a2["id"]).locator(".jp-HivePanel-reason")).to_have_text(reason)
        shot(ivy, "instructor-all-jobs")
    finally:
        for context in contexts:
            context.close()
        for job in (a2, a1, b1):
            hub.service("DELETE", f"jobs/{job['id']}", IVY)
    for job in (a2, a1, b1):
        wait_state(hub, job["id"], "cancelled")
