"""Gavel's own simulator beside hive-lab's round-based simulator: JCT, makespan and whole-process time.

    .venv/bin/python benchmarks/bench_hetero.py [--runs 3] [--policies fifo,gandiva,...]
    .venv/bin/python benchmarks/bench_hetero.py --gavel /tmp/gavel --gavel-python /tmp/gavel-venv/bin/python --runs 3

Default input: ``poisson_96.trace`` (96 jobs, Gavel's generator, Poisson arrivals) on 4 V100 + 4 P100
+ 4 K80, 360 s rounds, seed 0. Without ``--gavel`` it runs ``hive-lab simulate --json`` as a separate
process ``--runs`` times per policy and prints our figures beside Gavel's recorded ones (the table in
docs/simulation.md, measured with ``--gavel``). With ``--gavel DIR`` (a Gavel checkout: DIR or
DIR/scheduler holds ``scripts/drivers/simulate_scheduler_with_trace.py``; ``--gavel-python`` is the
interpreter that has its dependencies) it runs Gavel's process and ours in alternation on the same
trace, cluster, seed and round length, and prints both side by side with ratios. Times are the whole
process (start-up and imports included): median wall seconds and median CPU seconds (user + system).
A measurement, not a test; the machine's load average is printed before and after.

``--baseline DIR`` (another hive-lab tree, e.g. main's: ``git archive main | tar -x -C DIR``) also runs
that tree's ``hive-lab simulate --json`` (``PYTHONPATH=DIR/scheduler:DIR``) in alternation with ours and
prints its medians beside ours, and whether the two printed the same figures. ``--importtime`` then
adds, for one policy, what ``python -X importtime`` says each tree's process imports (medians of
``--runs`` processes, milliseconds): all imports (cumulative), and the self times of the modules of
the core's ``hive_scheduler`` (its ``hetero`` package among them), numpy, scipy and ``hive_lab``. The child processes run with Python's bytecode
caches (``PYTHONDONTWRITEBYTECODE`` unset; a first, uncounted run writes them), as an installed
hive-lab has them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.normpath(os.path.join(HERE, "..", "scheduler", "hive_scheduler", "hetero", "data"))
DEFAULT_TRACE = os.path.join(DATA, "poisson_96.trace")
DEFAULT_CLUSTER = "v100:4,p100:4,k80:4"
POLICIES = ("fifo", "fifo_perf", "gandiva", "max_min_fairness", "max_min_fairness_perf", "finish_time_fairness",
            "finish_time_fairness_perf", "min_total_duration", "min_total_duration_perf", "max_sum_throughput_perf")
# Gavel's own simulator (its scheduler.py's simulation path, ECOS through cvxpy), poisson_96.trace on
# 4 V100 + 4 P100 + 4 K80, 360 s rounds, seed 0, as measured by --gavel --runs 3 (docs/simulation.md):
# (average JCT s, makespan s, median wall s, median CPU s); the times at load average 9-14
RECORDED = {
    ("poisson_96.trace", DEFAULT_CLUSTER): {
        "fifo": (43_025, 137_654, 5.61, 1.90),
        "fifo_perf": (35_841, 101_604, 5.73, 1.82),
        "gandiva": (37_848, 86_626, 45.51, 12.95),
        "max_min_fairness": (47_811, 101_556, 6.52, 1.83),
        "max_min_fairness_perf": (34_792, 81_300, 3.80, 1.68),
        "finish_time_fairness": (48_810, 99_104, 25.36, 7.42),
        "finish_time_fairness_perf": (37_049, 83_535, 16.58, 5.60),
        "min_total_duration": (74_035, 96_950, 9.41, 2.93),
        "min_total_duration_perf": (59_430, 78_253, 8.51, 2.56),
        "max_sum_throughput_perf": (27_239, 88_488, 4.14, 1.57),
    },
}
_GAVEL_JCT = re.compile(r"Average job completion time: ([0-9.]+) seconds")
_GAVEL_SPAN = re.compile(r"Total duration: ([0-9.]+) seconds")


CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def tree_env(tree: str | None) -> dict[str, str]:
    """The environment of a child that runs ``tree``'s hive-lab (None: this one)."""
    if tree is None:
        return CHILD_ENV
    path = os.pathsep.join([os.path.join(tree, "scheduler"), tree, CHILD_ENV.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**CHILD_ENV, "PYTHONPATH": path}


def timed(cmd: list[str], cwd: str | None = None, env: dict[str, str] | None = None) -> tuple[str, float, float]:
    """(stdout, wall s, CPU s) of one whole process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env or CHILD_ENV)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return done.stdout, wall, cpu


def ours_cmd(trace: str, cluster: str, policy: str, seed: int, round_s: float) -> list[str]:
    return [sys.executable, "-m", "hive_lab.cli", "simulate", "--trace", trace, "--cluster", cluster,
            "--policy", policy, "--seed", str(seed), "--round-length", str(round_s), "--json"]


def gavel_dir(path: str) -> str:
    for d in (path, os.path.join(path, "scheduler")):
        if os.path.isfile(os.path.join(d, "scripts", "drivers", "simulate_scheduler_with_trace.py")):
            return d
    raise SystemExit(f"--gavel {path}: no scripts/drivers/simulate_scheduler_with_trace.py in it or in its scheduler/")


def gavel_cluster(cluster: str) -> str:
    """``v100:4,p100:4,k80:4`` -> Gavel's ``4:4:4`` (V100:P100:K80)."""
    counts = dict(part.split(":") for part in cluster.split(","))
    extra = set(counts) - {"v100", "p100", "k80"}
    if extra:
        raise SystemExit(f"--cluster {cluster}: Gavel's driver knows v100, p100 and k80 only, not {', '.join(sorted(extra))}")
    return ":".join(counts.get(t, "0") for t in ("v100", "p100", "k80"))


def gavel_cmd(python: str, trace: str, cluster: str, policy: str, seed: int, round_s: float) -> list[str]:
    return [python, os.path.join("scripts", "drivers", "simulate_scheduler_with_trace.py"), "-t", trace, "-p", policy,
            "-c", gavel_cluster(cluster), "--seed", str(seed), "--time_per_iteration", str(int(round_s)),
            "--throughputs_file", "simulation_throughputs.json"]


def parse_gavel(out: str) -> tuple[float, float]:
    jct, span = _GAVEL_JCT.search(out), _GAVEL_SPAN.search(out)
    if jct is None or span is None:
        raise SystemExit(f"Gavel printed no average JCT / total duration:\n{out[-1000:]}")
    return float(jct.group(1)), float(span.group(1))


def ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}" if b else "-"


def speed(theirs: float, ours: float) -> str:
    return f"{theirs / ours:.1f}" if theirs and ours else "-"


IMPORT_GROUPS = ("all", "hive_scheduler", "hive_scheduler.hetero", "numpy", "scipy", "hive_lab")
_IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)$")


def import_times(stderr: str) -> dict[str, float]:
    """Milliseconds per group from ``-X importtime``: "all" sums the cumulative times of the top-level
    imports (those made from code that is not itself being imported: everything the process imported);
    a package's group sums the self times of its own modules (without the standard library's they pull in)."""
    out = dict.fromkeys(IMPORT_GROUPS, 0.0)
    for line in stderr.splitlines():
        m = _IMPORT_LINE.match(line)
        if m is None:
            continue
        own, cumulative, depth, name = int(m.group(1)) / 1000, int(m.group(2)) / 1000, len(m.group(3)), m.group(4)
        if depth == 1:
            out["all"] += cumulative
        for group in IMPORT_GROUPS[1:]:
            if name == group or name.startswith(group + "."):
                out[group] += own
    return out


def compare_imports(trace: str, cluster: str, policy: str, seed: int, round_s: float, runs: int, baseline: str) -> None:
    cmd = [sys.executable, "-X", "importtime", *ours_cmd(trace, cluster, policy, seed, round_s)[1:]]
    got: dict[str, list[dict[str, float]]] = {"ours": [], "baseline": []}
    for _ in range(runs):
        for name, tree in (("baseline", baseline), ("ours", None)):
            done = subprocess.run(cmd, capture_output=True, text=True, env=tree_env(tree))
            if done.returncode != 0:
                raise SystemExit(f"{' '.join(cmd)} ({name}) failed:\n{done.stderr[-2000:]}")
            got[name].append(import_times(done.stderr))
    print(f"\n-X importtime, hive-lab simulate --policy {policy}: medians of {runs} processes each, ms "
          "(all: cumulative; a package: its own modules' self times)")
    print(f"{'imports':<24}{'ours':>8}{'baseline':>10}")
    for group in IMPORT_GROUPS:
        ours = statistics.median(r[group] for r in got["ours"])
        base = statistics.median(r[group] for r in got["baseline"])
        print(f"{group:<24}{ours:>8.1f}{base:>10.1f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", default=DEFAULT_TRACE)
    ap.add_argument("--cluster", default=DEFAULT_CLUSTER)
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--round-length", type=float, default=360.0)
    ap.add_argument("--gavel", metavar="DIR", help="a Gavel checkout: run its simulator beside ours, alternating")
    ap.add_argument("--gavel-python", default="python3", metavar="PY", help="the interpreter with Gavel's dependencies")
    ap.add_argument("--baseline", metavar="DIR", help="another hive-lab tree (e.g. main's): run its process beside ours")
    ap.add_argument("--importtime", metavar="POLICY", nargs="?", const="fifo",
                    help="with --baseline: also compare what the two processes import (default policy fifo)")
    args = ap.parse_args(argv)
    if args.importtime and not args.baseline:
        raise SystemExit("--importtime compares with --baseline DIR")
    trace = os.path.abspath(args.trace)
    gdir = gavel_dir(args.gavel) if args.gavel else None
    recorded = RECORDED.get((os.path.basename(trace), args.cluster), {}) if args.seed == 0 and args.round_length == 360 else {}
    print(f"{os.path.basename(trace)} on {args.cluster}, {args.round_length:g} s rounds, seed {args.seed}; "
          f"{args.runs} runs each{', alternating with Gavel' if gdir else ''}; {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    head = (f"{'policy':<26}{'JCT ours':>10}{'Gavel':>10}{'ratio':>7}{'span ours':>11}{'Gavel':>10}{'ratio':>7}"
            f"{'wall ours':>10}{'Gavel':>8}{'x':>6}{'cpu ours':>9}{'Gavel':>8}{'x':>6}")
    if args.baseline:
        head += f"{'base wall':>10}{'cpu':>6}{'cpu ours/base':>14}  figures"
    if not gdir and recorded:
        print("Gavel's columns: recorded (times at load average 9-14; --gavel measures both in one run)")
    print(head)
    for policy in args.policies.split(","):
        ours_w, ours_c, g_w, g_c, b_w, b_c = [], [], [], [], [], []
        doc = gavel = base_doc = None
        for run in range(args.runs + 1):
            warm_up = run == 0  # writes the bytecode caches; not counted
            if args.baseline:
                out, wall, cpu = timed(ours_cmd(trace, args.cluster, policy, args.seed, args.round_length),
                                       env=tree_env(args.baseline))
                base_doc = json.loads(out)["policies"][policy]
                if not warm_up:
                    b_w.append(wall)
                    b_c.append(cpu)
            if warm_up:
                if gdir:
                    timed(gavel_cmd(args.gavel_python, trace, args.cluster, policy, args.seed, args.round_length),
                          cwd=gdir)
                timed(ours_cmd(trace, args.cluster, policy, args.seed, args.round_length))
                continue
            if gdir:
                out, wall, cpu = timed(gavel_cmd(args.gavel_python, trace, args.cluster, policy, args.seed,
                                                 args.round_length), cwd=gdir)
                gavel = parse_gavel(out)
                g_w.append(wall)
                g_c.append(cpu)
            out, wall, cpu = timed(ours_cmd(trace, args.cluster, policy, args.seed, args.round_length))
            doc = json.loads(out)["policies"][policy]
            ours_w.append(wall)
            ours_c.append(cpu)
        jct, span = doc["avg_jct_s"], doc["makespan_s"]
        w, c = statistics.median(ours_w), statistics.median(ours_c)
        if gavel is not None:
            gj, gs = gavel
            gw, gc = statistics.median(g_w), statistics.median(g_c)
        else:
            gj, gs, gw, gc = recorded.get(policy, (0.0, 0.0, 0.0, 0.0))
        line = (f"{policy:<26}{jct:>10,.0f}{gj:>10,.0f}{ratio(jct, gj):>7}{span:>11,.0f}{gs:>10,.0f}{ratio(span, gs):>7}"
                f"{w:>10.3f}{gw:>8.2f}{speed(gw, w):>6}{c:>9.3f}{gc:>8.2f}{speed(gc, c):>6}")
        if args.baseline:
            bw, bc = statistics.median(b_w), statistics.median(b_c)
            line += f"{bw:>10.3f}{bc:>6.3f}{ratio(c, bc):>14}  {'same' if base_doc == doc else 'DIFFER'}"
        print(line)
    if args.importtime:
        compare_imports(trace, args.cluster, args.importtime, args.seed, args.round_length, args.runs, args.baseline)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
