"""The Lab heatmap's tooltip over a shared GPU, in a real Chromium against a real ``jupyter lab`` on a
fake-NVML machine: each share's row says its job, holder and its own GPU utilisation (NVML's
per-process SM utilisation of the share's process, as ``GET cluster`` gives it)."""

from __future__ import annotations

import json
import os
import pathlib
import sys
import time

import pytest
from playwright.sync_api import expect

from fixtures.fake_nvml import add_fault
from waiting import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

GATE = "class-over"


@pytest.fixture(scope="module")
def shares_lab(tmp_path_factory):
    """``jupyter lab`` with hive-lab on one fake RTX 4090 whose GPU is timesliced into shares."""
    from fixtures.browser import _labextension_installed, lab_args, write_lab_page_config
    from fixtures.fake_nvml import topology, write_description
    from fixtures.live_server import LiveServer

    if not _labextension_installed():
        pytest.fail("the hive-lab labextension is not installed: run ./scripts/setup.sh (pip install -e .)")
    tmp = tmp_path_factory.mktemp("shares-lab")
    hw = tmp / "hardware.yaml"
    write_description(hw, topology("single"))
    srv = LiveServer(
        tmp, lab=True, cluster_config=None,
        config={"HiveLabApp": {"nvml_backend": f"fake:{hw}", "gpu_sample_interval_s": 0.2, "stop_grace_s": 0.5,
                               "gpu_share_modes": {"*": "timeslice"}}},
        extra_args=lab_args(tmp),
        env={"PATH": str(pathlib.Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")},
    )
    write_lab_page_config(srv.config_dir)
    srv.start(timeout=90)
    srv.hw = hw
    yield srv
    (tmp / GATE).touch()
    srv.close()


def test_the_share_tooltip_shows_each_shares_utilisation(shares_lab, chromium):
    from fixtures.browser import open_lab

    srv = shares_lab
    gate = pathlib.Path(srv.hw).parent / GATE
    cmd = f'echo $$ > "$HIVE_OUTPUT_DIR/pid"; while [ ! -e {gate} ]; do sleep 0.1; done'
    ids = []
    for _ in range(2):
        r = srv.request("POST", "jobs", json={"command": cmd, "tasks": [{"gpus": 0.25}]})
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
    jobs = [srv.wait_for_job(j, "running", timeout=60) for j in ids]
    pid = int(wait_until(lambda: (p := pathlib.Path(jobs[0]["output_dir"]) / "pid").exists()
                         and p.read_text().strip(), "the first share's pid"))
    add_fault(srv.hw, {"at": 0, "gpu": 0, "utilization": 40,
                       "processes": [{"pid": pid, "used_memory_mb": 1000, "sm_util": 37}]})

    def measured():
        (g,) = srv.request("GET", "cluster").json()["gpus"]
        return {s["job"]: s for s in g["shares"]} if g["shares"][0].get("utilization") == 37 else None

    shares = wait_until(measured, "the first share's utilisation in the cluster view")
    assert shares[ids[1]]["utilization"] is None

    context, lab = open_lab(chromium, srv, None)
    try:
        lab.command("hive-lab:open-heatmap")
        canvas = lab.page.locator("canvas.jp-HiveHeatmap-canvas")
        expect(canvas).to_have_attribute("data-cells", "1", timeout=15_000)
        box = canvas.bounding_box()
        tooltip = lab.page.locator(".jp-HiveHeatmap-tooltip")
        # the tooltip is refreshed on each move; the cluster is refetched, so move until it shows 37%
        row0 = tooltip.locator(f"[data-key='share {shares[ids[0]]['slot']}/8']")
        row1 = tooltip.locator(f"[data-key='share {shares[ids[1]]['slot']}/8']")
        deadline = time.monotonic() + 30
        while True:
            cell = lab.page.evaluate("() => document.querySelector('canvas.jp-HiveHeatmap-canvas').hiveCells()")
            x, y = (cell[0]["x"], cell[0]["y"]) if cell else (4, 4)
            lab.page.mouse.move(box["x"] + x + 3, box["y"] + y + 3)
            if tooltip.is_visible() and row0.count() and "37% util" in row0.inner_text():
                break
            assert time.monotonic() < deadline, lab.console
            time.sleep(0.3)
        expect(row0).to_contain_text(ids[0])
        expect(row0).to_contain_text("0.25 GPU")
        expect(row1).to_contain_text(ids[1])
        expect(row1).not_to_contain_text("util")  # not measured: nothing claimed
        lab.screenshot("heatmap-shares")
    finally:
        context.close()
