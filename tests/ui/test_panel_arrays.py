"""A job array in the JupyterLab panel (real Chromium, real ``jupyter lab`` with hive-lab): one row with
its counts by state that opens into its elements; its elements are not rows of their own.

The page loads this checkout's build of the extension (``hive_lab/labextension``, built with ``jlpm build``
in labextension/) where there is one, ahead of the installed one."""

from __future__ import annotations

import os
import pathlib
import sys

import pytest
from playwright.sync_api import expect

from fixtures.browser import _labextension_installed, open_lab
from fixtures.live_server import LiveServer

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

BUILD = pathlib.Path(__file__).resolve().parents[2] / "hive_lab" / "labextension"


@pytest.fixture(scope="module")
def array_lab(tmp_path_factory):
    if not _labextension_installed():
        pytest.fail("the hive-lab labextension is not installed: run ./scripts/setup.sh (pip install -e .)")
    tmp = tmp_path_factory.mktemp("lab-arrays")
    env = {"PATH": str(pathlib.Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    if (BUILD / "package.json").exists():  # this checkout's build first (federated extensions: first found wins)
        ext = tmp / "jupyter-path" / "labextensions"
        ext.mkdir(parents=True)
        (ext / "hive-lab").symlink_to(BUILD)
        env["JUPYTER_PATH"] = str(tmp / "jupyter-path")
    settings = tmp / "user-settings"
    news = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True)
    news.write_text('{"fetchNews": "false", "checkForUpdates": false}')
    srv = LiveServer(tmp, lab=True, env=env,
                     extra_args=[f"--LabApp.user_settings_dir={settings}", f"--LabApp.workspaces_dir={tmp / 'ws'}"])
    srv.start(timeout=90)
    yield srv
    srv.close()


def test_an_array_is_one_row_that_opens_into_its_elements(array_lab, chromium, tmp_path):
    go = tmp_path / "go"
    tmp_path.chmod(0o777)
    r = array_lab.request("POST", "arrays", json={
        "name": "sweep", "sweep": {"lr": [0.1, 0.01, 0.001]}, "array": "%1", "tasks": [{"gpus": 0}],
        "command": f"while [ ! -e {go} ]; do sleep 0.05; done"})
    assert r.status_code == 201, r.text
    array = r.json()
    context, lab = open_lab(chromium, array_lab, None)
    try:
        lab.open_panel()
        row = lab.page.locator(f"#hive-lab-panel .jp-HivePanel-array[data-array-id='{array['id']}']")
        expect(row.locator(".jp-HivePanel-arrayCounts")).to_have_text("1 running, 2 pending", timeout=20_000)
        expect(row.locator(".jp-HivePanel-jobName")).to_have_text("sweep [3]")
        # the running element is not a row of its own
        expect(lab.page.locator("#hive-lab-panel .jp-HivePanel-job")).to_have_count(0)
        row.locator(".jp-HivePanel-jobTop").click()
        elements = row.locator(".jp-HivePanel-arrayElement")
        expect(elements).to_have_count(3)
        expect(elements.nth(0)).to_have_attribute("data-state", "running")
        expect(elements.nth(1)).to_have_attribute("data-state", "pending")
        expect(elements.nth(2).locator(".jp-HivePanel-arrayParams")).to_have_text("lr=0.001")
        go.touch()  # the open row follows the elements as they run and end
        expect(row.locator(".jp-HivePanel-arrayCounts")).to_have_text("3 succeeded", timeout=60_000)
        expect(elements.nth(2)).to_have_attribute("data-state", "succeeded", timeout=20_000)
        assert not [c for c in lab.console if c.startswith("pageerror")], lab.console
    finally:
        context.close()
