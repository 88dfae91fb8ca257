"""The newest surfaces, walked as an ordinary Unix user (issue 37's "done when"): her own ``jupyter lab`` on the
embedded default, a real Chromium, the README's sweep cell.

- the README's 20-run sweep: no traceback, the cell ends "20 succeeded" with its table and chart, and still
  shows them after a save, a reload and a kernel restart;
- a quiet job with progress: the cell shows its steps while it runs;
- a cron cell run twice: one schedule, one line;
- an OpenPAI v2 and a Kubernetes Job file naming images, from her terminal with ``--no-image``: both succeed;
- a replay whose change changes nothing says so.
"""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from fixtures.browser import open_in_lab
from fixtures.job_files import K8S_JOB, PAI_V2
from fixtures.readme import python_blocks, section
from playwright_loop import jp_asyncio_loop, jp_server_cleanup  # noqa: F401 (fixtures: Playwright's loop)
from test_first_hour import cell_output, her_lab, notebook, open_notebook, run_all, save  # noqa: F401 (her_lab)
from waiting import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]


def readme_sweep() -> str:
    return next(b for b in python_blocks(section("Your first job")) if b.startswith("%%submit --sweep"))


def open_here(page, name: str) -> None:
    """Opens another notebook in the Lab already loaded (no page load: a reload is checked once, above), and
    waits until its kernel is idle: the status bar follows the current tab (``open_in_lab`` waited for it to
    be this notebook's) and says Idle only once its kernel is connected. (The execution indicator says idle
    before that: Run All then finds no kernel and runs nothing, seen under load.)"""
    open_in_lab(page, name)
    panel = page.locator(".jp-NotebookPanel:visible")
    panel.locator(".jp-Cell").first.wait_for(state="visible", timeout=90_000)
    expect(page.locator(".jp-StatusBar-Widget", has_text="Idle").first).to_be_visible(timeout=90_000)


def test_the_newest_surfaces_as_an_ordinary_user(her_lab, chromium):
    lab = her_lab
    go = lab.work / "go-quiet"
    quiet = ("%%submit --gpus 1 --name quiet\n"
             "import os, time\nfrom hive_lab import progress\n"
             "progress(1, total=3)\n"
             f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.1)\n"
             "progress(3, total=3)\n")
    lab.write("walk.ipynb", notebook(["%load_ext hive_lab", readme_sweep(), quiet]))
    lab.write("cron.ipynb", notebook(["%load_ext hive_lab",
                                      "%%submit --cron '0 0 * * *' --tz Europe/Berlin --name nightly\nprint('grading')\n"]))
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        # 1. the sweep and the quiet job, from one Run All
        open_notebook(page, lab, "walk.ipynb")
        run_all(page)
        steps = cell_output(page, 2)
        expect(steps).to_contain_text("step 1 of 3", timeout=180_000)  # a quiet job's cell shows its steps
        sweep = cell_output(page, 1)

        def shows_the_sweep() -> None:
            view = sweep.locator(".jp-HiveView[data-view='array']")
            expect(view.locator(".hive-array-status")).to_contain_text("20 succeeded", timeout=240_000)
            expect(view.locator("table.hive-array-results tbody tr")).to_have_count(20)
            expect(view.locator(".jp-HiveView-charts canvas").first).to_be_visible(timeout=60_000)
            for stale in ("Traceback", "Error displaying widget", "callback failed"):
                expect(sweep).not_to_contain_text(stale)

        shows_the_sweep()
        go.touch()
        expect(steps).to_contain_text("quiet: succeeded", timeout=120_000)
        save(page, lab.work / "walk.ipynb", "20 succeeded")
        page.reload()
        page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(state="visible", timeout=90_000)
        sweep = cell_output(page, 1)
        shows_the_sweep()
        session = next(s for s in lab.api("GET", "/api/sessions").json() if s["path"].endswith("walk.ipynb"))
        assert lab.api("POST", f"/api/kernels/{session['kernel']['id']}/restart").status_code == 200
        page.reload()
        page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(state="visible", timeout=90_000)
        sweep = cell_output(page, 1)
        shows_the_sweep()

        # 2. a cron cell run twice: one schedule, and the cell's output is one line (opened in the same page)
        open_here(page, "cron.ipynb")
        for _ in range(2):
            run_all(page)
            expect(cell_output(page, 1)).to_contain_text("schedule nightly: every day at 00:00 Europe/Berlin",
                                                         timeout=60_000)
        expect(cell_output(page, 1)).to_contain_text("replaced the previous one")
        schedules = lab.api("GET", "schedules").json()["schedules"]
        assert [s["name"] for s in schedules] == ["nightly"], schedules
        shown = cell_output(page, 1).locator(".jp-OutputArea-output").all_inner_texts()
        assert len(shown) == 1 and len(shown[0].strip().splitlines()) == 1, shown  # one line

        # 3. job files that name images, on her personal install, from her terminal
        for name, text in (("walk.pai.yaml", PAI_V2), ("walk-job.yaml", K8S_JOB)):
            lab.write(name, text)
            ran = lab.as_her(f"hive-lab submit {name} --no-image --wait --json")
            assert ran.returncode == 0, (name, ran.stdout, ran.stderr)
            job = json.loads(ran.stdout)
            assert job["state"] == "succeeded" and job["spec"]["source"]["not_applied"], job

        # 4. a replay whose change changes nothing says so (one user's jobs: fair share orders them as fifo)
        lab.write("replay.ipynb", notebook([
            "import hive_lab\nr = hive_lab.replay(since='1d', policies=['hived', 'fair_share'], anomaly=False)\n"
            "print(r.effects[0])"]))
        open_here(page, "replay.ipynb")
        run_all(page)
        expect(cell_output(page, 0)).to_contain_text("no change, every job waits as long as under the live",
                                                     timeout=120_000)
        expect(cell_output(page, 0)).to_contain_text(re.compile(r"\d+ jobs over .* of history"))
        assert not errors, errors
        assert not lab.tracebacks(), lab.tracebacks()
    finally:
        context.close()
