"""CPU of one JupyterLab page load in the test suite's Chromium: the browser's processes and the server's.

    .venv/bin/python benchmarks/bench_lab_load.py --loads 3 --rounds 2 --idle 10
    .venv/bin/python benchmarks/bench_lab_load.py --variant lab=base --variant "lab=lean,add=--disable-extensions;--mute-audio"

Starts two ``jupyter lab`` with hive-lab (as tests/fixtures/browser.py's ``lab_server``: ``lab=base`` with its
settings only, ``lab=lean`` with ``LAB_ARGS`` and the page config leaving out ``LAB_DISABLED``) and, per variant,
one Chromium (``flags=base``: the flags the suite used before issue 39, ``flags=lean``: ``CHROMIUM_ARGS``, plus
any ``add=`` flags, ``;``-separated); then loads JupyterLab ``--loads`` times (each in a fresh browser context,
as ``open_lab`` does; ``reuse=context``: one context, ``reuse=page``: one page) until hive-lab's panel is
attached and the splash is gone. Printed per variant: CPU seconds per load of Chromium (all its processes,
counted before it closes: processes it leaves to init would be lost) and of the server, the median over
rounds; with ``--idle S``, the CPU per second of the last page left open S seconds. Variants alternate within
each round.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

TICK = os.sysconf("SC_CLK_TCK")
BASE_FLAGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]


def tree_cpu(root: int) -> float:
    """CPU seconds of ``root`` and its live descendants, plus what their dead children used (cutime)."""
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for proc in pathlib.Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(proc.name)] = fields
            children.setdefault(int(fields[1]), []).append(int(proc.name))
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            f = stats[pid]
            total += (int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])) / TICK
        todo.extend(children.get(pid, []))
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", action="append", default=[], help="e.g. flags=lean,lab=lean,reuse=context")
    ap.add_argument("--loads", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--idle", type=float, default=0, help="then CPU per second of the last page left open this long")
    args = ap.parse_args()
    variants = args.variant or ["flags=base,lab=base", "flags=lean,lab=lean"]

    from playwright.sync_api import sync_playwright

    import fixtures.browser as browser
    from fixtures.live_server import LiveServer

    results: dict[str, list[tuple[float, float]]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        servers = {}
        for lean in (False, True):
            t = pathlib.Path(tmp) / f"lab-{lean}"
            settings = t / "user-settings"
            news = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
            news.parent.mkdir(parents=True)
            news.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
            extra = [f"--LabApp.user_settings_dir={settings}", f"--LabApp.workspaces_dir={t / 'ws'}"]
            if lean:
                extra += browser.LAB_ARGS
            srv = LiveServer(t, lab=True, extra_args=extra)
            if lean:
                browser.write_lab_page_config(srv.config_dir)
            servers[lean] = srv.start(timeout=120)
        driver = os.getpid()
        try:
            for _ in range(args.rounds):
                for variant in variants:
                    opts = dict(kv.split("=", 1) for kv in variant.split(","))
                    flags = BASE_FLAGS if opts.get("flags", "base") == "base" else browser.CHROMIUM_ARGS
                    flags = flags + [f for f in opts.get("add", "").split(";") if f]
                    srv = servers[opts.get("lab", "base") == "lean"]
                    chromium = pw.chromium.launch(executable_path=browser.CHROMIUM, args=flags, headless=True)
                    reuse = opts.get("reuse", "none")
                    context = page = None
                    servers_cpu = lambda: sum(tree_cpu(x.proc.pid) for x in servers.values())  # noqa: E731
                    before_b, before_s = tree_cpu(driver) - servers_cpu(), tree_cpu(srv.proc.pid)
                    for _ in range(args.loads):
                        if context is None or reuse == "none":
                            if context is not None:
                                context.close()
                            context = chromium.new_context(viewport={"width": 1400, "height": 900})
                            page = None
                        if page is None or reuse not in ("page",):
                            if page is not None:
                                page.close()
                            page = context.new_page()
                        page.goto(f"{srv.url}lab?reset&token={srv.token}")
                        page.locator("#hive-lab-panel").wait_for(state="attached", timeout=120_000)
                        page.locator("#jupyterlab-splash").wait_for(state="detached", timeout=120_000)
                    b = (tree_cpu(driver) - servers_cpu() - before_b) / args.loads
                    s = (tree_cpu(srv.proc.pid) - before_s) / args.loads
                    idle_b = idle_s = 0.0
                    if args.idle:
                        page.wait_for_timeout(3_000)  # what the load left running settles
                        before_b, before_s = tree_cpu(driver) - servers_cpu(), tree_cpu(srv.proc.pid)
                        page.wait_for_timeout(args.idle * 1000)
                        idle_b = (tree_cpu(driver) - servers_cpu() - before_b) / args.idle
                        idle_s = (tree_cpu(srv.proc.pid) - before_s) / args.idle
                    context.close()
                    chromium.close()
                    results[variant].append((b, s, idle_b, idle_s))
        finally:
            for srv in servers.values():
                srv.close()
    print(f"load average {os.getloadavg()[0]:.2f}; CPU s per JupyterLab load, median of {args.rounds}:")
    for variant, rows in results.items():
        print(f"  {variant}: chromium+driver {statistics.median(r[0] for r in rows):.2f}, "
              f"server {statistics.median(r[1] for r in rows):.2f}  (each: {[f'{r[0]:.2f}' for r in rows]})"
              + (f"; idle CPU s per s: chromium+driver {statistics.median(r[2] for r in rows):.3f}, "
                 f"server {statistics.median(r[3] for r in rows):.3f}" if args.idle else ""))


if __name__ == "__main__":
    main()
