"""Time to render the JupyterLab topology heatmap for the ``philly`` model (2,816 GPUs) in Chromium.

Starts a real ``jupyter lab`` with hive-lab on the built-in ``philly`` cluster (local launcher, a temp
SQLite store), puts a few jobs on it so cells carry VC/job colours, then for each run loads JupyterLab
in Debian's headless chromium, opens the heatmap with the real command and reads the page's
performance marks:

- open -> painted: from the "open heatmap" command to the end of the first full paint (widget
  creation, layout of every GPU, drawing);
- layout + paint: one render of all cells at a new width (the work a resize or a new GPU list costs);
- repaint: one render after an event (new colours, same layout);
- GET cluster: fetching and parsing the per-GPU JSON the heatmap draws.

    .venv/bin/python benchmarks/bench_heatmap.py [--runs 5] [--cluster philly|big20k]

Target: open -> painted <= 500 ms.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fixtures.browser import launch_chromium, run_from_palette  # noqa: E402
from fixtures.live_server import LiveServer  # noqa: E402

OPEN_LABEL = "GPU cluster: open topology heatmap"


def populate(srv: LiveServer) -> int:
    """A few running jobs in several VCs so the heatmap has colours to draw."""
    vcs = [v["name"] for v in srv.request("GET", "vcs").json()["vcs"]]
    submitted = 0
    for k, vc in enumerate(vcs):
        for gpus in (8, 4, 2, 1):
            r = srv.request("POST", "jobs", json={"name": f"bench-{vc}-{gpus}", "vc": vc, "command": "sleep 600",
                                                 "tasks": [{"name": "main", "count": 1, "gpus": gpus}]})
            if r.status_code == 201:
                submitted += 1
    return submitted


def one_run(browser, srv: LiveServer, total: int) -> dict:
    context = browser.new_context(viewport={"width": 1600, "height": 1000}, device_scale_factor=1)
    page = context.new_page()
    page.set_default_timeout(60_000)
    try:
        page.goto(f"{srv.url}lab?reset&token={srv.token}")  # a fresh workspace: no heatmap restored
        page.locator(f".jp-HiveStatus-free[data-total='{total}']").wait_for(state="attached")
        run_from_palette(page, OPEN_LABEL)
        page.locator(f"canvas.jp-HiveHeatmap-canvas[data-cells='{total}']").wait_for(state="attached")
        page.wait_for_timeout(300)
        first = page.evaluate(
            """total => {
                const open = performance.getEntriesByName('hive-heatmap:open').pop().startTime;
                const ends = performance.getEntriesByName('hive-heatmap:render-end').filter(e => e.startTime > open);
                // The first paint at the widget's settled width (an earlier one may be at a provisional width).
                const width = ends[ends.length - 1].detail.width;
                const full = ends.find(e => e.detail.width === width && e.detail.cells === total);
                return {open_to_painted: full.startTime - open, renders: ends.length};
            }""",
            total,
        )
        # Layout + paint at a new width (what a resize costs), and a repaint with new colours.
        layouts, repaints = [], []
        for width in (1500, 1600, 1400, 1600, 1450):
            page.set_viewport_size({"width": width, "height": 1000})
            page.wait_for_timeout(150)
            layouts.append(float(page.locator("canvas.jp-HiveHeatmap-canvas").get_attribute("data-render-ms")))
        for mode in ("job", "state", "user", "vc", "job"):
            page.locator(".jp-HiveHeatmap-mode").select_option(mode)
            page.wait_for_timeout(50)
            repaints.append(float(page.locator("canvas.jp-HiveHeatmap-canvas").get_attribute("data-render-ms")))
        fetch_ms = page.evaluate(
            """async ([url, token, total]) => {
                const t0 = performance.now();
                const r = await fetch(url, {headers: {Authorization: 'token ' + token}});
                const data = await r.json();
                if (data.gpus.length !== total) throw new Error('unexpected GPU count ' + data.gpus.length);
                return performance.now() - t0;
            }""",
            [srv.api_url + "cluster", srv.token, total],
        )
        return {**first, "layout_paint": statistics.median(layouts), "repaint": statistics.median(repaints),
                "fetch": fetch_ms}
    finally:
        context.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cluster", default="philly", help="built-in model (philly: 2,816 GPUs; big20k: 20,000)")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        srv = LiveServer(tmp, cluster_config=args.cluster, lab=True)
        srv.start(timeout=120)
        try:
            jobs = populate(srv)
            time.sleep(1.0)
            cluster = srv.request("GET", "cluster").json()
            size = len(json.dumps(cluster))
            with sync_playwright() as pw:
                browser = launch_chromium(pw)
                try:
                    runs = [one_run(browser, srv, cluster["gpus_total"]) for _ in range(args.runs)]
                finally:
                    browser.close()
        finally:
            srv.close()

    def med(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    print(f"heatmap, {args.cluster} model: {cluster['gpus_total']} GPUs, {cluster['gpus_total'] - cluster['gpus_free']} busy "
          f"({jobs} jobs), GET cluster {size / 1024:.0f} KiB; Chromium headless, {args.runs} runs (medians)")
    print(f"  open -> painted        {med('open_to_painted'):8.1f} ms   (target <= 500 ms)")
    print(f"  layout + paint (all)   {med('layout_paint'):8.1f} ms")
    print(f"  repaint (new colours)  {med('repaint'):8.1f} ms")
    print(f"  GET cluster + parse    {med('fetch'):8.1f} ms")
    print("  per run open -> painted: " + ", ".join(f"{r['open_to_painted']:.0f}" for r in runs) + " ms")


if __name__ == "__main__":
    main()
