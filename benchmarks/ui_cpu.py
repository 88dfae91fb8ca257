"""CPU seconds of browser/Hub test modules: the pytest process, its servers, kernels, Hub and Chromium.

    .venv/bin/python benchmarks/ui_cpu.py tests/ui/test_finish_walk.py tests/hub/test_hub_course.py
    .venv/bin/python benchmarks/ui_cpu.py --rounds 2 tests/ui/test_replay_widget.py -- -k widget
    .venv/bin/python benchmarks/ui_cpu.py --base main --rounds 2 tests/ui/test_replay_widget.py

``--base REV``: the same modules from REV's tests too (``git archive`` into a temporary directory, run with
this venv: the product is this tree's, only the tests differ), alternating which goes first each round.

Each module runs as its own ``pytest -n 0`` inside a fresh cpuacct cgroup (cgroup v1, as root), so every
process it starts is counted, also those that switch to a user's account or daemonise (a Hub's single-user
servers, Chromium's renderers); jobs the local launcher moves into their own cgroups are not (here they are
``sleep``s). Printed per module: the cgroup's CPU seconds, the wall time, the load average before the run,
and where the CPU went by process kind (sampled from /proc every 0.25 s, so processes that live shorter
than that are missed in the split, never in the total). A module that fails is reported as such.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
CPUACCT = pathlib.Path("/sys/fs/cgroup/cpuacct")
TICK = os.sysconf("SC_CLK_TCK")


def kind_of(pid: int) -> str:
    try:
        cmd = (pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")).decode(errors="replace")
    except OSError:
        return "gone"
    if "chrom" in cmd:
        if "--type=renderer" in cmd:
            return "chromium-renderer"
        if "--type=" in cmd:
            return "chromium-other"
        return "chromium-browser"
    if "playwright" in cmd and "node" in cmd:
        return "playwright-driver"
    if "ipykernel" in cmd or "kernel-" in cmd:
        return "kernel"
    if "pytest" in cmd:
        return "pytest"
    if "jupyterhub" in cmd and "singleuser" not in cmd:
        return "jupyterhub"
    if "configurable-http-proxy" in cmd or "/node" in cmd:
        return "node-other"
    if "jupyter" in cmd or "hive_lab" in cmd or "hive-lab" in cmd:
        return "jupyter-server"
    return "other:" + cmd.split(" ", 1)[0].rsplit("/", 1)[-1][:20]


def cpu_of(pid: int) -> float:
    try:
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return -1.0
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def measure(module: str, extra: list[str], root: pathlib.Path = ROOT) -> dict:
    group = CPUACCT / f"hive-ui-cpu-{os.getpid()}-{time.monotonic_ns()}"
    group.mkdir()
    load = os.getloadavg()[0]
    cmd = [sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", "-q", module, *extra]
    start = time.monotonic()
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as scripts/test.sh runs it
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            preexec_fn=lambda: (group / "cgroup.procs").write_text(str(os.getpid())))
    seen: dict[int, tuple[str, float]] = {}
    while proc.poll() is None:
        for line in (group / "cgroup.procs").read_text().split():
            pid = int(line)
            used = cpu_of(pid)
            if used >= 0:
                kind = seen.get(pid, (None,))[0] or kind_of(pid)
                seen[pid] = (kind, used)
        time.sleep(0.25)
    out = proc.stdout.read().decode(errors="replace")
    wall = time.monotonic() - start
    total = int((group / "cpuacct.usage").read_text()) / 1e9
    # the group may keep a straggler (a daemon that outlived pytest): it is counted until here
    for line in (group / "cgroup.procs").read_text().split():
        (CPUACCT / "cgroup.procs").write_text(line)
    group.rmdir()
    split: dict[str, float] = {}
    for kind, used in seen.values():
        split[kind] = split.get(kind, 0.0) + used
    return {"module": module, "cpu": total, "wall": wall, "load": load, "rc": proc.returncode,
            "split": split, "tail": out.strip().splitlines()[-1] if out.strip() else ""}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("modules", nargs="+")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--base", help="also run the modules from this git revision's tests")
    args, extra = ap.parse_known_args()
    extra = [a for a in extra if a != "--"]
    trees = {"this": ROOT}
    if args.base:
        base = pathlib.Path(tempfile.mkdtemp(prefix="ui-cpu-base-"))
        subprocess.run(f"git archive {args.base} | tar -x -C {base}", shell=True, cwd=ROOT, check=True)
        build = ROOT / "hive_lab" / "labextension"  # the built extension (not in git)
        if build.exists():
            shutil.copytree(build, base / "hive_lab" / "labextension", dirs_exist_ok=True)
        trees["base"] = base
    for r in range(args.rounds):
        for module in args.modules:
            for name in (list(trees) if r % 2 == 0 else list(reversed(trees))):
                m = measure(module, extra, trees[name])
                split = ", ".join(f"{k} {v:.1f}" for k, v in sorted(m["split"].items(), key=lambda kv: -kv[1]) if v >= 0.5)
                print(f"{name} {m['module']}: cpu {m['cpu']:.1f} s, wall {m['wall']:.1f} s, load {m['load']:.2f}, "
                      f"rc {m['rc']} [{m['tail']}] | {split}", flush=True)


if __name__ == "__main__":
    main()
