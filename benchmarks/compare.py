"""The benchmark gate: the figures of ``benchmarks/`` for this working tree against another commit, measured
side by side in one run, printed as ratios.

    .venv/bin/python benchmarks/compare.py main                  # all figures, 3 rounds
    .venv/bin/python benchmarks/compare.py HEAD~1 --only core,replay --rounds 5
    .venv/bin/python benchmarks/compare.py "$(git merge-base main HEAD)" --tolerance 0.2

How: ``BASE`` is unpacked (``git archive``) into a temporary directory; each benchmark script of *this* tree
is then run twice per round, once with this tree's packages and once with BASE's first on ``PYTHONPATH``
(``hive_scheduler``, ``hive_lab_server``, ``hive_lab``: the editable install only appends this tree, so BASE's
copies win; a server a benchmark starts inherits the variable and runs BASE's code too). The two alternate
which goes first each round, so a machine that gets busier half-way hurts both alike. Each figure is the
median over the rounds; the ratio is this tree's over BASE's, and a figure worse than ``--tolerance``
(default 15 %, the shared machine's noise) is flagged: the exit status is 1 when one is, so the gate can
stand before a merge. A benchmark that fails on one side is reported, not retried (BASE may lack what the
benchmark needs).

Figures (each from one benchmark's printed line; the scripts' docstrings say what they measure):

- core: decision latency p99 (CPU) on ``philly`` at 85 % busy, and with 5 % bad GPUs and a 300-job backlog;
- replay: ``simulate`` philly-dev with hived (CPU), and with ``--replay-100k`` a 100,000-job Philly-like trace;
- server: submits/s closed loop, submit -> running (server timestamps) of a local job;
- reads: the worst read p99 (GET me, jobs, cluster, vcs, a job) and GET me's p50 while submits are offered at
  twice the sustainable rate, and the submits taken and the jobs ended meanwhile (bench_reads.py);
- launch: the local launcher's start of a 1-task job (bench_launch.py), the launch part of submit -> running;
- shed: the server's CPU per write answered 503 while its write budget is spent (bench_shed.py);
- task: a ``true`` task's start to recorded exit, isolated (as root only);
- kernel: kernel start -> first execute reply through the ``hive`` provisioner.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("scheduler", "server_ext", ".")  # where hive_scheduler, hive_lab_server and hive_lab live in a tree


@dataclass(frozen=True)
class Figure:
    name: str
    pattern: str  # a regex whose first group is the figure
    unit: str
    lower_is_better: bool = True


@dataclass(frozen=True)
class Bench:
    key: str
    argv: tuple[str, ...]  # the script (under benchmarks/) and its arguments
    figures: tuple[Figure, ...]
    root_only: bool = False
    timeout_s: float = 600.0


@dataclass
class Side:
    label: str
    tree: pathlib.Path
    values: dict[str, list[float]] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)


BENCHES = (
    Bench("core", ("bench_core.py", "--models", "philly", "--samples", "2000"), (
        Figure("core p99 (CPU), philly 85 % busy", r"^\s*all\s.*CPU p50\s+[\d.]+ ms\s+p99\s+([\d.]+) ms", "ms"),)),
    Bench("core-bad", ("bench_core.py", "--models", "philly", "--bad-gpus", "0.05", "--backlog", "300",
                       "--samples", "2000"), (
        Figure("core p99 (CPU), 5 % bad GPUs + 300 backlog", r"^\s*all\s.*CPU p50\s+[\d.]+ ms\s+p99\s+([\d.]+) ms",
               "ms"),)),
    Bench("replay", ("bench_simulate.py", "--policies", "hived", "--repeat", "3"), (
        Figure("simulate philly-dev, hived (CPU)", r"^\s*hived\s+wall median.*CPU median\s+([\d.]+) s", "s"),)),
    Bench("server", ("bench_server.py", "--submits", "600", "--runs", "10", "--rate", "100"), (
        Figure("submits/s, closed loop", r"throughput\s+([\d.]+) submits/s", "/s", lower_is_better=False),
        Figure("submit -> running, server side", r"server side median\s+([\d.]+) ms", "ms"))),
    Bench("reads", ("bench_reads.py", "--duration", "20", "--measure", "5"), (
        Figure("reads under a 2x write flood: worst p99", r"worst read p99 ([\d.]+) ms", "ms"),
        Figure("GET me p99 under the flood", r"GET me\s+n=\s*\d+\s+p50\s+[\d.]+ ms\s+p99\s+([\d.]+) ms", "ms"),
        Figure("GET me p50 under the flood", r"GET me\s+n=\s*\d+\s+p50\s+([\d.]+) ms", "ms"),
        Figure("jobs ended during the flood", r"jobs ended during the flood \d+ \((\d+)/s\)", "/s",
               lower_is_better=False),
        Figure("submits taken during the flood", r"submits taken (\d+)/s", "/s", lower_is_better=False),
        Figure("sustainable submits/s (50 clients, true jobs)", r"sustainable: (\d+) submits/s", "/s",
               lower_is_better=False))),
    Bench("launch", ("bench_launch.py", "--starts", "30"), (
        Figure("local launcher start, 1 task", r"1 task: median ([\d.]+) ms", "ms"),)),
    Bench("shed", ("bench_shed.py", "--writes", "1000"), (
        Figure("server CPU per shed write (budget spent)", r"server CPU ([\d.]+) ms per write", "ms"),)),
    Bench("task", ("bench_isolation.py", "10"), (
        Figure("isolated task start -> exit", r"isolated.*?: median ([\d.]+) ms", "ms"),), root_only=True),
    Bench("kernel", ("bench_kernel.py", "--runs", "3", "--no-docker"), (
        Figure("kernel start -> first reply (hive)", r"hive provisioner \(local\):\s+([\d.]+)", "s"),)),
)


def unpack(ref: str, into: pathlib.Path) -> pathlib.Path:
    """``ref``'s tree (committed files only) under ``into``."""
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", f"{ref}^{{commit}}"],
                         capture_output=True, text=True)
    if sha.returncode != 0:
        raise SystemExit(f"compare.py: {ref!r} is not a commit of this repository: {sha.stderr.strip()}")
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.Popen(["git", "-C", str(ROOT), "archive", sha.stdout.strip()], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(into)], stdin=archive.stdout, check=True)
    if archive.wait() != 0:
        raise SystemExit(f"compare.py: git archive {ref} failed")
    return into


def environment(tree: pathlib.Path) -> dict[str, str]:
    env = dict(os.environ)
    paths = [str((tree / p).resolve()) for p in PACKAGES]
    env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def check_imports(tree: pathlib.Path) -> None:
    """Each package imports from ``tree`` under its environment (else the comparison would be of one tree)."""
    code = "import hive_scheduler, hive_lab_server, hive_lab; print(hive_scheduler.__file__, hive_lab_server.__file__, hive_lab.__file__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment(tree),
                         cwd=tempfile.gettempdir())
    files = out.stdout.split()
    if out.returncode or len(files) != 3 or not all(pathlib.Path(f).resolve().is_relative_to(tree.resolve()) for f in files):
        raise SystemExit(f"compare.py: the packages do not import from {tree}: {out.stdout.strip()} {out.stderr.strip()[-300:]}")


def run(bench: Bench, side: Side) -> None:
    """One run of ``bench`` with ``side``'s packages; its figures appended to ``side.values``."""
    argv = [sys.executable, str(ROOT / "benchmarks" / bench.argv[0]), *bench.argv[1:]]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, env=environment(side.tree), cwd=str(ROOT),
                             timeout=bench.timeout_s, stdin=subprocess.DEVNULL)
        text = out.stdout + out.stderr
        failed = f"exit {out.returncode}: {text.strip().splitlines()[-1] if text.strip() else ''}" if out.returncode else ""
    except subprocess.TimeoutExpired:
        text, failed = "", f"ran past {bench.timeout_s:.0f} s"
    for fig in bench.figures:
        found = re.search(fig.pattern, text, re.MULTILINE)
        if found and not failed:
            side.values.setdefault(fig.name, []).append(float(found.group(1)))
        else:
            side.failures[fig.name] = failed or "its line was not printed"


def verdict(fig: Figure, ratio: float, tolerance: float) -> str:
    worse = ratio > 1 + tolerance if fig.lower_is_better else ratio < 1 / (1 + tolerance)
    better = ratio < 1 / (1 + tolerance) if fig.lower_is_better else ratio > 1 + tolerance
    return "WORSE" if worse else "better" if better else "same"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base", help="the commit to compare with (a branch, a sha, HEAD~1, the merge base)")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each benchmark per side (default 3)")
    ap.add_argument("--only", default="", help=f"comma-separated benchmarks: {', '.join(b.key for b in BENCHES)}")
    ap.add_argument("--tolerance", type=float, default=0.15, help="a ratio beyond 1 +- this is flagged (0.15)")
    ap.add_argument("--replay-100k", action="store_true",
                    help="also the 100,000-job Philly-like replay (generates the trace once, ~1 min)")
    args = ap.parse_args(argv)
    wanted = {k.strip() for k in args.only.split(",") if k.strip()}
    unknown = wanted - {b.key for b in BENCHES}
    if unknown:
        ap.error(f"unknown benchmark(s) {', '.join(sorted(unknown))}; choose from {', '.join(b.key for b in BENCHES)}")
    benches = [b for b in BENCHES if not wanted or b.key in wanted]
    skipped = [b.key for b in benches if b.root_only and os.geteuid() != 0]
    benches = [b for b in benches if not (b.root_only and os.geteuid() != 0)]
    with tempfile.TemporaryDirectory(prefix="hive-compare-") as tmp:
        if args.replay_100k:
            trace = pathlib.Path(tmp) / "philly-100k.csv"
            subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gen_philly_trace.py"), "--out", str(trace)],
                           check=True, capture_output=True)
            benches.append(Bench("replay-100k", ("bench_simulate.py", "--trace", str(trace), "--policies", "hived",
                                                 "--repeat", "1", "--target", "30"), (
                Figure("simulate 100k Philly-like, hived (CPU)", r"^\s*hived\s+wall median.*CPU median\s+([\d.]+) s",
                       "s"),), timeout_s=900))
        base = Side(f"{args.base}", unpack(args.base, pathlib.Path(tmp) / "base"))
        head = Side("this tree", ROOT)
        for side in (base, head):
            check_imports(side.tree)
        load = os.getloadavg()[0]
        print(f"comparing this tree with {args.base}: {len(benches)} benchmark(s) x {args.rounds} round(s) x 2 sides; "
              f"{os.cpu_count()} CPUs, load average {load:.1f}", flush=True)
        for r in range(args.rounds):
            for bench in benches:
                for side in ((base, head) if r % 2 == 0 else (head, base)):
                    run(bench, side)
                print(f"  round {r + 1}: {bench.key} done", flush=True)
    rows, flagged = [], 0
    for bench in benches:
        for fig in bench.figures:
            b, h = base.values.get(fig.name, []), head.values.get(fig.name, [])
            if not b or not h:
                why = "; ".join(f"{s.label}: {s.failures[fig.name]}" for s in (base, head) if fig.name in s.failures)
                rows.append((fig.name, "-", "-", "-", f"not compared ({why})"))
                continue
            mb, mh = statistics.median(b), statistics.median(h)
            ratio = mh / mb if mb else float("inf")
            said = verdict(fig, ratio, args.tolerance)
            flagged += said == "WORSE"
            rows.append((fig.name, f"{mb:.3g} {fig.unit}", f"{mh:.3g} {fig.unit}", f"{ratio:.2f}", said))
    width = max(len(r[0]) for r in rows) if rows else 10
    print(f"\n{'figure':{width}}  {args.base + ' (median)':>18}  {'this tree (median)':>18}  ratio  verdict")
    for name, mb, mh, ratio, said in rows:
        print(f"{name:{width}}  {mb:>18}  {mh:>18}  {ratio:>5}  {said}")
    print(f"\nratio = this tree / {args.base} (lower is better for times, higher for rates); "
          f"'WORSE'/'better': beyond {args.tolerance:.0%}; load average now {os.getloadavg()[0]:.1f}")
    if skipped:
        print(f"not run (needs root): {', '.join(skipped)}")
    return 1 if flagged else 0


if __name__ == "__main__":
    sys.exit(main())
