"""A data scientist's first screen (issue 30), in a real Chromium against a real ``jupyter lab`` that
serves its owner alone on a simulated cluster: the panel says the GPUs are simulated, the empty list
teaches two lines to try, admin sections stay away, long names wrap, finished jobs can be hidden and
several jobs cancelled at once."""

from __future__ import annotations

import json
import os
import pathlib
import sys

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def lone_lab(tmp_path_factory):
    """``jupyter lab`` for one person: its owner's token only (no token map of other users)."""
    from fixtures.browser import lab_args, write_lab_page_config
    from fixtures.live_server import LiveServer

    tmp = tmp_path_factory.mktemp("lone-lab")
    srv = LiveServer(tmp, lab=True, extra_args=lab_args(tmp),
                     env={"PATH": str(pathlib.Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")})
    write_lab_page_config(srv.config_dir)
    srv.start(timeout=90)
    yield srv
    srv.close()


@pytest.fixture
def lone_page(lone_lab, chromium):
    from fixtures.browser import open_lab

    context, lab = open_lab(chromium, lone_lab, None)
    yield lab
    context.close()


def test_the_first_screen_teaches_and_hides_what_a_lone_user_does_not_need(lone_page):
    srv, page = lone_page.server, lone_page.page
    me = srv.request("GET", "me").json()
    assert me["admin"] and not me["shared"]
    lone_page.open_panel()
    panel = page.locator("#hive-lab-panel")
    banner = panel.locator(".jp-HivePanel-simulated")
    expect(banner).to_be_visible(timeout=15_000)
    expect(banner).to_contain_text("Simulated cluster")
    expect(banner).to_contain_text("4 GPUs are modelled")
    welcome = panel.locator(".jp-HivePanel-welcome")
    expect(welcome).to_be_visible()
    expect(welcome.locator(".jp-HivePanel-exampleCode").first).to_have_text("%load_ext hive_lab")
    expect(welcome.locator("button.jp-HivePanel-copy")).to_have_count(3)
    # the owner is an admin of their own server, but there is nobody to look after: no instructor view
    expect(panel.locator(".jp-HivePanel-instructor")).to_have_count(1)
    expect(panel.locator(".jp-HivePanel-instructor")).to_be_hidden()
    lone_page.screenshot("first-screen")


def test_long_names_wrap_finished_jobs_hide_and_several_jobs_cancel_at_once(lone_page):
    srv, page = lone_page.server, lone_page.page
    long_name = "sweep-lr0.001-bs64-resnet50-imagenet-subset-run-with-a-very-long-name"
    done = srv.request("POST", "jobs", json={"name": "quick", "command": "true", "tasks": [{"gpus": 0, "cpus": 1}]}).json()
    srv.wait_for_job(done["id"], "succeeded")
    sleepers = [srv.request("POST", "jobs", json={"name": long_name if i == 0 else f"sleeper-{i}",
                                                  "command": "sleep 300", "tasks": [{"gpus": 1}]}).json()
                for i in range(3)]
    lone_page.open_panel()
    panel = page.locator("#hive-lab-panel")
    item = panel.locator(f".jp-HivePanel-job[data-job-id='{sleepers[0]['id']}']")
    expect(item).to_be_visible(timeout=15_000)
    name = item.locator(".jp-HivePanel-jobName")
    expect(name).to_have_text(long_name)  # whole, wrapped, not cut to "sweep-lr0.…"
    assert name.evaluate("n => n.scrollWidth <= n.clientWidth + 1")
    assert long_name in name.get_attribute("title")

    state = panel.locator("select.jp-HivePanel-stateFilter")
    state.select_option("finished")
    expect(panel.locator(f".jp-HivePanel-job[data-job-id='{done['id']}']")).to_be_visible()
    expect(item).to_have_count(0)
    state.select_option("active")
    expect(panel.locator(f".jp-HivePanel-job[data-job-id='{done['id']}']")).to_have_count(0)

    bulk = panel.locator("button.jp-HivePanel-bulkCancel")
    expect(bulk).to_be_hidden()
    for job in sleepers[:2]:
        panel.locator(f".jp-HivePanel-job[data-job-id='{job['id']}'] input.jp-HivePanel-select").check()
    expect(bulk).to_have_text("Cancel 2 selected")
    bulk.click()
    page.locator(".jp-Dialog button", has_text="Cancel jobs").click()
    for job in sleepers[:2]:
        assert srv.wait_for_job(job["id"], "cancelled", timeout=30)["state"] == "cancelled"
    assert srv.request("GET", f"jobs/{sleepers[2]['id']}").json()["state"] in ("queued", "running", "scheduled")
    expect(bulk).to_be_hidden(timeout=15_000)
    srv.request("DELETE", f"jobs/{sleepers[2]['id']}")
    srv.wait_for_job(sleepers[2]["id"], "cancelled", timeout=30)


def test_a_running_job_shows_its_progress_in_the_panel(lone_page):
    srv, page = lone_page.server, lone_page.page
    code = "import hive_lab, time; hive_lab.progress(0, total=100); time.sleep(1); hive_lab.progress(40, total=100); time.sleep(300)"
    job = srv.request("POST", "jobs", json={"name": "reports", "command": f'python -c "{code}"',
                                            "tasks": [{"gpus": 1}]}).json()
    srv.wait_for_job(job["id"], "running")
    lone_page.open_panel()
    line = page.locator(f"#hive-lab-panel .jp-HivePanel-job[data-job-id='{job['id']}'] .jp-HivePanel-progress")
    expect(line).to_contain_text("step 40 of 100", timeout=45_000)
    expect(line).to_contain_text("steps/s")
    srv.request("DELETE", f"jobs/{job['id']}")
    srv.wait_for_job(job["id"], "cancelled", timeout=30)


def test_a_notification_says_when_my_job_ends_and_opens_its_log(lone_page):
    srv, page = lone_page.server, lone_page.page
    lone_page.open_panel()
    job = srv.request("POST", "jobs", json={"name": "short-one", "command": "sleep 3; echo all done; exit 3",
                                            "tasks": [{"gpus": 1}]}).json()
    item = page.locator(f"#hive-lab-panel .jp-HivePanel-job[data-job-id='{job['id']}']")
    expect(item).to_be_visible(timeout=15_000)  # the page saw it waiting or running
    toast = page.locator(".Toastify__toast", has_text=f"short-one ({job['id']}) failed")
    expect(toast).to_be_visible(timeout=30_000)
    expect(toast).to_contain_text("exited with code 3")
    toast.locator("button", has_text="Show log").click()
    expect(page.locator("#hive-lab-logs .jp-HiveLogs-text")).to_contain_text("all done", timeout=15_000)


DROP = """([text, name]) => {
  const dt = new DataTransfer();
  dt.items.add(new File([text], name, {type: 'text/plain'}));
  const node = document.querySelector('#hive-lab-panel');
  node.dispatchEvent(new DragEvent('dragover', {dataTransfer: dt, bubbles: true, cancelable: true}));
  node.dispatchEvent(new DragEvent('drop', {dataTransfer: dt, bubbles: true, cancelable: true}));
}"""


def test_a_job_file_dropped_on_the_panel_runs_as_it_is(lone_page):
    """Issue 29: the panel takes a file dropped on it (here an sbatch script), says what became of it,
    and says why when the server refuses one."""
    srv, page = lone_page.server, lone_page.page
    lone_page.open_panel()
    script = "#!/bin/bash\n#SBATCH --job-name=dropped\n#SBATCH --gres=gpu:1\n#SBATCH --mail-type=END\necho from a dropped file\n"
    page.evaluate(DROP, [script, "train.sbatch"])
    toast = page.locator(".Toastify__toast", has_text="train.sbatch: submitted as sbatch")
    expect(toast).to_be_visible(timeout=30_000)
    expect(toast).to_contain_text("not applied")  # --mail-type: said, not silently dropped
    jobs = [j for j in srv.request("GET", "jobs").json()["jobs"] if j["name"] == "dropped"]
    assert len(jobs) == 1 and jobs[0]["spec"]["source"]["format"] == "sbatch"
    done = srv.wait_for_job(jobs[0]["id"], "succeeded", "failed", timeout=60)
    assert done["state"] == "succeeded"
    page.evaluate(DROP, ["#!/bin/bash\n#SBATCH --frobnicate\nx\n", "bad.sbatch"])
    refused = page.locator(".Toastify__toast", has_text="bad.sbatch was not submitted")
    expect(refused).to_be_visible(timeout=30_000)
    expect(refused).to_contain_text("unknown sbatch option")


IMAGE_JOB = """apiVersion: batch/v1
kind: Job
metadata: {name: dropped-k8s}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
        - {name: main, image: "python:3.12-slim", command: [sh, -c, "echo from a dropped manifest"]}
"""


def test_a_dropped_file_with_an_image_is_offered_no_image(lone_page):
    """Issue 40, 6: on a server without containers a dropped file naming an image was refused with no way
    out; the drop now says why and offers --no-image, and the job says that image was not applied."""
    srv, page = lone_page.server, lone_page.page
    lone_page.open_panel()
    page.evaluate(DROP, [IMAGE_JOB, "train-job.yaml"])
    dialog = page.locator(".jp-Dialog", has_text="train-job.yaml names a container image")
    expect(dialog).to_be_visible(timeout=30_000)
    expect(dialog).to_contain_text("submit with --no-image")
    dialog.locator("button", has_text="Run as processes (--no-image)").click()
    toast = page.locator(".Toastify__toast", has_text="train-job.yaml: submitted as kubernetes")
    expect(toast).to_be_visible(timeout=30_000)
    expect(toast).to_contain_text("not applied: spec.template.spec.containers[0].image: 'python:3.12-slim'")
    jobs = [j for j in srv.request("GET", "jobs").json()["jobs"] if j["name"] == "dropped-k8s"]
    assert len(jobs) == 1
    notes = srv.request("GET", f"jobs/{jobs[0]['id']}").json()["spec"]["source"]["not_applied"]
    assert any("'python:3.12-slim' not applied (--no-image)" in n for n in notes), notes
    assert srv.wait_for_job(jobs[0]["id"], "succeeded", "failed", timeout=60)["state"] == "succeeded"
